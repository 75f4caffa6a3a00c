// The one door to the broker: same origin, bearer token, timeout, and the
// three outcomes the UI reacts to globally (unreachable, 401, 403).

const TOKEN_KEY = 'queen.dashboard.token';
export const TIMEOUT_MS = 8000;

export class ApiError extends Error {
	constructor(status, message, body) {
		super(message);
		this.status = status;
		this.body = body;
	}
}

// The broker did not answer: network failure, timeout, or a proxy saying so.
export class Unreachable extends Error {}

export class AuthRequired extends ApiError {}

export const FORBIDDEN_TEXT = "Forbidden: your token's role may not do this.";

const listeners = { reachable: [], auth: [] };

export function on(event, fn) { listeners[event].push(fn); }

function emit(event, ...args) { for (const fn of listeners[event]) fn(...args); }

export function getToken() {
	try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch { return ''; }
}

export function setToken(t) {
	try { sessionStorage.setItem(TOKEN_KEY, t); } catch { /* storage off: token lives for this call chain only */ }
}

export function clearToken() {
	try { sessionStorage.removeItem(TOKEN_KEY); } catch { /* nothing stored */ }
}

function url(path, query) {
	if (!query) return path;
	const qs = new URLSearchParams();
	for (const [k, v] of Object.entries(query)) {
		if (v !== undefined && v !== null && v !== '') qs.set(k, String(v));
	}
	const s = qs.toString();
	return s ? `${path}?${s}` : path;
}

/*
 * request(method, path, {query, body, signal, text}) -> parsed JSON (or text).
 * A caller's abort (route change) rejects with an AbortError and says nothing
 * about reachability; only our own timeout counts as "unreachable".
 */
export async function request(method, path, opts = {}) {
	const ctl = new AbortController();
	let timedOut = false;
	const timer = setTimeout(() => { timedOut = true; ctl.abort(); }, opts.timeout || TIMEOUT_MS);
	const onAbort = () => ctl.abort();
	if (opts.signal) {
		if (opts.signal.aborted) ctl.abort();
		else opts.signal.addEventListener('abort', onAbort, { once: true });
	}
	const headers = { Accept: opts.text ? 'text/plain' : 'application/json' };
	const token = getToken();
	if (token) headers.Authorization = `Bearer ${token}`;
	let body;
	if (opts.body !== undefined) {
		headers['Content-Type'] = 'application/json';
		body = JSON.stringify(opts.body);
	}
	let res;
	let text;
	try {
		res = await fetch(url(path, opts.query), {
			method, headers, body, signal: ctl.signal, cache: 'no-store', credentials: 'same-origin',
		});
		text = await res.text();
	} catch (e) {
		if (timedOut) {
			emit('reachable', false, `no answer within ${Math.round((opts.timeout || TIMEOUT_MS) / 1000)} s`);
			throw new Unreachable('timeout');
		}
		if (opts.signal && opts.signal.aborted) throw e;
		emit('reachable', false, e.message || 'network error');
		throw new Unreachable(e.message || 'network error');
	} finally {
		clearTimeout(timer);
		if (opts.signal) opts.signal.removeEventListener('abort', onAbort);
	}
	// An answer to a view that is gone says nothing the UI should act on.
	if (opts.signal && opts.signal.aborted) throw new DOMException('aborted', 'AbortError');
	// A reverse proxy in front of a stopped broker answers 502/504: that is
	// the broker being unreachable, not an answer of the broker.
	if (res.status === 502 || res.status === 504) {
		emit('reachable', false, `HTTP ${res.status} from the proxy`);
		throw new Unreachable(`HTTP ${res.status}`);
	}
	emit('reachable', true);

	let data = null;
	if (opts.text) data = text;
	else if (text) {
		try { data = JSON.parse(text); } catch { data = null; }
	}
	if (res.status === 401) {
		// A token given while this call was out is not the one refused.
		if (token === getToken()) emit('auth', Boolean(token));
		throw new AuthRequired(401, token ? 'the broker refused the token' : 'a token is required', data);
	}
	if (res.status === 403) throw new ApiError(403, FORBIDDEN_TEXT, data);
	if (!res.ok) {
		const msg = data && typeof data === 'object' && data.error ? data.error : `HTTP ${res.status}`;
		throw new ApiError(res.status, msg, data);
	}
	return data;
}

export const get = (path, opts) => request('GET', path, opts);
export const post = (path, body, opts = {}) => request('POST', path, { ...opts, body });
export const del = (path, opts) => request('DELETE', path, opts);

// What to tell a person about a failed call, in one line.
export function describe(err) {
	if (err instanceof Unreachable) return 'the broker did not answer';
	if (err instanceof ApiError) {
		if (err.status === 403) return FORBIDDEN_TEXT;
		if (err.status === 503) return `the broker is not serving this now (503): ${err.message}`;
		return `${err.message} (HTTP ${err.status})`;
	}
	return err && err.message ? err.message : String(err);
}

export function isAbort(err) {
	return err && err.name === 'AbortError';
}
