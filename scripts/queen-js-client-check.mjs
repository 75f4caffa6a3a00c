// Runs test suites of Queen's own JavaScript client, unchanged, against the
// broker: the client is not vendored here, so take it from the public
// repository (queen-mq/queen, clients/client-js; `npm install` there, and
// link it as node_modules/queen-mq for test-v2/streams-unit/e2e.test.js).
//
//   QUEEN_CLIENT_JS=/path/to/clients/client-js URL=http://127.0.0.1:6632 \
//     node scripts/queen-js-client-check.mjs transaction|stream [name regex]
//
// transaction: test-v2/transaction.js; stream: test-v2/stream/* (its SDK
// reads QUEEN_URL, set to URL here).  Each test gets 90 s.  Prints a line
// per test and "N passed, N failed".
import { pathToFileURL } from 'node:url'
import { join } from 'node:path'

const dir = process.env.QUEEN_CLIENT_JS
const url = process.env.URL
const [suite, only] = process.argv.slice(2)
const files = { transaction: 'test-v2/transaction.js', stream: 'test-v2/stream/index.js' }
if (!dir || !url || !files[suite]) {
  console.error('usage: QUEEN_CLIENT_JS=dir URL=http://host:port node scripts/queen-js-client-check.mjs transaction|stream [regex]')
  process.exit(2)
}
process.env.QUEEN_URL = url
const { Queen } = await import(pathToFileURL(join(dir, 'client-v2/index.js')).href)
const tests = await import(pathToFileURL(join(dir, files[suite])).href)
const client = new Queen({ urls: [url], handleSignals: false })
const filter = only ? new RegExp(only) : null
let pass = 0
let fail = 0
for (const [name, fn] of Object.entries(tests)) {
  if (typeof fn !== 'function' || (filter && !filter.test(name))) continue
  const t0 = Date.now()
  try {
    const r = await Promise.race([fn(client),
      new Promise((_, reject) => setTimeout(() => reject(new Error('timeout 90 s')), 90000))])
    const ok = r && r.success
    ok ? pass++ : fail++
    console.log(ok ? 'PASS' : 'FAIL', name, ((Date.now() - t0) / 1000).toFixed(1) + 's',
      ok ? '' : JSON.stringify(r && (r.message || r)).slice(0, 600))
  } catch (e) {
    fail++
    console.log('ERROR', name, e.message)
  }
}
console.log(`${pass} passed, ${fail} failed`)
process.exit(0)
