// A queue's dead letters: error, payload, replay one, purge all (or a group's).

import * as api from '/ui/api.js';
import { html, setHTML, num, time, enc, pretty, groupLabel, errorArea } from '/ui/dom.js';

const LIMIT = 50;

export function mount(root, [name], ctx) {
	root.innerHTML = String(html`
<nav aria-label="Breadcrumb" class="crumbs"><a href="#/">Overview</a> <span aria-hidden="true">›</span>
  <a href="#/queues/${enc(name)}">Queue ${name}</a> <span aria-hidden="true">›</span> <span>Dead letters</span></nav>
<h1>Dead letters of <span class="name">${name}</span></h1>
<div class="view-error" role="alert" hidden></div>
<div class="view-body">
<div class="toolbar">
  <form id="dlq-filter" class="inline-form">
    <label for="dlq-group">Consumer group</label>
    <input type="text" id="dlq-group" data-testid="dlq-group" placeholder="all groups" spellcheck="false" autocomplete="off">
    <button type="submit">Apply</button>
  </form>
  <button type="button" class="danger" data-testid="dlq-purge" id="dlq-purge">Purge dead letters</button>
</div>
<p id="dlq-count" class="muted" aria-live="polite"></p>
<div class="pager">
  <button type="button" id="dlq-prev" data-testid="dlq-prev" disabled>Newer</button>
  <span id="dlq-page" class="muted"></span>
  <button type="button" id="dlq-next" data-testid="dlq-next" disabled>Older</button>
</div>
<div class="table-wrap" role="region" aria-labelledby="dlq-caption" tabindex="0">
  <table class="data dlq" data-testid="dlq-table">
    <caption id="dlq-caption" class="sr-only">Dead letters, newest first</caption>
    <thead><tr>
      <th scope="col">Filed</th><th scope="col">Message</th><th scope="col">Group</th>
      <th scope="col" class="num">Retries</th><th scope="col">Error</th><th scope="col">Payload</th><th scope="col">Action</th>
    </tr></thead>
    <tbody id="dlq-body"></tbody>
  </table>
</div>
</div>`);

	const el = (id) => root.querySelector(`#${id}`);
	const errors = errorArea(root.querySelector('.view-error'), root.querySelector('.view-body'));
	const st = { offset: 0, total: 0, group: '' };

	el('dlq-filter').addEventListener('submit', (e) => {
		e.preventDefault();
		st.group = el('dlq-group').value.trim();
		st.offset = 0;
		ctx.refreshSoon();
	});
	el('dlq-prev').addEventListener('click', () => { st.offset = Math.max(0, st.offset - LIMIT); ctx.refreshSoon(); });
	el('dlq-next').addEventListener('click', () => { st.offset += LIMIT; ctx.refreshSoon(); });
	el('dlq-purge').addEventListener('click', purge);
	el('dlq-body').addEventListener('click', (e) => {
		const b = e.target.closest('button[data-testid="dlq-replay"]');
		if (b) replay(b.closest('tr').dataset.id, b.closest('tr').dataset.tx);
	});

	async function refresh(signal) {
		const d = await api.get('/api/v1/dlq', {
			query: { queue: name, consumerGroup: st.group, limit: LIMIT, offset: st.offset }, signal,
		});
		if (!d.messages.length && st.offset > 0 && d.total > 0) {
			st.offset = Math.floor((d.total - 1) / LIMIT) * LIMIT;
			return refresh(signal);
		}
		errors.clear();
		st.total = d.total;
		render(d);
	}

	function render(d) {
		const rows = d.messages.map((m) => html`<tr data-testid="dlq-row" data-id="${m.id}" data-tx="${m.transactionId}">
			<td>${time(m.movedToDlqAt)}</td>
			<td><a href="#/messages/${enc(m.partitionId)}/${enc(m.transactionId)}" data-fkey="m:${m.id}">${m.transactionId}</a>
				<div class="small muted">partition ${m.partitionName ?? '(deleted)'}; created ${time(m.originalCreatedAt)}</div></td>
			<td>${groupLabel(m.consumerGroup)}</td>
			<td class="num">${num(m.retryCount)}</td>
			<td class="error-text" data-testid="dlq-error">${m.errorMessage ?? html`<span class="muted">(no text)</span>`}</td>
			<td><pre class="payload" tabindex="0" data-testid="dlq-payload" aria-label="Payload of ${m.transactionId}">${m.data === null ? 'null (the segment was gone when it was filed)' : pretty(m.data)}</pre></td>
			<td><button type="button" data-testid="dlq-replay" data-fkey="r:${m.id}">Replay<span class="sr-only"> ${m.transactionId}</span></button></td>
		</tr>`);
		setHTML(el('dlq-body'), rows.length ? html`${rows}`
			: html`<tr><td colspan="7" class="empty">No dead letters${st.group ? html` for group ${st.group}` : ''}.</td></tr>`);
		el('dlq-count').textContent = `${num(d.total)} dead letter${d.total === 1 ? '' : 's'}${st.group ? ` for group ${st.group}` : ''}, newest first.`;
		const first = d.total ? st.offset + 1 : 0;
		el('dlq-page').textContent = `${num(first)}–${num(st.offset + d.messages.length)} of ${num(d.total)}`;
		el('dlq-prev').disabled = st.offset === 0;
		el('dlq-next').disabled = st.offset + LIMIT >= d.total;
		el('dlq-purge').disabled = d.total === 0;
	}

	async function replay(id, tx) {
		const ok = await ctx.confirm({
			title: 'Replay this dead letter?',
			message: `Message "${tx}" is pushed again to its partition as a new message (transactionId "dlq:${id}") and leaves the dead letters.`,
			yes: 'Replay',
		});
		if (!ok) return;
		const r = await ctx.act(`Replay of ${tx}`, () => api.post(`/api/v1/dlq/${enc(id)}/replay`, {}));
		if (r.ok) {
			const v = r.value;
			if (v.success) {
				const a = v.replayedAs || {};
				ctx.notify(`Replayed "${tx}" as offset ${a.offset} of partition ${a.partition} of ${a.queue}.`, 'ok');
			} else {
				ctx.notify(`Replay of "${tx}": ${v.error || v.result}`, 'warn');
			}
		}
		ctx.refreshSoon();
	}

	async function purge() {
		const scope = st.group ? `of consumer group "${st.group}" on queue "${name}"` : `of queue "${name}", for every consumer group`;
		const ok = await ctx.confirm({
			title: 'Purge dead letters?',
			message: `All ${num(st.total)} dead letters ${scope} are deleted for good. This cannot be undone.`,
			yes: 'Purge', danger: true,
		});
		if (!ok) return;
		const r = await ctx.act('Purge', () => api.del('/api/v1/dlq', { query: { queue: name, consumerGroup: st.group } }));
		if (r.ok) ctx.notify(`Purged ${num(r.value.deleted)} dead letters ${scope}.`, 'ok');
		st.offset = 0;
		ctx.refreshSoon();
	}

	return {
		title: `Dead letters of ${name}`,
		refresh,
		showError(e) { errors.show(e.status, api.describe(e)); },
	};
}
