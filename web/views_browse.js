// Browsing a queue's messages, newest first, a page at a time. The broker
// merges the newest messages of the 100 partitions written last (docs/HTTP.md),
// and offsets stop at 9,000, so this is a window on recent traffic.

import * as api from '/ui/api.js';
import { html, setHTML, num, time, enc, errorArea } from '/ui/dom.js';

const LIMIT = 50;
const MAX_OFFSET = 9000;

export function mount(root, [name], ctx) {
	root.innerHTML = String(html`
<nav aria-label="Breadcrumb" class="crumbs"><a href="#/">Overview</a> <span aria-hidden="true">›</span>
  <a href="#/queues/${enc(name)}">Queue ${name}</a> <span aria-hidden="true">›</span> <span>Messages</span></nav>
<h1>Messages of <span class="name">${name}</span></h1>
<div class="view-error" role="alert" hidden></div>
<div class="view-body">
<form class="toolbar inline-form" id="browse-filter">
  <label for="browse-status">Status</label>
  <select id="browse-status" data-testid="browse-status">
    <option value="">any</option><option value="pending">pending</option><option value="processing">processing</option>
    <option value="completed">completed</option><option value="dead_letter">dead letter</option>
  </select>
  <label for="browse-partition">Partition</label>
  <input type="text" id="browse-partition" data-testid="browse-partition" placeholder="every partition" spellcheck="false" autocomplete="off">
  <button type="submit">Apply</button>
</form>
<p class="muted small">Newest first; with a status filter a page may hold fewer than ${LIMIT} messages.</p>
<div class="pager">
  <button type="button" id="browse-prev" data-testid="browse-prev" disabled>Newer</button>
  <span id="browse-page" class="muted" aria-live="polite"></span>
  <button type="button" id="browse-next" data-testid="browse-next" disabled>Older</button>
</div>
<div class="table-wrap" role="region" aria-labelledby="browse-caption" tabindex="0">
  <table class="data" data-testid="messages-table">
    <caption id="browse-caption" class="sr-only">Messages, newest first</caption>
    <thead><tr><th scope="col">Transaction id</th><th scope="col">Partition</th><th scope="col" class="num">Offset</th>
      <th scope="col">Status</th><th scope="col">Created</th></tr></thead>
    <tbody id="browse-body"></tbody>
  </table>
</div>
</div>`);

	const el = (id) => root.querySelector(`#${id}`);
	const errors = errorArea(root.querySelector('.view-error'), root.querySelector('.view-body'));
	const st = { offset: 0, status: '', partition: '', got: 0 };

	el('browse-filter').addEventListener('submit', (e) => {
		e.preventDefault();
		st.status = el('browse-status').value;
		st.partition = el('browse-partition').value.trim();
		st.offset = 0;
		ctx.refreshSoon();
	});
	el('browse-prev').addEventListener('click', () => { st.offset = Math.max(0, st.offset - LIMIT); ctx.refreshSoon(); });
	el('browse-next').addEventListener('click', () => { st.offset = Math.min(MAX_OFFSET, st.offset + LIMIT); ctx.refreshSoon(); });

	async function refresh(signal) {
		const d = await api.get(`/api/v1/status/queues/${enc(name)}/messages`, {
			query: { status: st.status, partition: st.partition, limit: LIMIT, offset: st.offset }, signal,
		});
		errors.clear();
		const rows = d.messages.map((m) => html`<tr data-testid="message-row">
			<th scope="row"><a href="#/messages/${enc(m.partitionId)}/${enc(m.transactionId)}" data-fkey="m:${m.id}">${m.transactionId}</a></th>
			<td>${m.partition}</td><td class="num">${num(m.offset)}</td>
			<td><span class="tag ${m.status === 'dead_letter' ? 'tag-no' : m.status === 'completed' ? 'tag-yes' : 'tag-warn'}">${m.status.replace('_', ' ')}</span></td>
			<td>${time(m.createdAt)}</td></tr>`);
		setHTML(el('browse-body'), rows.length ? html`${rows}` : '<tr><td colspan="5" class="empty">No messages on this page.</td></tr>');
		el('browse-page').textContent = d.messages.length
			? `Messages ${num(st.offset + 1)}–${num(st.offset + d.messages.length)}` : `Nothing from ${num(st.offset + 1)} on`;
		el('browse-prev').disabled = st.offset === 0;
		// Without a total, a short page is the end (unless a status filter thinned it).
		el('browse-next').disabled = st.offset + LIMIT > MAX_OFFSET || (d.messages.length < LIMIT && !st.status);
	}

	return {
		title: `Messages of ${name}`,
		refresh,
		showError(e) { errors.show(e.status, api.describe(e)); },
	};
}
