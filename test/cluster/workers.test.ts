import t from 'tap'
import { spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { parse, stringify } from 'yaml'
import { workerCount } from '../../src/cluster/primary.js'
import { BACKCHANNEL_LOGOUT_EVENT } from '../../src/oidc/logout-token.js'
import { BACKCHANNEL_LOGOUT_PATH } from '../../src/paths.js'
import { startAdversarialProvider } from '../fixtures/adversarial-provider.js'
import { Browser } from '../fixtures/browser.js'
import { rawRequest } from '../fixtures/http.js'
import { startTestProvider, type DevProviderOptions, type Teardown } from '../fixtures/provider.js'
import { CLIENT_ID, CLIENT_SECRET, COOKIE_SECRET, freePorts } from '../fixtures/stack.js'
import { startEchoUpstream } from '../fixtures/upstream.js'

// server.workers: 2, as operators run it: the CLI in a process of its own (the primary), its
// workers sharing the port, the real oidc-provider, an echo upstream.

const CLI = new URL('../../src/cli.ts', import.meta.url).pathname
const JSON_ACCEPT = { accept: 'application/json' }

interface Gateway {
  gw: string
  management: string
  provider: Awaited<ReturnType<typeof startTestProvider>>
  lines(): Array<Record<string, unknown>>
  stop(): Promise<{ code: number | null; lines: Array<Record<string, unknown>> }>
  /** The configuration file, and a signal to the primary. */
  path: string
  signal(signal: NodeJS.Signals): void
}

async function startWorkers(t: Teardown, options: { provider?: Partial<DevProviderOptions>; config?: Record<string, unknown> } = {}): Promise<Gateway> {
  const [port, managementPort] = (await freePorts(2)) as [number, number]
  const gw = `http://127.0.0.1:${port}`
  const provider = await startTestProvider(t, {
    ...options.provider,
    clients: [{ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, redirectUris: [`${gw}/api/v1/openid/callback`] }],
  })
  const upstream = await startEchoUpstream()
  t.teardown(() => upstream.close())
  const dir = mkdtempSync(join(tmpdir(), 'ogw-workers-'))
  const path = join(dir, 'gateway.yaml')
  writeFileSync(
    path,
    stringify({
      server: { host: '127.0.0.1', port, publicUrl: gw, managementPort, workers: 2 },
      provider: { issuer: provider.issuer, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, allowInsecureHttp: true, scopes: ['openid', 'profile', 'email', 'offline_access'] },
      cookies: { secrets: [COOKIE_SECRET], secure: false },
      upstreams: [{ name: 'app', target: upstream.url, forwardAccessToken: true }],
      rateLimit: { signIn: { max: 1000000 } },
      log: { level: 'info' },
      ...options.config,
    }),
  )
  const child = spawn(process.execPath, [...process.execArgv, CLI, '--config', path], { stdio: ['ignore', 'pipe', 'inherit'] })
  let stdout = ''
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
  const closed = new Promise<number | null>((resolve) => child.on('close', resolve))
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL')
  })
  const lines = (): Array<Record<string, unknown>> =>
    stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
  const management = `http://127.0.0.1:${managementPort}`
  // Ready: both workers up and their provider metadata loaded.
  for (let i = 0; ; i++) {
    const res = await fetch(`${management}/readyz`).catch(() => undefined)
    if (res?.status === 200) break
    if (i > 300 || child.exitCode !== null) throw new Error(`the gateway did not become ready: ${stdout}`)
    await sleep(100)
  }
  return {
    gw,
    management,
    provider,
    lines,
    path,
    signal: (signal) => child.kill(signal),
    async stop() {
      child.kill('SIGTERM')
      return { code: await closed, lines: lines() }
    },
  }
}

async function signedIn(gateway: Gateway, user = 'alice'): Promise<string> {
  const browser = new Browser()
  const res = await browser.signIn(`${gateway.gw}/api/v1/openid/redirect`, user)
  if (res.status !== 200) throw new Error(`sign-in failed: ${res.status}`)
  return browser.cookieHeader(gateway.gw)
}

