// A consume-transform-produce loop over HTTP, two ways in the same run:
//
//   txn:   pop 100 from the input, then ONE POST /api/v1/transaction that
//          acknowledges the 100 and pushes 100 results to the output;
//   plain: pop 100, POST /api/v1/push of the 100 results, then
//          POST /api/v1/ack/batch of the 100 (two commits, not atomic).
//
// W workers (each its own input partition, keep-alive connections) run each
// mode for D seconds; rounds alternate the modes, so a noisy machine hits
// both alike.  Per round: messages/s end to end (inputs consumed and
// results produced, counted once per message) and the server's CPU per
// message (every process of the cluster, from /proc, PGPID's children).
//
//   node bench/txn-loop.mjs URL PGPID [workers=8] [seconds=10] [rounds=3]
//
// The input is refilled before every round (one push of 100 per request);
// a worker whose partition runs dry stops, and the round's time ends with
// its last worker.
// Prints one line of JSON per round and a summary with the medians and the
// median of the per-round ratios txn/plain.
import { readFileSync, readdirSync } from 'node:fs'

const [url, pgpid, workersArg, secondsArg, roundsArg] = process.argv.slice(2)
if (!url || !pgpid) {
  console.error('usage: node bench/txn-loop.mjs URL PGPID [workers] [seconds] [rounds]')
  process.exit(2)
}
const WORKERS = Number(workersArg || 8)
const SECONDS = Number(secondsArg || 10)
const ROUNDS = Number(roundsArg || 3)
const BATCH = 100
const RUN = Date.now().toString(36) // ids unique to this run: a rerun is no duplicate
const TICK = 100 // USER_HZ

async function post(path, body) {
  const r = await fetch(url + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
  const text = await r.text()
  return { status: r.status, body: text ? JSON.parse(text) : null }
}

async function get(path) {
  const r = await fetch(url + path)
  const text = await r.text()
  return { status: r.status, body: text ? JSON.parse(text) : null }
}

// CPU ticks of the postmaster's children (the broker's workers and the backends)
function clusterTicks() {
  let ticks = 0
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue
    let stat
    try { stat = readFileSync(`/proc/${pid}/stat`, 'utf8') } catch { continue }
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    if (f[1] !== pgpid && pid !== pgpid) continue
    ticks += Number(f[11]) + Number(f[12])
  }
  return ticks
}

async function fill(queue, partition, n, tag) {
  for (let i = 0; i < n; i += BATCH) {
    const items = []
    for (let k = 0; k < BATCH; k++)
      items.push({ queue, partition, payload: { n: i + k, pad: 'x'.repeat(40) }, transactionId: `${tag}-${i + k}` })
    const r = await post('/api/v1/push', { items })
    if (r.status !== 201) throw new Error(`fill: ${r.status}`)
  }
}

async function worker(mode, w, deadline, round, counts) {
  const input = `bench.txn.in.${RUN}`
  const partition = `w${w}`
  let seq = 0
  while (Date.now() < deadline) {
    const p = await get(`/api/v1/pop/queue/${input}/partition/${partition}?batch=${BATCH}&leaseSeconds=60`)
    if (p.status !== 200) { counts.empty++; break }   // input drained: this worker is done
    const msgs = p.body.messages
    const results = msgs.map(m => ({ queue: `bench.txn.out.${RUN}`, partition, payload: { from: m.transactionId, v: m.data.n * 2 },
      transactionId: `${RUN}-${mode}-${round}-${w}-${seq++}` }))
    if (mode === 'txn') {
      const r = await post('/api/v1/transaction', {
        operations: [
          ...msgs.map(m => ({ type: 'ack', transactionId: m.transactionId, partitionId: m.partitionId })),
          { type: 'push', items: results }],
        requiredLeases: [p.body.leaseId] })
      if (r.status !== 200 || !r.body.success) { counts.failed++; continue }
    } else {
      const r1 = await post('/api/v1/push', { items: results })
      const r2 = await post('/api/v1/ack/batch', { acknowledgments:
        msgs.map(m => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: p.body.leaseId })) })
      if (r1.status !== 201 || r2.status !== 200) { counts.failed++; continue }
    }
    counts.messages += msgs.length
  }
}

async function round(mode, r) {
  const perWorker = Math.ceil((SECONDS * 15000) / WORKERS / BATCH) * BATCH
  await Promise.all(Array.from({ length: WORKERS }, (_, w) => fill(`bench.txn.in.${RUN}`, `w${w}`, perWorker, `${RUN}-in-${mode}-${r}-${w}`)))
  const counts = { messages: 0, failed: 0, empty: 0 }
  const t0 = Date.now()
  const c0 = clusterTicks()
  const deadline = t0 + SECONDS * 1000
  await Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(mode, w, deadline, r, counts)))
  const secs = (Date.now() - t0) / 1000
  const cpu = (clusterTicks() - c0) / TICK
  // drain what is left, so the next round starts from an empty input
  for (let w = 0; w < WORKERS; w++)
    for (;;) {
      const p = await get(`/api/v1/pop/queue/bench.txn.in.${RUN}/partition/w${w}?batch=1000&autoAck=true`)
      if (p.status !== 200) break
    }
  const line = { mode, round: r, seconds: secs, messages: counts.messages, failed: counts.failed,
    messages_per_s: counts.messages / secs, server_cpu_us_per_message: counts.messages ? cpu * 1e6 / counts.messages : null }
  console.log(JSON.stringify(line))
  return line
}

const median = a => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)] }
const rows = { txn: [], plain: [] }
const ratios = []
for (let r = 0; r < ROUNDS; r++) {
  const order = r % 2 === 0 ? ['txn', 'plain'] : ['plain', 'txn']
  const got = {}
  for (const mode of order) got[mode] = await round(mode, r)
  rows.txn.push(got.txn); rows.plain.push(got.plain)
  ratios.push(got.txn.messages_per_s / got.plain.messages_per_s)
}
console.log(JSON.stringify({
  workers: WORKERS, seconds: SECONDS, rounds: ROUNDS, batch: BATCH,
  txn_messages_per_s: median(rows.txn.map(x => x.messages_per_s)),
  plain_messages_per_s: median(rows.plain.map(x => x.messages_per_s)),
  txn_over_plain: median(ratios),
  txn_server_cpu_us_per_message: median(rows.txn.map(x => x.server_cpu_us_per_message)),
  plain_server_cpu_us_per_message: median(rows.plain.map(x => x.server_cpu_us_per_message)) }))
