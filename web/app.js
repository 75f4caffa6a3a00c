// Router, refresh loop, the unreachable banner and the token prompt.
// Views are modules with mount(root, params, ctx) ->
// {title, refresh(signal), showError(err), unmount?()}.

import * as api from '/ui/api.js';
import { html, setHTML } from '/ui/dom.js';
import { confirmAction } from '/ui/confirm.js';
import * as overview from '/ui/views_overview.js';
import * as queue from '/ui/views_queue.js';
import * as dlq from '/ui/views_dlq.js';
import * as message from '/ui/views_message.js';
import * as browse from '/ui/views_browse.js';

const ROUTES = [
	[/^\/?$/, overview],
	[/^\/queues\/([^/]+)\/?$/, queue],
	[/^\/queues\/([^/]+)\/messages\/?$/, browse],
	[/^\/dlq\/([^/]+)\/?$/, dlq],
	[/^\/messages\/([^/]+)\/([^/]+)\/?$/, message],
];

const main = document.getElementById('main');
const viewRoot = document.getElementById('view');
const authSection = document.getElementById('auth');
const bannerRegion = document.getElementById('banner');
const notices = document.getElementById('notices');
const toggleBtn = document.getElementById('refresh-toggle');
const intervalSel = document.getElementById('refresh-interval');
const stateText = document.getElementById('refresh-state');
const forgetBtn = document.getElementById('forget-token');

const state = {
	paused: false,
	interval: Number(intervalSel.value),
	current: null,        // {mod, view, ctl}
	running: null,        // the refresh in progress, if any
	again: false,         // someone asked for a refresh while one ran
	timer: 0,
	routeGen: 0,
	unreachable: false,
	authBlocked: false,
	lastOk: 0,
};

/* ---------------- notices (action results) ---------------- */

function notify(text, kind = 'info') {
	const div = document.createElement('div');
	div.className = `notice notice-${kind}`;
	div.dataset.testid = 'notice';
	div.dataset.kind = kind;
	const label = { error: 'Error', ok: 'Done', warn: 'Note', info: 'Note' }[kind] || 'Note';
	div.innerHTML = String(html`<strong>${label}:</strong> <span class="notice-text">${text}</span>
		<button type="button" class="linkish" aria-label="Dismiss this message">Dismiss</button>`);
	div.querySelector('button').addEventListener('click', () => div.remove());
	notices.prepend(div);
	while (notices.children.length > 4) notices.lastElementChild.remove();
	// Errors stay until dismissed: a person may be away when they appear.
	if (kind !== 'error') setTimeout(() => div.remove(), 12000);
}

/* ---------------- unreachable banner ---------------- */

api.on('reachable', (ok, why) => {
	if (ok) {
		state.lastOk = Date.now();
		if (state.unreachable) {
			state.unreachable = false;
			setHTML(bannerRegion, '');
		}
		return;
	}
	// Set once per outage: an assertive live region re-announces every change.
	if (state.unreachable) return;
	state.unreachable = true;
	setHTML(bannerRegion, html`<div class="banner banner-error" data-testid="unreachable">
		<strong>Broker unreachable at ${location.origin}; retrying</strong>
		<span class="muted">(${why || 'no answer'}; every ${state.interval / 1000} s${state.lastOk ? `; last answer ${new Date(state.lastOk).toLocaleTimeString()}` : ''})</span></div>`);
	if (!state.running) schedule();
});

/* ---------------- token prompt ---------------- */

api.on('auth', (hadToken) => showPrompt(hadToken));

function showPrompt(hadToken) {
	if (hadToken) api.clearToken();
	updateForget();
	if (state.authBlocked) return;
	state.authBlocked = true;
	unmount();
	clearTimeout(state.timer);
	viewRoot.hidden = true;
	authSection.hidden = false;
	main.dataset.ready = 'false';
	document.getElementById('auth-reason').textContent = hadToken
		? 'The broker refused the token (HTTP 401): it may be expired or signed with another key. Enter a new one.'
		: 'The broker asks for a token (HTTP 401). Nothing else works until one is given.';
	document.title = 'Sign in · Queen dashboard';
	setState('Waiting for a token');
	const input = document.getElementById('token-input');
	input.value = '';
	input.focus();
}

document.getElementById('token-form').addEventListener('submit', (e) => {
	// CSP forbids form submission anyway (form-action 'none'); we never navigate.
	e.preventDefault();
	const input = document.getElementById('token-input');
	const t = input.value.trim().replace(/^Bearer\s+/i, '');
	if (!t) { input.focus(); return; }
	api.setToken(t);
	input.value = '';
	state.authBlocked = false;
	authSection.hidden = true;
	viewRoot.hidden = false;
	updateForget();
	route();
});

forgetBtn.addEventListener('click', () => {
	api.clearToken();
	updateForget();
	notify('Token forgotten. The next call that needs one will ask for it.', 'info');
	refreshSoon();
});

function updateForget() {
	forgetBtn.hidden = !api.getToken();
}

/* ---------------- refresh loop ---------------- */

function setState(text) { stateText.textContent = text; }