const page = (gateway: Gateway, cookie: string, path = '/page') => rawRequest(gateway.gw, path, { headers: { ...JSON_ACCEPT, cookie } })

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
  const pids = new Set(gateway.lines().filter((l) => l.msg === 'request' && String(l.url).startsWith('/p')).map((l) => l.pid))
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
  t.equal(lines.at(-1)?.msg, 'stopped', 'the primary\'s line is the last')
})

t.test('a back-channel logout received by one worker ends the session on every worker; its replay is refused', async (t) => {
  const gateway = await startWorkers(t)
  const cookie = await signedIn(gateway)
  const other = await signedIn(gateway, 'bob')
  t.equal((await page(gateway, cookie)).status, 200)
  const token = await gateway.provider.signJwt({ aud: CLIENT_ID, sub: 'alice', jti: randomUUID(), events: { [BACKCHANNEL_LOGOUT_EVENT]: {} } }, { typ: 'logout+jwt' })
  await sleep(1000 - (Date.now() % 1000) + 10)
  // A connection each (rawRequest): cluster hands out connections, so a kept-alive one would stay on one worker.
  const logout = () =>
    rawRequest(gateway.gw, BACKCHANNEL_LOGOUT_PATH, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ logout_token: token }).toString(),
    })
  t.equal((await logout()).status, 200)
  const after = []
  for (let i = 0; i < 10; i++) after.push((await page(gateway, cookie, `/after${i}`)).status)
  t.same(after, Array(10).fill(401), 'refused by both workers at once')
  t.equal((await page(gateway, other)).status, 200, 'another user is left alone')
  const replays = []
  for (let i = 0; i < 4; i++) replays.push((await logout()).status)
  t.same(replays, Array(4).fill(400), 'the replayed token is refused by both workers')
})

t.test('the sign-in rate limit is one budget for all workers', async (t) => {
  const gateway = await startWorkers(t, { config: { rateLimit: { signIn: { max: 3, windowSeconds: 60 } } } })
  const statuses = []
  for (let i = 0; i < 5; i++) statuses.push((await rawRequest(gateway.gw, '/api/v1/openid/redirect', { headers: JSON_ACCEPT })).status)
  t.same(statuses, [302, 302, 302, 429, 429], 'three sign-ins, then 429 from whichever worker')
})

