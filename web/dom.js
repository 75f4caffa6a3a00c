// Escaping and formatting helpers. Every value that reaches innerHTML goes
// through html`` so that queue names, payloads and error texts written by
// clients can never become markup.

class Raw {
	constructor(s) { this.s = s; }
	toString() { return this.s; }
}

const ESC = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function esc(v) {
	if (v === null || v === undefined) return '';
	return String(v).replace(/[&<>"']/g, (c) => ESC[c]);
}

function part(v) {
	if (v instanceof Raw) return v.s;
	if (Array.isArray(v)) return v.map(part).join('');
	if (v === false || v === null || v === undefined) return '';
	return esc(v);
}

// Tagged template: interpolations are escaped unless they are html`` results
// (or arrays of them), so fragments compose without double escaping.
export function html(strings, ...values) {
	let out = strings[0];
	for (let i = 0; i < values.length; i++) out += part(values[i]) + strings[i + 1];
	return new Raw(out);
}

// Replaces an element's content only when it changed: a refresh that brings
// the same figures leaves the DOM (focus, selection, scroll) untouched.
export function setHTML(el, content) {
	const s = String(content);
	if (el._html === s) return false;
	const key = focusKeyInside(el);
	el.innerHTML = s;
	el._html = s;
	if (key) restoreFocus(el, key);
	return true;
}

// Elements that can take focus inside refreshed content carry data-fkey, so
// the keyboard user's place survives a re-render.
function focusKeyInside(el) {
	const a = document.activeElement;
	if (!a || a === document.body || !el.contains(a)) return null;
	return a.getAttribute('data-fkey');
}

function restoreFocus(el, key) {
	const t = el.querySelector(`[data-fkey="${CSS.escape(key)}"]`);
	if (t) t.focus({ preventScroll: true });
}

export function $(sel, root = document) { return root.querySelector(sel); }

const NUM = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });

export function num(v) {
	if (v === null || v === undefined || v === '') return '–';
	const n = Number(v);
	// Callers splice this into markup unescaped: never echo a non-number.
	return Number.isFinite(n) ? NUM.format(n) : '–';
}

export function rate(v) {
	if (v === null || v === undefined || !Number.isFinite(v)) return '–';
	return NUM.format(Math.round(v * 100) / 100);
}

// Seconds as "1 h 4 min", "35 s": lag figures are read at a glance.
export function duration(sec) {
	if (sec === null || sec === undefined || !Number.isFinite(Number(sec))) return '–';
	let s = Math.max(0, Math.round(Number(sec)));
	if (s < 60) return `${s} s`;
	const d = Math.floor(s / 86400); s -= d * 86400;
	const h = Math.floor(s / 3600); s -= h * 3600;
	const m = Math.floor(s / 60); s -= m * 60;
	if (d) return `${d} d ${h} h`;
	if (h) return `${h} h ${m} min`;
	return `${m} min ${s} s`;
}

function pad(n, w = 2) { return String(n).padStart(w, '0'); }

// Local wall-clock time, with the broker's exact UTC value kept in datetime
// (and as a tooltip) for whoever needs the microseconds.
export function time(iso) {
	if (!iso) return html`<span class="muted">–</span>`;
	const d = new Date(iso);
	if (Number.isNaN(d.getTime())) return html`${iso}`;
	const txt = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} `
		+ `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
	return html`<time datetime="${iso}" title="${iso}">${txt}</time>`;
}

export function ago(iso, nowMs = Date.now()) {
	const t = new Date(iso).getTime();
	if (!Number.isFinite(t)) return '';
	return `${duration((nowMs - t) / 1000)} ago`;
}

export function pretty(value) {
	if (value === undefined) return '';
	try {
		return typeof value === 'string' ? JSON.stringify(value) : JSON.stringify(value, null, 2);
	} catch {
		return String(value);
	}
}

// Yes/no rendered with a word, never by colour alone.
export function yesno(b) {
	return b ? html`<span class="tag">yes</span>` : html`<span class="tag tag-plain">no</span>`;
}

export const QUEUE_MODE = '__QUEUE_MODE__';

export function groupLabel(name) {
	return name === QUEUE_MODE ? html`<span class="muted">(queue mode)</span>` : html`${name}`;
}

export const enc = encodeURIComponent;

export function debounce(fn, ms) {
	let t;
	return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
}

// A view's error line: a 404 hides the body (there is nothing to show), any
// other error keeps the last figures visible under the message.
export function errorArea(box, body) {
	return {
		show(status, text) {
			box.hidden = false;
			setHTML(box, html`<p><strong>${status === 404 ? 'Not found' : 'Could not refresh'}:</strong> ${text}</p>`);
			if (status === 404) body.hidden = true;
		},
		clear() {
			if (!box.hidden) { box.hidden = true; setHTML(box, ''); }
			body.hidden = false;
		},
	};
}

// A figure with its title; ok ('yes'/'no') adds a word, not just a colour.
export function card(title, value, sub, ok) {
	const mark = ok === 'yes' ? html`<span class="tag tag-yes">OK</span> `
		: ok === 'no' ? html`<span class="tag tag-no">check</span> ` : '';
	return String(html`<div class="card"><div class="card-title">${title}</div>
		<div class="card-value">${mark}${value}</div>${sub ? html`<div class="card-sub">${sub}</div>` : ''}</div>`);
}
