// Overview: the broker's state and every queue of the tenant in one table.

import * as api from '/ui/api.js';
import { html, esc, setHTML, num, rate, duration, time, ago, enc, debounce, groupLabel, card, errorArea } from '/ui/dom.js';
import { parseMetrics, gauge } from '/ui/metrics.js';

const PAGE = 1000;          // the most a page of /api/v1/resources/queues holds
const MAX_QUEUES = 10000;   // past this the table would stop being useful; say so
const ROWS_SHOWN = 2000;    // rows rendered at once; the filter narrows the rest
const METRICS = new Set([
	'queen_shard_ready', 'queen_push_permits_limit', 'queen_push_permits_inflight',
	'queen_retention_last_sweep_timestamp_seconds', 'queen_maintenance_mode', 'queen_uptime_seconds',
]);

const COLUMNS = [
	// key, header, numeric, value getter
	['name', 'Queue', false, (q) => q.name],
	['namespace', 'Namespace', false, (q) => q.namespace || ''],
	['task', 'Task', false, (q) => q.task || ''],
	['partitions', 'Partitions', true, (q) => q.partitions],
	['depth', 'Depth (pending)', true, (q) => q.messages?.pending],
	['processing', 'Processing', true, (q) => q.messages?.processing],
	['lag', 'Consumer lag', true, (q) => q.maxLagSeconds],
	['push', 'Push /s', true, (q) => q.rates?.push],
	['pop', 'Pop /s', true, (q) => q.rates?.pop],
	['dlq', 'DLQ', true, (q) => q.messages?.deadLetter],
	['groups', 'Groups', true, (q) => q.consumerGroups],
];

