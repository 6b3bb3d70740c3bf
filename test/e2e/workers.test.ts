import t from 'tap'
import { spawn } from 'node:child_process'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { workerCount } from '#src/runtime/primary'
import { LOG_FLUSH_MS } from '#src/ops/logging'

import { CLIENT_ID, CLIENT_SECRET, COOKIE_SECRET } from '../fixtures/stack.ts'
import { startWorkers, signedIn, page } from '../fixtures/workers.ts'
import { CLI } from '../fixtures/cli.ts'

// server.workers: two workers behind one port, as operators run them (test/fixtures/workers.ts).

t.test('auto is one worker per core', async (t) => {
  t.equal(workerCount('auto'), availableParallelism())
  t.equal(workerCount(3), 3)
})

t.test('two workers serve one port; a session works on both; /metrics sums them; SIGTERM drains both, `stopped` last, exit 0', async (t) => {
  const gateway = await startWorkers(t)
  const cookie = await signedIn(gateway)
  const statuses = []
  for (let i = 0; i < 20; i++) statuses.push((await page(gateway, cookie, `/p${i}`)).status)
  t.same(statuses, Array(20).fill(200), 'every request passes, whichever worker answers')
  // rawRequest opens a connection per request, and the primary hands connections round-robin.
  // The workers write their lines in batches, at least once every LOG_FLUSH_MS.
  const answered = () => gateway.lines().filter((l) => l.msg === 'request' && String(l.url).startsWith('/p'))
  for (const deadline = Date.now() + 5 * LOG_FLUSH_MS; answered().length < 20 && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 50))
  const pids = new Set(answered().map((l) => l.pid))
  t.equal(pids.size, 2, 'both workers answered')
  const metrics = await (await fetch(`${gateway.management}/metrics`)).text()
  const served = metrics
    .split('\n')
    .filter((l) => l.startsWith('openid_gateway_requests_total{') && l.includes('route="app"') && l.includes('status="2xx"'))
    .reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0)
  t.ok(served >= 20, `the primary's /metrics counts the requests of both workers (${served})`)
  const { code, lines } = await gateway.stop()
  t.equal(code, 0)
  t.equal(lines.filter((l) => l.msg === 'stopped').length, 3, 'each worker and the primary stopped')
  t.equal(lines.at(-1)?.msg, 'stopped', "the primary's line is the last")
})

t.test('workers: 2 with session.store: memory is refused by check and run, naming the key', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ogw-workers-'))
  const path = join(dir, 'gateway.yaml')
  writeFileSync(
    path,
    stringify({
      server: { publicUrl: 'http://127.0.0.1:8080', workers: 2, managementPort: 0 },
      provider: { issuer: 'http://127.0.0.1:9', clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, allowInsecureHttp: true },
      cookies: { secrets: [COOKIE_SECRET], secure: false },
      session: { store: 'memory' },
      upstreams: [{ name: 'app', target: 'http://127.0.0.1:9' }],
    }),
  )
  for (const command of [['check'], []]) {
    const child = spawn(process.execPath, [CLI, ...command, '--config', path], { stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
    t.equal(code, 2, command[0] ?? 'run')
    t.match(stderr, /session\.store: memory cannot be shared by server\.workers/)
  }
})

t.test('workers: 2 on a port another process holds: the gateway stops with exit 1, naming the error, and starts no worker again', async (t) => {
  const holder = createServer()
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => holder.close(() => resolve())))
  const port = (holder.address() as AddressInfo).port
  const dir = mkdtempSync(join(tmpdir(), 'ogw-workers-'))
  const path = join(dir, 'gateway.yaml')
  writeFileSync(
    path,
    stringify({
      server: { host: '127.0.0.1', port, publicUrl: `http://127.0.0.1:${port}`, workers: 2, managementPort: 0 },
      provider: { issuer: 'http://127.0.0.1:9', clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, allowInsecureHttp: true },
      cookies: { secrets: [COOKIE_SECRET], secure: false },
      upstreams: [{ name: 'app', target: 'http://127.0.0.1:9' }],
    }),
    { mode: 0o600 },
  )
  const child = spawn(process.execPath, [CLI, '--config', path], { stdio: ['ignore', 'pipe', 'pipe'] })
  // A primary that restarted the workers for ever would never close: the test's own timeout ends it.
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL')
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  t.equal(code, 1, 'exit code 1, as one process that cannot listen')
  t.match(stderr, /EADDRINUSE/, 'the error is said')
  t.match(stdout, /a worker could not listen on server\.port; stopping/)
  t.notMatch(stdout, /worker exited; starting another/, 'no worker is started again')
})