function schedule() {
	clearTimeout(state.timer);
	if (state.authBlocked) return;
	// While unreachable we keep retrying even when paused: the banner promises it.
	if (state.paused && !state.unreachable) return;
	state.timer = setTimeout(tick, state.interval);
}

// Refreshes never overlap: a request for one while another runs is folded
// into a single follow-up run.
function tick() {
	clearTimeout(state.timer);
	if (state.running) { state.again = true; return state.running; }
	state.running = (async () => {
		do {
			state.again = false;
			await runOnce();
		} while (state.again && !state.authBlocked);
	})().finally(() => {
		state.running = null;
		schedule();
	});
	return state.running;
}

async function runOnce() {
	const cur = state.current;
	if (!cur || state.authBlocked) {
		// No view to refresh (an unknown route): still learn when the broker is back.
		if (state.unreachable && !state.authBlocked) {
			try { await api.get('/health'); } catch { /* banner already says so */ }
		}
		return;
	}
	try {
		setState(state.paused ? 'Paused; refreshing…' : 'Refreshing…');
		await cur.view.refresh(cur.ctl.signal);
		if (state.current !== cur) return;
		main.dataset.ready = 'true';
		const t = new Date().toLocaleTimeString();
		setState(state.paused ? `Paused; updated ${t}` : `Updated ${t}`);
	} catch (e) {
		if (api.isAbort(e) || state.current !== cur) return;
		if (e instanceof api.AuthRequired) return; // the prompt is up
		if (e instanceof api.Unreachable) {
			setState('Broker unreachable');
			return;
		}
		// An error of the broker is this view's answer: show it, and the view is ready.
		cur.view.showError(e);
		main.dataset.ready = 'true';
		setState(`Error at ${new Date().toLocaleTimeString()}`);
	}
}

function refreshSoon() {
	if (state.authBlocked) return Promise.resolve();
	return tick();
}

toggleBtn.addEventListener('click', () => {
	state.paused = !state.paused;
	toggleBtn.dataset.state = state.paused ? 'paused' : 'running';
	toggleBtn.textContent = state.paused ? 'Resume refresh' : 'Pause refresh';
	toggleBtn.classList.toggle('paused', state.paused);
	if (state.paused) {
		clearTimeout(state.timer);
		setState('Paused');
		if (state.unreachable) schedule();
	} else {
		refreshSoon();
	}
});

intervalSel.addEventListener('change', () => {
	state.interval = Number(intervalSel.value);
	if (!state.running) schedule();
});

/* ---------------- routing ---------------- */

function parseHash() {
	const h = location.hash.replace(/^#/, '') || '/';
	for (const [re, mod] of ROUTES) {
		const m = re.exec(h);
		if (m) {
			try {
				return { mod, params: m.slice(1).map((s) => decodeURIComponent(s)) };
			} catch {
				return { mod: null, params: [] };
			}
		}
	}
	return { mod: null, params: [] };
}

function unmount() {
	const cur = state.current;
	state.current = null;
	if (!cur) return;
	cur.ctl.abort();
	if (cur.view.unmount) cur.view.unmount();
}

const ctx = {
	notify,
	confirm: confirmAction,
	refreshSoon,
	// Every action goes through here: one place that turns failures into words
	// and asks for the token on 401.
	async act(label, fn) {
		try {
			const r = await fn();
			return { ok: true, value: r };
		} catch (e) {
			if (e instanceof api.AuthRequired) return { ok: false, error: e };
			notify(`${label}: ${api.describe(e)}`, 'error');
			return { ok: false, error: e };
		}
	},
};

async function route(focusHeading = false) {
	const gen = ++state.routeGen;
	unmount();
	// Let a refresh of the old view wind down before the new one's first.
	if (state.running) await state.running.catch(() => {});
	if (gen !== state.routeGen || state.authBlocked) return;
	main.dataset.ready = 'false';
	const { mod, params } = parseHash();
	viewRoot.innerHTML = '';
	viewRoot._html = undefined;
	if (!mod) {
		viewRoot.innerHTML = String(html`<h1 tabindex="-1">Not found</h1>
			<p>No view at <code>${location.hash}</code>. <a href="#/">Go to the overview</a>.</p>`);
		main.dataset.ready = 'true';
		document.title = 'Not found · Queen dashboard';
		return;
	}
	const ctl = new AbortController();
	const view = mod.mount(viewRoot, params, ctx);
	state.current = { mod, view, ctl };
	document.title = `${view.title || 'Queen'} · Queen dashboard`;
	const nav = document.getElementById('nav-overview');
	if (mod === overview) nav.setAttribute('aria-current', 'page');
	else nav.removeAttribute('aria-current');
	if (focusHeading) {
		// Screen readers announce the new view by its heading.
		const h1 = viewRoot.querySelector('h1');
		if (h1) { h1.setAttribute('tabindex', '-1'); h1.focus(); }
	}
	await tick();
}

window.addEventListener('hashchange', () => { route(true); });

document.getElementById('skip-link').addEventListener('click', (e) => {
	e.preventDefault();
	main.focus();
});

updateForget();
route();

// Exposed for debugging from the console only; nothing depends on it.
window.queenDashboard = { refresh: refreshSoon, state };
