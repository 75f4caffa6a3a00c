// Throughput chart on uPlot (loaded as a classic script, window.uPlot).
// The push series is solid and the pop series dashed, so they differ
// without colour; a data table beside it carries the same figures in text.

import { html, setHTML, rate, time, num } from '/ui/dom.js';

const PUSH = '#1f5fbf';
const POP = '#b3261e';

export function createChart(box, tableBox) {
	let plot = null;
	let ro = null;
	let last = '';

	function width() { return Math.max(280, box.clientWidth - 4); }

	function update(ops) {
		const rows = (ops.series || []).slice().sort((a, b) => a.bucket.localeCompare(b.bucket));
		const from = Math.floor(new Date(ops.timeRange?.from || Date.now() - 3600e3).getTime() / 1000);
		const to = Math.floor(new Date(ops.timeRange?.to || Date.now()).getTime() / 1000);
		// The broker writes a bucket only when a figure changed, so a missing
		// bucket is a quiet one: draw it as 0 rather than a line across it.
		const step = (ops.bucketMinutes || 1) * 60;
		const byTime = new Map(rows.map((r) => [Math.floor(new Date(r.bucket).getTime() / 1000), r]));
		const xs = [];
		const push = [];
		const pop = [];
		for (let t = Math.floor(from / step) * step; t <= to; t += step) {
			const r = byTime.get(t);
			xs.push(t);
			push.push(r ? r.pushPerSecond : 0);
			pop.push(r ? r.popPerSecond : 0);
		}
		renderTable(rows, ops.bucketMinutes);
		const key = JSON.stringify([xs, push, pop]);
		const uPlot = window.uPlot;
		if (!uPlot) {
			setHTML(box, '<p class="muted">Chart library not loaded; the figures are in the table below.</p>');
			return;
		}
		if (!plot) {
			box.textContent = '';
			plot = new uPlot({
				width: width(),
				height: 240,
				scales: { x: { time: true, range: () => [from, to] }, y: { range: (u, min, max) => [0, Math.max(1, max * 1.1)] } },
				axes: [{}, { label: 'messages / s', size: 60 }],
				series: [
					{ label: 'time' },
					{ label: 'push /s', stroke: PUSH, width: 2, points: { show: false }, value: (u, v) => (v == null ? '–' : rate(v)) },
					{ label: 'pop /s', stroke: POP, width: 2, dash: [8, 5], points: { show: false }, value: (u, v) => (v == null ? '–' : rate(v)) },
				],
				legend: { live: true },
			}, [xs, push, pop], box);
			ro = new ResizeObserver(() => plot && plot.setSize({ width: width(), height: 240 }));
			ro.observe(box);
			last = key;
			return;
		}
		// The x range moves with the clock even when the data does not.
		plot.scales.x.range = () => [from, to];
		if (key !== last) {
			last = key;
			plot.setData([xs, push, pop]);
		} else {
			plot.setScale('x', { min: from, max: to });
		}
	}

	function renderTable(rows, bucketMinutes) {
		const totalPush = rows.reduce((a, r) => a + (r.pushMessages || 0), 0);
		const totalPop = rows.reduce((a, r) => a + (r.popMessages || 0), 0);
		const body = rows.slice().reverse().map((r) => html`<tr><th scope="row">${time(r.bucket)}</th>
			<td class="num">${num(r.pushMessages)}</td><td class="num">${rate(r.pushPerSecond)}</td>
			<td class="num">${num(r.popMessages)}</td><td class="num">${rate(r.popPerSecond)}</td>
			<td class="num">${num(r.pending)}</td></tr>`);
		const wasOpen = Boolean(tableBox.querySelector('details')?.open);
		setHTML(tableBox, html`<p class="small">Last hour: ${num(totalPush)} pushed, ${num(totalPop)} popped,
			in buckets of ${num(bucketMinutes)} min (the newest is still filling, so it reads low).</p>
			<details><summary>Throughput as a table</summary>
			<div class="table-wrap" tabindex="0" role="region" aria-label="Throughput per bucket">
			<table class="data"><thead><tr><th scope="col">Bucket start</th><th scope="col" class="num">Pushed</th>
			<th scope="col" class="num">Push /s</th><th scope="col" class="num">Popped</th><th scope="col" class="num">Pop /s</th>
			<th scope="col" class="num">Pending</th></tr></thead>
			<tbody>${body.length ? body : html`<tr><td colspan="6" class="empty">No figures in the last hour.</td></tr>`}</tbody></table></div></details>`);
		if (wasOpen) tableBox.querySelector('details').open = true;
	}

	function destroy() {
		if (ro) ro.disconnect();
		if (plot) plot.destroy();
		plot = null;
	}

	return { update, destroy };
}
