// Shards, push permits and retention's last sweep are published only as
// Prometheus gauges (GET /metrics/prometheus, docs/HTTP.md), so the overview
// reads the few it needs from that text.

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseMetrics(text, wanted) {
	const out = new Map();
	for (const line of text.split('\n')) {
		if (!line || line[0] === '#') continue;
		const m = LINE.exec(line);
		if (!m || (wanted && !wanted.has(m[1]))) continue;
		const labels = {};
		if (m[3]) for (const l of m[3].matchAll(LABEL)) labels[l[1]] = l[2].replace(/\\(.)/g, '$1');
		if (!out.has(m[1])) out.set(m[1], []);
		out.get(m[1]).push({ labels, value: Number(m[4]) });
	}
	return out;
}

export function gauge(metrics, name) {
	const v = metrics.get(name);
	return v && v.length ? v[0].value : null;
}