export function mount(root, _params, ctx) {
	root.innerHTML = String(html`
<h1>Overview</h1>
<div class="view-error" role="alert" hidden></div>
<div class="view-body">
<section class="panel" aria-labelledby="broker-h">
  <h2 id="broker-h">Broker</h2>
  <div class="maintenance" id="maint">
    <p class="maint-line">Maintenance mode:
      <strong data-testid="maintenance-state" id="maint-state" data-state="unknown">unknown</strong>
      <span id="maint-note" class="muted"></span></p>
    <button type="button" data-testid="maintenance-toggle" id="maint-toggle" disabled>Maintenance mode</button>
  </div>
  <div id="broker-body" class="cards"><p class="muted">Loading…</p></div>
</section>
<section class="panel" aria-labelledby="totals-h">
  <h2 id="totals-h">Totals</h2>
  <div id="totals" class="cards"></div>
</section>
<section class="panel" aria-labelledby="queues-h">
  <h2 id="queues-h">Queues</h2>
  <div class="toolbar">
    <label for="queue-filter">Filter queues</label>
    <input type="search" id="queue-filter" data-testid="queue-filter" placeholder="name, namespace or task" spellcheck="false">
    <span id="queue-count" class="muted" aria-live="polite"></span>
  </div>
  <div class="table-wrap tall" role="region" aria-labelledby="queues-h" tabindex="0">
    <table data-testid="queues-table" class="data">
      <caption class="sr-only">Queues with depth, lag, rates and dead letters. Column headers sort.</caption>
      <thead><tr id="queues-head"></tr></thead>
      <tbody id="queues-body"></tbody>
    </table>
  </div>
  <div class="pager" id="queues-pager" hidden>
    <button type="button" id="queues-prev" data-testid="queues-prev">Previous rows</button>
    <span id="queues-page" class="muted"></span>
    <button type="button" id="queues-next" data-testid="queues-next">Next rows</button>
  </div>
  <p class="muted small" id="queues-note"></p>
</section>
<section class="panel" aria-labelledby="groups-h">
  <h2 id="groups-h">Most lagging consumer groups</h2>
  <div class="table-wrap" role="region" aria-labelledby="groups-h" tabindex="0">
    <table class="data" data-testid="groups-table">
      <thead><tr>
        <th scope="col">Group</th><th scope="col">Queue</th><th scope="col">State</th>
        <th scope="col" class="num">Partitions with lag</th><th scope="col" class="num">Lag (messages)</th>
        <th scope="col" class="num">Max time lag</th><th scope="col" class="num">Leased</th>
      </tr></thead>
      <tbody id="groups-body"></tbody>
    </table>
  </div>
  <p class="muted small" id="groups-note"></p>
</section>
</div>`);

	const el = (id) => root.querySelector(`#${id}`);
	const errors = errorArea(root.querySelector('.view-error'), root.querySelector('.view-body'));
	const st = {
		queues: [], total: 0, filter: '', sort: null, dir: 1, shown: 0,
		maintenance: null, // true/false/null when unknown
	};

	renderHead();

	el('queue-filter').addEventListener('input', debounce((e) => {
		st.filter = e.target.value.trim().toLowerCase();
		st.shown = 0;
		renderRows();
	}, 120));
	el('queues-head').addEventListener('click', (e) => {
		const b = e.target.closest('button[data-sort]');
		if (!b) return;
		const key = b.dataset.sort;
		if (st.sort === key) st.dir = -st.dir;
		else { st.sort = key; st.dir = COLUMNS.find((c) => c[0] === key)[2] ? -1 : 1; }
		renderHead();
		renderRows();
	});
	el('queues-prev').addEventListener('click', () => { st.shown = Math.max(0, st.shown - ROWS_SHOWN); renderRows(); });
	el('queues-next').addEventListener('click', () => { st.shown += ROWS_SHOWN; renderRows(); });
	el('maint-toggle').addEventListener('click', toggleMaintenance);

	function renderHead() {
		el('queues-head').innerHTML = COLUMNS.map(([key, label, numeric]) => {
			const sorted = st.sort === key;
			const aria = sorted ? (st.dir > 0 ? 'ascending' : 'descending') : 'none';
			const arrow = sorted ? (st.dir > 0 ? ' ▲' : ' ▼') : '';
			return String(html`<th scope="col" aria-sort="${aria}" class="${numeric ? 'num' : ''}">
				<button type="button" class="sort" data-sort="${key}" data-fkey="sort:${key}">${label}<span aria-hidden="true">${arrow}</span></button></th>`);
		}).join('');
	}

	function visible() {
		let list = st.queues;
		if (st.filter) {
			list = list.filter((q) => q.name.toLowerCase().includes(st.filter)
				|| (q.namespace || '').toLowerCase().includes(st.filter)
				|| (q.task || '').toLowerCase().includes(st.filter));
		}
		if (st.sort) {
			const col = COLUMNS.find((c) => c[0] === st.sort);
			const get = col[3];
			const dir = st.dir;
			list = list.slice().sort((a, b) => {
				const x = get(a); const y = get(b);
				if (col[2]) return ((Number(x) || 0) - (Number(y) || 0)) * dir;
				return String(x).localeCompare(String(y)) * dir;
			});
		}
		return list;
	}

	// One string, one innerHTML: 1,000 rows render in a few milliseconds.
	function renderRows() {
		const list = visible();
		if (st.shown >= list.length) st.shown = Math.max(0, Math.floor((list.length - 1) / ROWS_SHOWN) * ROWS_SHOWN);
		const page = list.slice(st.shown, st.shown + ROWS_SHOWN);
		let s = '';
		for (const q of page) {
			const m = q.messages || {};
			const href = `#/queues/${enc(q.name)}`;
			s += `<tr data-testid="queue-row" data-queue="${esc(q.name)}">`
				+ `<th scope="row"><a href="${esc(href)}" data-fkey="q:${esc(q.name)}">${esc(q.name)}</a></th>`
				+ `<td>${esc(q.namespace || '')}</td><td>${esc(q.task || '')}</td>`
				+ `<td class="num">${num(q.partitions)}</td>`
				+ `<td class="num" data-testid="depth" data-value="${esc(m.pending ?? '')}">${num(m.pending)}</td>`
				+ `<td class="num">${num(m.processing)}</td>`
				+ `<td class="num" data-testid="lag" data-value="${esc(q.maxLagSeconds ?? '')}">${duration(q.maxLagSeconds)}</td>`
				+ `<td class="num" data-testid="push-rate">${rate(q.rates?.push)}</td>`
				+ `<td class="num" data-testid="pop-rate">${rate(q.rates?.pop)}</td>`
				+ `<td class="num" data-testid="dlq" data-value="${esc(m.deadLetter ?? '')}">`
				+ (m.deadLetter ? `<a href="#/dlq/${esc(enc(q.name))}" data-fkey="d:${esc(q.name)}" aria-label="${esc(`${m.deadLetter} dead letters of ${q.name}`)}">${num(m.deadLetter)}</a>` : num(m.deadLetter))
				+ `</td><td class="num">${num(q.consumerGroups)}</td></tr>`;
		}
		if (!page.length) {
			s = `<tr><td colspan="${COLUMNS.length}" class="empty">${st.queues.length ? 'No queue matches the filter.' : 'No queues yet: a push creates one.'}</td></tr>`;
		}
		setHTML(el('queues-body'), s);
		const n = list.length;
		el('queue-count').textContent = st.filter
			? `${num(n)} of ${num(st.queues.length)} queues match`
			: `${num(st.queues.length)} queues`;
		const pager = el('queues-pager');
		pager.hidden = n <= ROWS_SHOWN;
		if (!pager.hidden) {
			el('queues-page').textContent = `Rows ${num(st.shown + 1)}–${num(Math.min(n, st.shown + ROWS_SHOWN))} of ${num(n)}`;
			el('queues-prev').disabled = st.shown === 0;
			el('queues-next').disabled = st.shown + ROWS_SHOWN >= n;
		}
	}

	async function loadQueues(signal) {
		const first = await api.get('/api/v1/resources/queues', { query: { limit: PAGE, offset: 0 }, signal });
		const all = first.queues.slice();
		const total = first.total ?? all.length;
		const pages = [];
		for (let off = PAGE; off < Math.min(total, MAX_QUEUES); off += PAGE) {
			pages.push(api.get('/api/v1/resources/queues', { query: { limit: PAGE, offset: off }, signal }));
		}
		for (const p of await Promise.all(pages)) all.push(...p.queues);
		return { queues: all, total, statsAge: first.statsAge };
	}

	// Per-queue rates: the broker keeps pushes and pops per queue per minute
	// (queue-ops); we average the last complete minute and the current one.
	// A minute's figure is a difference with the queue's previous stats row,
	// so the first busy minute after a quiet spell reads 0 (the broker has
	// no earlier row in range); the rate catches up a minute later.
	async function loadRates(signal) {
		const from = new Date(Date.now() - 150_000).toISOString();
		const ops = await api.get('/api/v1/analytics/queue-ops', { query: { from }, signal });
		const to = new Date(ops.timeRange?.to || Date.now()).getTime();
		const floorMin = Math.floor(to / 60000) * 60000;
		const acc = new Map();
		for (const s of ops.series || []) {
			const b = new Date(s.bucket).getTime();
			if (b < floorMin - 60000) continue;
			const a = acc.get(s.queueName) || { push: 0, pop: 0, start: b };
			a.push += s.pushMessages || 0;
			a.pop += s.popMessages || 0;
			a.start = Math.min(a.start, b);
			acc.set(s.queueName, a);
		}
		const out = new Map();
		for (const [name, a] of acc) {
			const secs = Math.max(1, (to - a.start) / 1000);
			out.set(name, { push: a.push / secs, pop: a.pop / secs });
		}
		return out;
	}

	const soft = (p) => p.then((v) => ({ ok: true, v }), (e) => {
		if (e instanceof api.Unreachable || e instanceof api.AuthRequired || api.isAbort(e)) throw e;
		return { ok: false, e };
	});

	async function refresh(signal) {
		const [queues, rates, over, maint, buffers, metricsText, health, groups] = await Promise.all([
			loadQueues(signal),
			soft(loadRates(signal)),
			soft(api.get('/api/v1/resources/overview', { signal })),
			soft(api.get('/api/v1/system/maintenance', { signal })),
			soft(api.get('/api/v1/status/buffers', { signal })),
			soft(api.get('/metrics/prometheus', { signal, text: true })),
			soft(api.get('/health', { signal })),
			soft(api.get('/api/v1/consumer-groups', { signal })),
		]);
		errors.clear();
		const rateMap = rates.ok ? rates.v : new Map();
		for (const q of queues.queues) q.rates = rateMap.get(q.name) || (rates.ok ? { push: 0, pop: 0 } : null);
		st.queues = queues.queues;
		st.total = queues.total;
		renderRows();
		const notes = [`Figures from the broker's stats, ${duration(queues.statsAge)} old.`,
			'Depth: messages not yet acknowledged by the most lagging group. Consumer lag: age of the oldest of them.',
			rates.ok ? 'Rates: average over the last complete minute and the current one.' : `Rates unavailable: ${api.describe(rates.e)}.`];
		if (queues.total > MAX_QUEUES) notes.unshift(`Only the ${num(MAX_QUEUES)} newest of ${num(queues.total)} queues are loaded.`);
		el('queues-note').textContent = notes.join(' ');

		const metrics = metricsText.ok ? parseMetrics(metricsText.v, METRICS) : null;
		renderMaintenance(maint, metrics);
		renderBroker(metrics, metricsText, buffers, health);
		renderTotals(over);
		renderGroups(groups);
	}

	function renderMaintenance(maint, metrics) {
		let on = null;
		let note = '';
		if (maint.ok) {
			on = Boolean(maint.v.maintenanceMode);
			note = on ? `pushes go to the disk spool (${num(maint.v.bufferedMessages)} waiting)` : 'pushes go to the tables';
		} else if (metrics && gauge(metrics, 'queen_maintenance_mode') !== null) {
			on = gauge(metrics, 'queen_maintenance_mode') === 1;
			note = maint.e.status === 403 ? "(read from the metrics: your token's role may not read or change it)" : '(read from the metrics)';
		} else {
			note = `could not be read: ${api.describe(maint.e)}`;
		}
		st.maintenance = on;
		const s = el('maint-state');
		s.textContent = on === null ? 'unknown' : on ? 'on' : 'off';
		s.dataset.state = on === null ? 'unknown' : on ? 'on' : 'off';
		s.className = on ? 'tag tag-warn' : on === false ? 'tag tag-yes' : 'tag';
		el('maint-note').textContent = note;
		const b = el('maint-toggle');
		b.disabled = on === null;
		b.textContent = on ? 'Turn maintenance mode off' : 'Turn maintenance mode on';
		b.dataset.next = on ? 'off' : 'on';
	}

	async function toggleMaintenance() {
		if (st.maintenance === null) return;
		const enable = !st.maintenance;
		const yes = await ctx.confirm(enable ? {
			title: 'Turn maintenance mode on?',
			message: 'Every push will be written to the broker\'s disk spool and answered "buffered" instead of going to the tables, until maintenance mode is turned off again. Pops and acks keep working.',
			yes: 'Turn on', danger: true,
		} : {
			title: 'Turn maintenance mode off?',
			message: 'Pushes go to the tables again, and the maintenance worker drains the spool into them, oldest first.',
			yes: 'Turn off',
		});
		if (!yes) return;
		const r = await ctx.act('Maintenance mode', () => api.post('/api/v1/system/maintenance', { enabled: enable }));
		if (r.ok) {
			ctx.notify(r.value.message || `Maintenance mode ${enable ? 'on' : 'off'}.`, 'ok');
			renderMaintenance({ ok: true, v: r.value }, null);
		}
		ctx.refreshSoon();
	}

	function renderBroker(metrics, metricsRes, buffers, health) {
		const cards = [];
		if (health.ok) {
			const h = health.v;
			cards.push(card('Health', h.status === 'healthy' ? 'healthy' : h.status, `database ${h.database}`, h.status === 'healthy' ? 'yes' : 'no'));
		} else {
			cards.push(card('Health', 'unhealthy', api.describe(health.e), 'no'));
		}
		if (metrics) {
			const shards = metrics.get('queen_shard_ready') || [];
			const ready = shards.filter((x) => x.value === 1).length;
			const down = shards.filter((x) => x.value !== 1).map((x) => x.labels.shard);
			cards.push(card('Shards ready', `${ready} of ${shards.length}`,
				down.length ? `not serving: ${down.join(', ')}` : 'all serving', down.length ? 'no' : 'yes'));
			cards.push(card('Push permits', `${num(gauge(metrics, 'queen_push_permits_inflight'))} in flight`,
				`adaptive limit ${num(gauge(metrics, 'queen_push_permits_limit'))}`));
			const sweep = gauge(metrics, 'queen_retention_last_sweep_timestamp_seconds');
			if (sweep) {
				const iso = new Date(sweep * 1000).toISOString();
				cards.push(card('Retention last sweep', time(iso), ago(iso)));
			} else {
				cards.push(card('Retention last sweep', 'not yet', 'no sweep since the broker started'));
			}
			const up = gauge(metrics, 'queen_uptime_seconds');
			if (up !== null) cards.push(card('Broker uptime', duration(up), ''));
		} else {
			cards.push(card('Shards, permits, retention', 'unavailable', `GET /metrics/prometheus: ${api.describe(metricsRes.e)}`, 'no'));
		}
		if (buffers.ok) {
			const b = buffers.v;
			const bad = b.quarantined > 0 || !b.dbHealthy;
			cards.push(card('Spool', `${num(b.pending)} pending`,
				`${num(b.failed)} failed files, ${num(b.quarantined)} quarantined${b.quarantined ? ' (needs an operator)' : ''}; drain sees the database ${b.dbHealthy ? 'healthy' : 'UNHEALTHY'}`,
				bad ? 'no' : 'yes'));
		} else {
			cards.push(card('Spool', 'unavailable', api.describe(buffers.e), 'no'));
		}
		setHTML(el('broker-body'), cards.join(''));
	}

	function renderTotals(over) {
		if (!over.ok) {
			setHTML(el('totals'), html`<p class="muted">Totals unavailable: ${api.describe(over.e)}</p>`);
			return;
		}
		const o = over.v;
		const m = o.messages || {};
		setHTML(el('totals'), [
			card('Queues', num(o.queues), `${num(o.namespaces)} namespaces, ${num(o.tasks)} tasks`),
			card('Partitions', num(o.partitions), ''),
			card('Messages', num(m.total), `${num(m.pending)} pending, ${num(m.processing)} processing`),
			card('Dead letters', num(m.deadLetter), ''),
			card('Consumer groups', num(o.consumerGroups), ''),
			card('Lag', duration(o.lag?.time?.max), `max; average ${duration(o.lag?.time?.avg)}`),
		].join(''));
	}

	function renderGroups(groups) {
		if (!groups.ok) {
			setHTML(el('groups-body'), html`<tr><td colspan="7" class="empty">Unavailable: ${api.describe(groups.e)}</td></tr>`);
			return;
		}
		const list = groups.v.slice().sort((a, b) => (b.totalLag || 0) - (a.totalLag || 0) || (b.maxTimeLag || 0) - (a.maxTimeLag || 0));
		const top = list.slice(0, 20);
		const s = top.map((g) => String(html`<tr>
			<th scope="row">${groupLabel(g.name)}</th>
			<td><a href="#/queues/${enc(g.queueName)}" data-fkey="g:${g.name}:${g.queueName}">${g.queueName}</a></td>
			<td><span class="tag ${g.state === 'Lagging' ? 'tag-warn' : g.state === 'Dead' ? 'tag-no' : 'tag-yes'}">${g.state}</span></td>
			<td class="num">${num(g.partitionsWithLag)}</td><td class="num">${num(g.totalLag)}</td>
			<td class="num">${duration(g.maxTimeLag)}</td><td class="num">${num(g.leased)}</td></tr>`)).join('')
			|| '<tr><td colspan="7" class="empty">No consumer groups yet.</td></tr>';
		setHTML(el('groups-body'), s);
		const lagging = list.filter((g) => g.state === 'Lagging').length;
		el('groups-note').textContent = `${num(list.length)} (group, queue) pairs, ${num(lagging)} lagging (over 300 s); the 20 with the most unacknowledged messages are shown. "Dead": no consumer has a cursor.`;
	}

	return {
		title: 'Overview',
		refresh,
		showError(e) { errors.show(e.status, api.describe(e)); },
	};
}