t.test('concurrent refreshes of one session on both workers against a rotating provider: one redemption, every request passes', async (t) => {
  const gateway = await startWorkers(t, { provider: { accessTokenTtlSeconds: 2, rotateRefreshTokens: true, refreshTokenPolicy: 'always' } })
  const redeemed: string[] = []
  let refused = 0
  gateway.provider.provider.on('grant.success', (ctx: { oidc?: { params?: Record<string, unknown> } }) => {
    if (ctx.oidc?.params?.grant_type === 'refresh_token') redeemed.push(String(ctx.oidc.params.refresh_token))
  })
  gateway.provider.provider.on('grant.error', (ctx: { oidc?: { params?: Record<string, unknown> } }) => {
    if (ctx.oidc?.params?.grant_type === 'refresh_token') refused++
  })
  const cookie = await signedIn(gateway)
  await sleep(2300)
  const results = await Promise.all(Array.from({ length: 16 }, (_, i) => page(gateway, cookie, `/r${i}`)))
  t.same(results.map((r) => r.status), Array(16).fill(200), 'all 16 pass')
  t.equal(redeemed.length, 1, 'one redemption for both workers')
  t.equal(refused, 0, 'the provider refused none (the grant was not revoked)')
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
    const child = spawn(process.execPath, [...process.execArgv, CLI, ...command, '--config', path], { stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
    t.equal(code, 2, command[0] ?? 'run')
    t.match(stderr, /session\.store: memory cannot be shared by server\.workers/)
  }
})

t.test('SIGHUP to the primary: it validates the file, then every worker reloads it; sessions stay; an invalid file reaches no worker', async (t) => {
  const gateway = await startWorkers(t)
  const cookie = await signedIn(gateway)
  const first = (await (await fetch(`${gateway.management}/config`)).json()) as { hash: string }
  const config = parse(readFileSync(gateway.path, 'utf8')) as { upstreams: Array<Record<string, unknown>> }
  const upstream = { ...config.upstreams[0], allow: { emails: ['bob@example.com'] } }
  writeFileSync(gateway.path, stringify({ ...config, upstreams: [upstream] }))
  gateway.signal('SIGHUP')
  const reloaded = async (): Promise<number> => gateway.lines().filter((l) => l.msg === 'configuration reloaded').length
  for (let i = 0; i < 100 && (await reloaded()) < 2; i++) await sleep(100)
  t.equal(await reloaded(), 2, 'both workers reloaded')
  const statuses = []
  for (let i = 0; i < 10; i++) statuses.push((await page(gateway, cookie, `/r${i}`)).status)
  t.same(statuses, Array(10).fill(403), 'on every worker: the session is kept, the new rules refuse alice')
  const second = (await (await fetch(`${gateway.management}/config`)).json()) as { hash: string }
  t.not(second.hash, first.hash, "the primary's /config has the new hash")
  const metrics = await (await fetch(`${gateway.management}/metrics`)).text()
  t.match(metrics, /openid_gateway_config_reloads_total\{outcome="success"\} 2/, 'summed over the workers')

  writeFileSync(gateway.path, stringify({ ...config, upstreams: [{ ...upstream, target: 'nowhere' }] }))
  gateway.signal('SIGHUP')
  for (let i = 0; i < 50 && !gateway.lines().some((l) => l.msg === 'configuration problem'); i++) await sleep(100)
  t.match(gateway.lines().filter((l) => l.msg === 'configuration problem').map((l) => l.problem), [/^upstreams\[0\]\.target: /], 'the primary names the key')
  await sleep(300)
  t.equal(await reloaded(), 2, 'no worker reloaded')
  t.match(await (await fetch(`${gateway.management}/config`)).json(), { ...second, lastReload: { outcome: 'refused', reason: 'invalid file' } }, 'the running file, and the refusal')
  t.equal((await gateway.stop()).code, 0)
})

t.test('a reload one worker cannot start is adopted by none (issue 16, point 7): all stay on the running configuration, /config and the metric say so', async (t) => {
  const gateway = await startWorkers(t)
  const cookie = await signedIn(gateway)
  // A provider that answers its key set once: the first worker to prepare discovers it, the other cannot.
  const flaky = await startAdversarialProvider({ behaviour: { jwks: 1 } })
  t.teardown(() => flaky.close())
  const first = (await (await fetch(`${gateway.management}/config`)).json()) as { hash: string }
  const config = parse(readFileSync(gateway.path, 'utf8')) as { provider: Record<string, unknown>; upstreams: Array<Record<string, unknown>> }
  writeFileSync(
    gateway.path,
    stringify({
      ...config,
      provider: { ...config.provider, issuer: flaky.issuer, timeoutMs: 500 },
      upstreams: [{ ...config.upstreams[0], allow: { emails: ['bob@example.com'] } }],
    }),
  )
  gateway.signal('SIGHUP')
  const refused = (): boolean => gateway.lines().some((l) => l.msg === 'configuration reload refused: the running configuration is kept')
  for (let i = 0; i < 200 && gateway.lines().filter((l) => l.msg === 'configuration reload refused: the running configuration is kept').length < 2; i++) await sleep(50)
  t.ok(refused(), 'the workers were told')
  t.equal(flaky.jwksRequests >= 2, true, 'both workers tried the new provider')
  t.equal(gateway.lines().filter((l) => l.msg === 'configuration reloaded').length, 0, 'no worker serves the new configuration')
  const statuses = []
  for (let i = 0; i < 10; i++) statuses.push((await page(gateway, cookie, `/r${i}`)).status)
  t.same(statuses, Array(10).fill(200), 'every worker still runs the previous rules (the new ones would refuse alice)')
  const shown = (await (await fetch(`${gateway.management}/config`)).json()) as { hash: string; lastReload?: { outcome: string; reason: string } }
  t.equal(shown.hash, first.hash, '/config: the running file')
  t.match(shown.lastReload, { outcome: 'refused', reason: /a worker could not start/ })
  const metrics = await (await fetch(`${gateway.management}/metrics`)).text()
  t.match(metrics, /openid_gateway_config_reloads_total\{outcome="failure"\} 2/, 'counted by both workers')
  t.equal((await gateway.stop()).code, 0)
})
