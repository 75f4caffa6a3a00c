// One queue: summary, throughput, consumer groups (lag, seek, delete),
// its partitions a page at a time, and its options.

import * as api from '/ui/api.js';
import { html, setHTML, num, duration, time, enc, yesno, groupLabel, errorArea, card, QUEUE_MODE } from '/ui/dom.js';
import { createChart } from '/ui/chart.js';

const PART_PAGE = 100;
const GROUP_PARTITIONS = 1000;

export function mount(root, [name], ctx) {
	const qpath = `/api/v1/resources/queues/${enc(name)}`;
	root.innerHTML = String(html`
<nav aria-label="Breadcrumb" class="crumbs"><a href="#/">Overview</a> <span aria-hidden="true">›</span> <span>Queue</span></nav>
<h1>Queue <span class="name">${name}</span></h1>
<div class="view-error" role="alert" hidden></div>
<div class="view-body">
<p class="links">
  <a href="#/dlq/${enc(name)}" data-testid="dlq-link">Dead letters</a>
  <a href="#/queues/${enc(name)}/messages" data-testid="browse-link">Browse messages</a>
</p>
<section class="panel" aria-labelledby="sum-h">
  <h2 id="sum-h">Summary</h2>
  <div id="summary" class="cards"><p class="muted">Loading…</p></div>
</section>
<section class="panel" aria-labelledby="tp-h">
  <h2 id="tp-h">Throughput, last hour</h2>
  <div id="chart" class="chart" data-testid="throughput-chart" role="img" aria-label="Messages pushed and popped per second over the last hour; the same figures are in the table below the chart."></div>
  <div id="chart-table"></div>
</section>
<section class="panel" aria-labelledby="groups-h">
  <h2 id="groups-h">Consumer groups</h2>
  <p class="muted small">Seeking moves a group's cursor on every partition of this queue and releases its leases. A moment is ISO-8601 (<code>2026-12-06T09:30Z</code>) or your local time (<code>2026-12-06 10:30</code>).</p>
  <div class="table-wrap" role="region" aria-labelledby="groups-h" tabindex="0">
    <table class="data" data-testid="groups-table">
      <thead><tr>
        <th scope="col">Group</th><th scope="col" class="num">Partitions</th><th scope="col" class="num">With lag</th>
        <th scope="col" class="num">Pending</th><th scope="col" class="num">Leased</th><th scope="col" class="num">Lag</th>
        <th scope="col">Subscription</th><th scope="col">Actions</th>
      </tr></thead>
      <tbody id="groups-body"></tbody>
    </table>
  </div>
  <div id="group-detail" class="subpanel" hidden></div>
</section>
<section class="panel" aria-labelledby="parts-h">
  <h2 id="parts-h">Partitions</h2>
  <div class="pager">
    <button type="button" data-testid="partitions-prev" id="parts-prev" disabled>Previous page</button>
    <span id="parts-page" class="muted" aria-live="polite"></span>
    <button type="button" data-testid="partitions-next" id="parts-next" disabled>Next page</button>
  </div>
  <div class="table-wrap" role="region" aria-labelledby="parts-h" tabindex="0">
    <table class="data" data-testid="partitions-table">
      <thead><tr>
        <th scope="col">Partition</th><th scope="col" class="num">Messages</th><th scope="col" class="num">Pending</th>
        <th scope="col" class="num">Processing</th><th scope="col" class="num">Completed</th><th scope="col" class="num">Dead letters</th>
        <th scope="col" class="num">Last offset</th><th scope="col" class="num">Log start</th><th scope="col" class="num">Groups</th>
        <th scope="col">Oldest message</th><th scope="col">Last write</th>
      </tr></thead>
      <tbody id="parts-body"></tbody>
    </table>
  </div>
</section>
<section class="panel" aria-labelledby="opts-h">
  <h2 id="opts-h">Options</h2>
  <div id="options"></div>
</section>
</div>`);

	const el = (id) => root.querySelector(`#${id}`);
	const errors = errorArea(root.querySelector('.view-error'), root.querySelector('.view-body'));
	const chart = createChart(el('chart'), el('chart-table'));
	const st = { offset: 0, count: 0, expanded: null, groups: [], rowSeq: 0 };

	el('parts-prev').addEventListener('click', () => { st.offset = Math.max(0, st.offset - PART_PAGE); ctx.refreshSoon(); });
	el('parts-next').addEventListener('click', () => { st.offset += PART_PAGE; ctx.refreshSoon(); });
	el('groups-body').addEventListener('click', onGroupAction);
	el('groups-body').addEventListener('keydown', (e) => {
		// Enter in the moment box means "seek to that moment".
		if (e.key === 'Enter' && e.target.matches('[data-testid="seek-time"]')) {
			e.preventDefault();
			e.target.closest('tr').querySelector('[data-testid="seek-at"]').click();
		}
	});

	async function refresh(signal) {
		const [q, ops] = await Promise.all([
			api.get(qpath, { query: { limit: PART_PAGE, offset: st.offset }, signal }),
			api.get('/api/v1/analytics/queue-ops', { query: { queue: name }, signal }).then((v) => ({ ok: true, v }),
				(e) => { if (e instanceof api.ApiError && !(e instanceof api.AuthRequired)) return { ok: false, e }; throw e; }),
		]);
		let detail = null;
		if (st.expanded !== null) {
			detail = await api.get(`/api/v1/consumer-groups/${enc(st.expanded)}`, { query: { limit: GROUP_PARTITIONS }, signal })
				.then((v) => ({ ok: true, v }), (e) => { if (e instanceof api.ApiError && !(e instanceof api.AuthRequired)) return { ok: false, e }; throw e; });
		}
		// A page past the end (partitions deleted meanwhile): go back to the last one.
		if (q.partitions.length === 0 && st.offset > 0 && q.partitionCount > 0) {
			st.offset = Math.floor((q.partitionCount - 1) / PART_PAGE) * PART_PAGE;
			return refresh(signal);
		}
		errors.clear();
		renderSummary(q);
		if (ops.ok) chart.update(ops.v);
		else setHTML(el('chart-table'), html`<p class="muted">Throughput unavailable: ${api.describe(ops.e)}</p>`);
		renderGroups(q.consumerGroups || []);
		renderDetail(detail);
		renderPartitions(q);
		renderOptions(q.options || {});
	}

	function renderSummary(q) {
		const t = q.totals || {};
		const dl = t.deadLetter || 0;
		setHTML(el('summary'), [
			card('Namespace / task', html`${q.namespace || '–'} / ${q.task || '–'}`),
			card('Partitions', num(q.partitionCount)),
			card('Messages retained', num(t.total), html`${num(t.pushed)} pushed in all`),
			card('Dead letters', dl ? html`<a href="#/dlq/${enc(name)}" data-fkey="sum-dlq">${num(dl)}</a>` : '0'),
			card('Consumer groups', num((q.consumerGroups || []).length)),
			card('Created', time(q.createdAt), html`stats ${duration(q.statsAge)} old`),
		].join(''));
	}

	// Group rows are updated in place, keyed by name, so a moment being typed
	// into a row's box survives the refresh.
	function renderGroups(groups) {
		st.groups = groups;
		const body = el('groups-body');
		const seen = new Set();
		if (!groups.length) {
			setHTML(body, '<tr><td colspan="8" class="empty">No consumer group has read this queue yet.</td></tr>');
			return;
		}
		if (body.querySelector('td.empty')) { body.innerHTML = ''; body._html = undefined; }
		let prev = null;
		for (const g of groups) {
			seen.add(g.name);
			let tr = [...body.children].find((r) => r.dataset.group === g.name);
			if (!tr) {
				tr = newGroupRow(g.name);
				if (prev) prev.after(tr); else body.prepend(tr);
			}
			const cells = String(html`<th scope="row" class="d">${groupLabel(g.name)}</th>
				<td class="num d">${num(g.partitions)}</td><td class="num d">${num(g.partitionsWithLag)}</td>
				<td class="num d" data-testid="group-pending" data-value="${g.pending}">${num(g.pending)}</td>
				<td class="num d">${num(g.leased)}</td>
				<td class="num d" data-testid="group-lag" data-value="${g.lagSeconds}">${duration(g.lagSeconds)}</td>
				<td class="d">${g.subscriptionMode || '–'}${g.subscriptionTimestamp ? html` from ${time(g.subscriptionTimestamp)}` : ''}</td>`);
			if (tr._cells !== cells) {
				tr.querySelectorAll('.d').forEach((c) => c.remove());
				tr.insertAdjacentHTML('afterbegin', cells);
				tr._cells = cells;
			}
			const btn = tr.querySelector('[data-testid="group-partitions"]');
			btn.setAttribute('aria-expanded', String(st.expanded === g.name));
			prev = tr;
		}
		for (const tr of [...body.children]) if (!seen.has(tr.dataset.group)) tr.remove();
		if (st.expanded !== null && !seen.has(st.expanded)) st.expanded = null;
	}

	function newGroupRow(gname) {
		const i = ++st.rowSeq;
		const who = gname === QUEUE_MODE ? 'queue mode' : `group ${gname}`;
		const tr = document.createElement('tr');
		tr.dataset.testid = 'group-row';
		tr.dataset.group = gname;
		tr.innerHTML = String(html`<td class="actions">
			<button type="button" data-testid="group-partitions" aria-expanded="false" aria-controls="group-detail">Partition lag<span class="sr-only"> of ${who}</span></button>
			<button type="button" data-testid="seek-end">Seek to end<span class="sr-only"> for ${who}</span></button>
			<span class="seek-at">
				<label for="seek-time-${i}">Moment<span class="sr-only"> for ${who}</span></label>
				<input type="text" id="seek-time-${i}" data-testid="seek-time" inputmode="text" spellcheck="false" autocomplete="off" placeholder="2026-12-06T09:30Z" size="18">
				<button type="button" data-testid="seek-at">Seek to moment<span class="sr-only"> for ${who}</span></button>
			</span>
			<button type="button" data-testid="group-delete" class="danger">Delete group<span class="sr-only"> ${who}</span></button>
		</td>`);
		return tr;
	}

	async function onGroupAction(e) {
		const b = e.target.closest('button');
		if (!b) return;
		const tr = b.closest('tr');
		const g = tr.dataset.group;
		const who = g === QUEUE_MODE ? 'queue mode (no group)' : `group "${g}"`;
		const seekPath = `/api/v1/consumer-groups/${enc(g)}/queues/${enc(name)}/seek`;
		switch (b.dataset.testid) {
		case 'group-partitions':
			st.expanded = st.expanded === g ? null : g;
			if (st.expanded === null) { renderDetail(null); b.setAttribute('aria-expanded', 'false'); }
			else renderDetailLoading(g);
			ctx.refreshSoon();
			return;
		case 'seek-end': {
			const ok = await ctx.confirm({
				title: `Seek ${who} to the end?`,
				message: `Its cursor on every partition of queue "${name}" moves past the last message: everything not yet consumed is skipped. Its leases are released.`,
				yes: 'Seek to end', danger: true,
			});
			if (!ok) return;
			const r = await ctx.act(`Seek ${who}`, () => api.post(seekPath, { toEnd: true }));
			if (r.ok) ctx.notify(`Sought ${who} to the end: ${num(r.value.partitionsUpdated)} partitions updated.`, 'ok');
			ctx.refreshSoon();
			return;
		}
		case 'seek-at': {
			const input = tr.querySelector('[data-testid="seek-time"]');
			const when = parseMoment(input.value);
			if (!when) {
				input.setAttribute('aria-invalid', 'true');
				ctx.notify(`Seek ${who}: "${input.value}" is not a moment; write for example 2026-12-06T09:30Z or 2026-12-06 10:30 (local).`, 'error');
				input.focus();
				return;
			}
			input.removeAttribute('aria-invalid');
			const iso = when.toISOString();
			const ok = await ctx.confirm({
				title: `Seek ${who} to a moment?`,
				message: `Its cursor on every partition of queue "${name}" moves to the first message stored at or after ${iso} (${when.toLocaleString()} local time). Its leases are released.`,
				yes: 'Seek to moment', danger: true,
			});
			if (!ok) return;
			const r = await ctx.act(`Seek ${who}`, () => api.post(seekPath, { timestamp: iso }));
			if (r.ok) ctx.notify(`Sought ${who} to ${iso}: ${num(r.value.partitionsUpdated)} partitions updated.`, 'ok');
			ctx.refreshSoon();
			return;
		}
		case 'group-delete': {
			const ok = await ctx.confirm({
				title: `Delete ${who} on this queue?`,
				message: `Its cursors and leases on queue "${name}" and its remembered subscription are deleted. Its next pop starts over as at its first contact.`,
				yes: 'Delete group', danger: true,
			});
			if (!ok) return;
			const r = await ctx.act(`Delete ${who}`, () => api.del(`/api/v1/consumer-groups/${enc(g)}/queues/${enc(name)}`));
			if (r.ok) ctx.notify(`Deleted ${who} on "${name}": ${num(r.value.deletedCursors)} cursors.`, 'ok');
			if (r.ok && st.expanded === g) { st.expanded = null; renderDetail(null); }
			ctx.refreshSoon();
			return;
		}
		default:
		}
	}

	function renderDetailLoading(g) {
		const box = el('group-detail');
		box.hidden = false;
		setHTML(box, html`<h3>Partition lag of ${groupLabel(g)}</h3><p class="muted">Loading…</p>`);
	}

	function renderDetail(detail) {
		const box = el('group-detail');
		if (st.expanded === null || !detail) {
			box.hidden = true;
			setHTML(box, '');
			return;
		}
		box.hidden = false;
		const g = st.expanded;
		if (!detail.ok) {
			setHTML(box, html`<h3>Partition lag of ${groupLabel(g)}</h3><p>${api.describe(detail.e)}</p>`);
			return;
		}
		const mine = detail.v[name];
		const parts = mine ? mine.partitions : [];
		const known = st.groups.find((x) => x.name === g);
		const rows = parts.map((p) => html`<tr><th scope="row">${p.partition}</th>
			<td class="num">${num(p.committed)}</td><td class="num">${num(p.lastOffset)}</td>
			<td class="num">${num(p.offsetLag)}</td><td class="num">${duration(p.timeLagSeconds)}</td>
			<td>${yesno(p.leaseActive)}${p.leaseExpiresAt ? html` until ${time(p.leaseExpiresAt)}` : ''}</td>
			<td class="num">${num(p.totalConsumed)}</td></tr>`);
		const note = known && parts.length < known.partitions
			? html`<p class="muted small">${num(parts.length)} of the group's ${num(known.partitions)} partitions here are shown (the route returns at most ${num(GROUP_PARTITIONS)} over all the group's queues).</p>` : '';
		setHTML(box, html`<h3>Partition lag of ${groupLabel(g)}</h3>${note}
			<div class="table-wrap" role="region" aria-label="Partition lag" tabindex="0"><table class="data" data-testid="group-partitions-table">
			<thead><tr><th scope="col">Partition</th><th scope="col" class="num">Committed offset</th><th scope="col" class="num">Last offset</th>
			<th scope="col" class="num">Lag (messages)</th><th scope="col" class="num">Lag (time)</th><th scope="col">Leased</th>
			<th scope="col" class="num">Consumed</th></tr></thead>
			<tbody>${rows.length ? rows : html`<tr><td colspan="7" class="empty">No cursor of this group on this queue.</td></tr>`}</tbody></table></div>`);
	}

	function renderPartitions(q) {
		st.count = q.partitionCount || 0;
		const rows = q.partitions.map((p) => {
			const m = p.messages || {};
			return html`<tr data-testid="partition-row" data-partition="${p.name}"><th scope="row" title="${p.id}">${p.name}</th>
				<td class="num">${num(m.total)}</td><td class="num">${num(m.pending)}</td><td class="num">${num(m.processing)}</td>
				<td class="num">${num(m.completed)}</td><td class="num">${num(m.deadLetter)}</td>
				<td class="num">${num(p.lastOffset)}</td><td class="num">${num(p.logStart)}</td>
				<td class="num">${num(p.cursor?.consumerGroups)}</td>
				<td>${time(p.oldestMessage)}</td><td>${time(p.lastWriteAt)}</td></tr>`;
		});
		setHTML(el('parts-body'), rows.length ? html`${rows}` : '<tr><td colspan="11" class="empty">No partitions.</td></tr>');
		const first = st.count ? st.offset + 1 : 0;
		const last = Math.min(st.count, st.offset + q.partitions.length);
		el('parts-page').textContent = `Partitions ${num(first)}–${num(last)} of ${num(st.count)}`;
		el('parts-prev').disabled = st.offset === 0;
		el('parts-next').disabled = st.offset + PART_PAGE >= st.count;
	}

	function renderOptions(opts) {
		const keys = Object.keys(opts).sort();
		setHTML(el('options'), html`<dl class="options">${keys.map((k) => html`<div><dt>${k}</dt><dd>${fmtOpt(opts[k])}</dd></div>`)}</dl>`);
	}

	return {
		title: `Queue ${name}`,
		refresh,
		showError(e) { errors.show(e.status, api.describe(e)); },
		unmount() { chart.destroy(); },
	};
}

function fmtOpt(v) {
	if (typeof v === 'boolean') return v ? 'true' : 'false';
	if (v === '' || v === null || v === undefined) return '""';
	return String(v);
}

// ISO-8601 with a zone, or a local "YYYY-MM-DD[ T]HH:MM[:SS]".
export function parseMoment(s) {
	const t = (s || '').trim();
	if (!/^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}(:?\d{2})?)?$/i.test(t)) return null;
	let norm = t.replace(' ', 'T');
	// A bare date is taken as local midnight, as the time-of-day forms are.
	if (/^\d{4}-\d{2}-\d{2}$/.test(norm)) norm += 'T00:00';
	// Date() wants offsets as +HH:MM.
	norm = norm.replace(/(T[\d:.]+[+-]\d{2})$/, '$1:00').replace(/(T[\d:.]+[+-]\d{2})(\d{2})$/, '$1:$2');
	const d = new Date(norm);
	return Number.isNaN(d.getTime()) ? null : d;
}
