// One message, found by partition and transactionId: payload, where it sits,
// its fate per consumer group, its dead letter if any, and its traces.

import * as api from '/ui/api.js';
import { html, setHTML, num, time, enc, pretty, yesno, groupLabel, errorArea } from '/ui/dom.js';

const STATUS_TEXT = {
	pending: 'pending: not yet acknowledged by every group',
	processing: 'processing: a live lease holds it',
	completed: 'completed: every group with a cursor committed it',
	dead_letter: 'dead letter',
};

export function mount(root, [partitionId, tx], ctx) {
	const path = `/api/v1/messages/${enc(partitionId)}/${enc(tx)}`;
	root.innerHTML = String(html`
<nav aria-label="Breadcrumb" class="crumbs" id="crumbs"><a href="#/">Overview</a> <span aria-hidden="true">›</span> <span>Message</span></nav>
<h1>Message <span class="name">${tx}</span></h1>
<div class="view-error" role="alert" hidden></div>
<div class="view-body">
<section class="panel" aria-labelledby="where-h">
  <h2 id="where-h">Where and when</h2>
  <div id="facts"><p class="muted">Loading…</p></div>
  <div id="dead" hidden></div>
</section>
<section class="panel" aria-labelledby="payload-h">
  <h2 id="payload-h">Payload</h2>
  <pre class="payload payload-large" data-testid="message-payload" id="payload" tabindex="0" aria-labelledby="payload-h"></pre>
</section>
<section class="panel" aria-labelledby="groups-h">
  <h2 id="groups-h">Consumer groups</h2>
  <div class="table-wrap" role="region" aria-labelledby="groups-h" tabindex="0">
    <table class="data"><thead><tr><th scope="col">Group</th><th scope="col">Consumed</th><th scope="col">Leased</th><th scope="col">Lease expires</th><th scope="col" class="num"><abbr title="Deliveries of the batch holding it since the group last committed; – once committed">Delivery attempts</abbr></th></tr></thead>
    <tbody id="groups-body"></tbody></table>
  </div>
</section>
<section class="panel" aria-labelledby="traces-h">
  <h2 id="traces-h">Traces</h2>
  <div class="table-wrap" role="region" aria-labelledby="traces-h" tabindex="0">
    <table class="data" data-testid="traces-table"><thead><tr><th scope="col">Recorded</th><th scope="col">Event</th>
      <th scope="col">Group</th><th scope="col">Names</th><th scope="col">Data</th></tr></thead>
    <tbody id="traces-body"></tbody></table>
  </div>
</section>
</div>`);

	const el = (id) => root.querySelector(`#${id}`);
	const errors = errorArea(root.querySelector('.view-error'), root.querySelector('.view-body'));
	let current = null;

	el('dead').addEventListener('click', async (e) => {
		if (!e.target.closest('[data-testid="message-retry"]') || !current) return;
		const ok = await ctx.confirm({
			title: 'Replay this message?',
			message: `Its newest dead letter is pushed again to partition "${current.partition}" as a new message and leaves the dead letters.`,
			yes: 'Replay',
		});
		if (!ok) return;
		const r = await ctx.act('Replay', () => api.post(`${path}/retry`, {}));
		if (r.ok) {
			const v = r.value;
			if (v.success) ctx.notify(`Replayed as offset ${v.replayedAs?.offset} (transactionId ${v.replayedAs?.transactionId}).`, 'ok');
			else ctx.notify(`Replay: ${v.error || v.result}`, 'warn');
		}
		ctx.refreshSoon();
	});

	async function refresh(signal) {
		const [m, t] = await Promise.all([
			api.get(path, { signal }),
			api.get(`/api/v1/traces/${enc(partitionId)}/${enc(tx)}`, { signal }).then((v) => ({ ok: true, v }),
				(e) => { if (e instanceof api.ApiError && !(e instanceof api.AuthRequired)) return { ok: false, e }; throw e; }),
		]);
		errors.clear();
		current = m;
		render(m);
		renderTraces(t);
	}

	function render(m) {
		setHTML(el('crumbs'), html`<a href="#/">Overview</a> <span aria-hidden="true">›</span>
			<a href="#/queues/${enc(m.queue)}" data-fkey="crumb-q">Queue ${m.queue}</a> <span aria-hidden="true">›</span> <span>Message</span>`);
		const status = STATUS_TEXT[m.status] || m.status;
		setHTML(el('facts'), html`<dl class="facts">
			<div><dt>Status</dt><dd data-testid="message-status" data-value="${m.status}"><span class="tag ${m.status === 'dead_letter' ? 'tag-no' : m.status === 'completed' ? 'tag-yes' : 'tag-warn'}">${status}</span></dd></div>
			<div><dt>Queue</dt><dd><a href="#/queues/${enc(m.queue)}" data-fkey="q">${m.queue}</a></dd></div>
			<div><dt>Partition</dt><dd>${m.partition} <span class="muted small">(${m.partitionId})</span></dd></div>
			<div><dt>Offset</dt><dd data-testid="message-offset">${num(m.offset)}</dd></div>
			<div><dt>Transaction id</dt><dd>${m.transactionId}</dd></div>
			<div><dt>Message id</dt><dd>${m.id}</dd></div>
			<div><dt>Created</dt><dd>${time(m.createdAt)}</dd></div>
			<div><dt>Traces</dt><dd>${num(m.traces)}</dd></div>
			<div><dt>Namespace / task</dt><dd>${m.namespace || '–'} / ${m.task || '–'}</dd></div>
		</dl>`);
		const dead = el('dead');
		if (m.deadLetterId) {
			dead.hidden = false;
			setHTML(dead, html`<div class="subpanel">
				<h3>Dead letter</h3>
				<p>Filed ${time(m.failedAt)}: <span class="error-text">${m.errorMessage ?? '(no text)'}</span></p>
				<p>Retries spent before filing: <span data-testid="message-retries">${num(m.retryCount)}</span>
					<span class="muted small">(the queue's retry limit is ${num(m.queueConfig?.retryLimit)})</span></p>
				<p><a href="#/dlq/${enc(m.queue)}" data-fkey="dlq">All dead letters of ${m.queue}</a></p>
				<button type="button" data-testid="message-retry" data-fkey="retry">Replay this message</button></div>`);
		} else {
			dead.hidden = true;
			setHTML(dead, '');
		}
		const payload = el('payload');
		const text = pretty(m.payload);
		if (payload.textContent !== text) payload.textContent = text;
		const groups = (m.consumerGroups || []).map((g) => html`<tr><th scope="row">${groupLabel(g.name)}</th>
			<td>${yesno(g.consumed)}</td><td>${yesno(g.leased)}</td><td>${time(g.leaseExpiresAt)}</td>
			<td class="num" data-testid="delivery-attempts">${g.deliveryAttempts == null ? '–' : num(g.deliveryAttempts)}</td></tr>`);
		setHTML(el('groups-body'), groups.length ? html`${groups}` : '<tr><td colspan="5" class="empty">No consumer group has a cursor on its partition.</td></tr>');
	}

	function renderTraces(t) {
		if (!t.ok) {
			setHTML(el('traces-body'), html`<tr><td colspan="5" class="empty">Traces unavailable: ${api.describe(t.e)}</td></tr>`);
			return;
		}
		const rows = (t.v.traces || []).map((x) => html`<tr data-testid="trace-row"><td>${time(x.created_at)}</td><td>${x.event_type}</td>
			<td>${groupLabel(x.consumer_group)}</td><td>${(x.trace_names || []).join(', ')}</td>
			<td><pre class="payload" tabindex="0">${pretty(x.data)}</pre></td></tr>`);
		setHTML(el('traces-body'), rows.length ? html`${rows}` : '<tr><td colspan="5" class="empty">No traces recorded for this message.</td></tr>');
	}

	return {
		title: `Message ${tx}`,
		refresh,
		showError(e) { errors.show(e.status, api.describe(e)); },
	};
}
