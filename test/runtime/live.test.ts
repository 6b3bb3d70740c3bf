import { Redis } from 'ioredis'
import { Agent, request } from 'node:http'
import t, { type Test } from 'tap'
import WebSocket from 'ws'
import { configHash } from '#src/config/load'
import type { LiveGateway } from '#src/runtime/live'
import { Browser } from '../fixtures/browser.ts'
import { echo, openSocket } from '../fixtures/http.ts'
import { eventually } from '../fixtures/poll.ts'
import { startRedis } from '../fixtures/redis.ts'
import { COOKIE_SECRET, startStack, type Replica } from '../fixtures/stack.ts'
import { startEchoUpstream, type EchoUpstream } from '../fixtures/upstream.ts'

// Live reload in process, against a real oidc-provider and real upstreams: LiveGateway reads the
// file again, validates it in full and swaps a new app in; sessions, connections and requests
// under way survive it, a bad file changes nothing and the log names each problem by key.

const NEW_COOKIE_SECRET = 'rotated-cookie-secret-0123456789abcdefghij'

interface Setup {
  live: LiveGateway
  gw: string
  write: Replica['rewrite']
  lines: Array<Record<string, unknown>>
  upstream: EchoUpstream
  second: string
}

async function setup(
  t: Test,
  store: 'cookie' | 'memory' | 'redis' = 'cookie',
  overrides: { redisUrl?: string; shutdownTimeoutMs?: number; logLevel?: string } = {},
): Promise<Setup> {
  const other = await startEchoUpstream()
  t.teardown(() => other.close())
  const lines: Array<Record<string, unknown>> = []
  const stack = await startStack(t, {
    config: {
      server: overrides.shutdownTimeoutMs === undefined ? {} : { shutdownTimeoutMs: overrides.shutdownTimeoutMs },
      session: { store, ...(overrides.redisUrl === undefined ? {} : { redisUrl: overrides.redisUrl }) },
      log: { level: overrides.logLevel ?? 'info' },
    },
    logStream: { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  })
  const [replica] = stack.replicas as [Replica]
  return { live: stack.live, gw: stack.gw, write: replica.rewrite, lines, upstream: stack.upstream, second: other.url }
}

t.test('redis store: ten reloads use the one Redis connection of the process, also while a request holds a retired configuration', async (t) => {
  const redis = await startRedis(t)
  // A retired configuration waits this long for its requests before it closes.
  const { live, gw } = await setup(t, 'redis', { redisUrl: redis.url, shutdownTimeoutMs: 60_000 })
  const admin = new Redis(redis.url)
  t.teardown(() => admin.disconnect())
  const gatewayClients = async (): Promise<number> =>
    String(await admin.call('CLIENT', 'LIST'))
      .split('\n')
      .filter((line) => / name=openid-gateway /.test(line)).length
  const connectionsReceived = async (): Promise<number> => Number(/total_connections_received:(\d+)/.exec(await admin.info('stats'))?.[1])
  t.equal(await gatewayClients(), 1, 'one connection at start')
  const before = await connectionsReceived()

  // A proxied request under way keeps the first configuration's app open across the reloads.
  const held = request(`${gw}/slow?ms=60000`, { headers: { accept: 'application/json' } })
  held.on('error', () => undefined)
  held.end()
  t.teardown(() => held.destroy())
  for (let i = 0; i < 10; i++) t.equal(await live.reload('SIGHUP'), true, `reload ${i + 1}`)

  t.equal(await gatewayClients(), 1, 'still one connection')
  t.equal((await connectionsReceived()) - before, 0, 'and no new one was ever opened')
})

async function status(browser: Browser, url: string): Promise<number> {
  const res = await browser.fetch(url, { headers: { accept: 'application/json' } })
  await res.body?.cancel()
  return res.status
}

async function reloads(live: LiveGateway): Promise<string> {
  const text = await live.app.management.metrics.metrics()
  return text
    .split('\n')
    .filter((l) => l.startsWith('openid_gateway_config_reloads_total'))
    .join('\n')
}

for (const store of ['cookie', 'memory'] as const) {
  t.test(`${store} store: a reload swaps routes, rules and cookie secrets; sessions and a keep-alive connection survive`, async (t) => {
    const { live, gw, write, upstream, second } = await setup(t, store)
    const browser = new Browser()
    const signedIn = await browser.signIn(`${gw}/api/v1/openid/redirect`, 'alice')
    t.equal(signedIn.status, 200)
    await signedIn.body?.cancel()
    t.equal(await status(browser, `${gw}/reports/x`), 200, 'served by app before the reload')
    const before = live.state

    // One keep-alive connection across the reload.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    t.teardown(() => agent.destroy())
    const sockets = new Set<unknown>()
    const get = (path: string) =>
      new Promise<number>((resolve, reject) => {
        const req = request(`${gw}${path}`, { agent, headers: { cookie: browser.cookieHeader(gw), accept: 'application/json' } }, (res) => {
          sockets.add(res.socket)
          res.resume()
          res.on('end', () => resolve(res.statusCode ?? 0))
        })
        req.on('error', reject)
        req.end()
      })
    t.equal(await get('/x'), 200)
    // A request under way when the reload happens finishes, on the configuration it started on.
    const inFlight = get('/slow?ms=1500')
    await eventually('the slow request reaches the upstream', () => upstream.requests.some((r) => r.url.startsWith('/slow')))

    const text = write((c) => ({
      ...c,
      cookies: { secrets: [NEW_COOKIE_SECRET, COOKIE_SECRET], secure: false },
      upstreams: [
        { name: 'app', target: (c.upstreams as Array<{ target: string }>)[0]?.target, allow: { emails: ['bob@example.com'] } },
        { name: 'reports', match: { pathPrefix: '/reports' }, target: second, auth: 'none' },
      ],
    }))
    t.equal(await live.reload('SIGHUP'), true, 'reloaded')
    t.equal(live.state.hash, configHash(text), 'the state has the new file hash')
    t.not(live.state.hash, before.hash)
    t.ok(Date.parse(live.state.loadedAt) >= Date.parse(before.loadedAt))
    t.equal(await inFlight, 200, 'the request under way finished')
    t.equal(await get('/y'), 403, 'the same connection, the new allow rules: alice is no longer allowed')
    t.equal(sockets.size, 1, 'on one connection throughout')
    t.equal(await status(browser, `${gw}/reports/x`), 200, 'the new route')
    const seen = await browser.fetch(`${gw}/reports/x`, { headers: { accept: 'application/json' } })
    t.equal(((await seen.json()) as { headers: Record<string, string> }).headers['x-forwarded-user'], undefined, 'served by the new upstream, auth: none')

    // The session made before the reload still opens (old secret kept for decryption); a refresh
    // re-seals it with the new secret.
    const refresh = await browser.fetch(`${gw}/api/v1/openid/refresh`)
    t.equal(refresh.status, 200, 'the session of before the reload refreshes')
    await refresh.body?.cancel()
    t.match(await reloads(live), /outcome="success"} 1/)
  })
}

t.test('an invalid file keeps the running configuration and logs every problem by key', async (t) => {
  const { live, gw, write, lines } = await setup(t)
  const before = live.state
  write((c) => ({
    ...c,
    upstreams: [
      { name: 'app', target: 'ftp://nowhere' },
      { name: 'app', target: 'http://127.0.0.1:1' },
    ],
    cookies: { secrets: ['short'] },
  }))
  t.equal(await live.reload('SIGHUP'), false, 'refused')
  t.same(live.state, before, 'the same configuration runs')
  const problems = lines.filter((l) => l.msg === 'configuration problem').map((l) => l.problem)
  t.match(problems, [/^cookies\.secrets\[0\]: /, /^upstreams\[0\]\.target: /, /^upstreams\[1\]\.name: duplicate/], 'one line per problem, by key')
  t.match(
    lines.find((l) => typeof l.msg === 'string' && l.msg.startsWith('configuration reload refused')),
    { trigger: 'SIGHUP', problems: problems.length },
  )
  t.equal(problems.length, 4, String(problems))
  const res = await fetch(`${gw}/x`, { headers: { accept: 'application/json' } })
  t.equal(res.status, 401, 'still served as before')
  t.match(await reloads(live), /outcome="failure"} 1/)

  write((c) => ({ ...c, server: { ...(c.server as object), port: 1 }, session: { store: 'redis', redisUrl: 'redis://127.0.0.1:1' } }))
  t.equal(await live.reload('file'), false, 'a key that takes a restart is refused')
  const restart = lines.filter((l) => l.msg === 'configuration problem' && l.trigger === 'file').map((l) => l.problem)
  t.same(restart, [
    'server.port: changed, which takes a restart',
    'session.store: changed, which takes a restart',
    'session.redisUrl: changed, which takes a restart',
  ])
  t.same(live.state, before)

  write()
  t.equal(await live.reload('SIGHUP'), true, 'the file fixed: reloaded')
  t.equal(live.state.hash, before.hash, 'the same text, the same hash')
})

t.test('a reload whose provider cannot be discovered is refused while the running one works', async (t) => {
  const { live, gw, write, lines } = await setup(t)
  write((c) => ({ ...c, provider: { ...(c.provider as object), issuer: 'http://127.0.0.1:9', timeoutMs: 200 } }))
  t.equal(await live.reload('SIGHUP'), false)
  t.match(
    lines.filter((l) => l.msg === 'configuration problem').map((l) => l.problem),
    [/providers could not be discovered within 1400 ms/],
  )
  t.equal((await fetch(`${gw}/api/v1/openid/redirect?performRedirect=0`)).status, 200, 'sign-ins still work')
})

t.test(
  'WebSocket upgrades through the live server: refused without websocket: true, proxied once a reload allows them, and kept open across a reload',
  async (t) => {
    // At debug: the line that says a retired configuration's app has closed.
    const { live, gw, write, lines } = await setup(t, 'cookie', { logLevel: 'debug' })
    const browser = new Browser()
    const signedIn = await browser.signIn(`${gw}/api/v1/openid/redirect`, 'alice')
    await signedIn.body?.cancel()
    const url = `${gw.replace('http', 'ws')}/socket`
    const cookie = browser.cookieHeader(gw)
    t.equal(await openSocket(url, { cookie }).catch(() => 'error'), 400, 'an upstream without websocket: true refuses the upgrade at once')

    const withSockets = (c: Record<string, unknown>) => ({ ...c, upstreams: [{ ...(c.upstreams as object[])[0], websocket: true }] })
    write(withSockets)
    t.equal(await live.reload('SIGHUP'), true)
    t.equal(await openSocket(url, {}), 401, 'checked before the upgrade: no session')
    const ws = await openSocket(url, { cookie })
    if (typeof ws === 'number') throw new Error(`upgrade refused with ${ws}`)
    t.teardown(() => ws.close())
    t.equal(await echo(ws, 'before'), 'before', 'proxied after the reload that allowed it')

    const proxying = live.state.hash
    write((c) => ({ ...withSockets(c), rateLimit: { signIn: { max: 999999 } } }))
    t.equal(await live.reload('SIGHUP'), true)
    // The previous configuration's app, which proxied the upgrade, is closed once its requests are
    // done; its sockets stay.
    await eventually('the retired app closes', () => lines.some((l) => l.msg === 'previous configuration closed' && l.config === proxying))
    t.equal(ws.readyState, WebSocket.OPEN, 'still open after the reload')
    t.equal(await echo(ws, 'after'), 'after', 'and still proxied')
    const again = await openSocket(url, { cookie })
    if (typeof again === 'number') throw new Error(`upgrade refused with ${again}`)
    t.equal(await echo(again, 'new'), 'new', 'a new upgrade on the new configuration')
    again.close()
  },
)

t.test("a reload that renames the cookies: the former names are still the gateway's, stripped and expired", async (t) => {
  const { live, gw, write } = await setup(t)
  const optional = (c: Record<string, unknown>): Record<string, unknown> => ({
    ...c,
    upstreams: [{ ...(c.upstreams as Array<Record<string, unknown>>)[0], auth: 'optional' }],
  })
  write(optional)
  t.equal(await live.reload('SIGHUP'), true)
  write((c) => ({ ...optional(c), cookies: { ...(c.cookies as Record<string, unknown>), name: 'gw2' } }))
  t.equal(await live.reload('SIGHUP'), true, 'renamed')
  // Not seals: only the name says these are the gateway's, and only the former configuration knew it.
  const res = await fetch(`${gw}/page`, { headers: { accept: 'application/json', cookie: 'ogw=opaque; ogw_cred_1=opaque; app=1' } })
  const body = (await res.json()) as { headers: Record<string, string> }
  t.equal(body.headers.cookie, 'app=1', 'the former names are stripped')
  const expired = res.headers
    .getSetCookie()
    .filter((line) => /Max-Age=0/i.test(line))
    .map((line) => line.slice(0, line.indexOf('=')))
  t.same([...new Set(expired)].sort(), ['ogw', 'ogw_cred_1'], 'and expired in the browser')
})

t.test('a reload that removes access rules is logged at warn with their keys', async (t) => {
  const { live, write, lines } = await setup(t)
  const withAdmins = (c: Record<string, unknown>): Record<string, unknown> => ({
    ...c,
    upstreams: [{ ...(c.upstreams as Array<Record<string, unknown>>)[0], allow: { groups: ['admins'] } }],
  })
  write(withAdmins)
  t.equal(await live.reload('SIGHUP'), true)
  t.notOk(
    lines.some((l) => l.msg === 'the new configuration removes access rules'),
    'adding a rule is not worth a warning',
  )
  write()
  t.equal(await live.reload('SIGHUP'), true, 'the rule removed: still a valid reload')
  const warning = lines.find((l) => l.msg === 'the new configuration removes access rules')
  t.match(warning, { level: 40, trigger: 'SIGHUP', keys: ['upstreams[0].allow.groups (app)'] })
})

t.test('a reload that refuses an open WebSocket closes it with 1008; one it still admits stays', async (t) => {
  const { live, gw, write } = await setup(t)
  const withSockets = (c: Record<string, unknown>, allow: Record<string, unknown> = {}) => ({
    ...c,
    upstreams: [{ ...(c.upstreams as object[])[0], websocket: true, allow }],
  })
  write(withSockets)
  t.equal(await live.reload('SIGHUP'), true)
  const url = `${gw.replace('http', 'ws')}/socket`
  const sockets: Record<string, WebSocket> = {}
  for (const user of ['alice', 'bob']) {
    const browser = new Browser()
    await (await browser.signIn(`${gw}/api/v1/openid/redirect`, user)).body?.cancel()
    const ws = await openSocket(url, { cookie: browser.cookieHeader(gw) })
    if (typeof ws === 'number') throw new Error(`upgrade refused with ${ws}`)
    t.teardown(() => ws.terminate())
    t.equal(await echo(ws, user), user)
    sockets[user] = ws
  }
  const aliceClosed = new Promise<number>((resolve) => sockets.alice?.once('close', resolve))
  write((c) => withSockets(c, { emails: ['bob@example.com'] }))
  t.equal(await live.reload('SIGHUP'), true, 'the new rules admit bob only')
  t.equal(await aliceClosed, 1008, "alice's socket is closed: policy violation")
  t.equal(await echo(sockets.bob as WebSocket, 'still'), 'still', "bob's is not")
})

t.test('a reload empties the decision cache (forwardAuth.cache): a rule the reload adds applies to the next check at once', async (t) => {
  const { live, gw, write } = await setup(t)
  const cached = (c: Record<string, unknown>): Record<string, unknown> => ({ ...c, forwardAuth: { cache: { enabled: true, ttlSeconds: 60 } } })
  write(cached)
  t.equal(await live.reload('SIGHUP'), true)
  const browser = new Browser()
  t.equal((await browser.signIn(`${gw}/api/v1/openid/redirect`, 'bob')).status, 200)
  const check = async (): Promise<number> => status(browser, `${gw}/api/v1/openid/ext-authz/page`)
  t.equal(await check(), 200, 'allowed, and cached for a minute')
  write((c) => {
    const next = cached(c)
    return { ...next, upstreams: [{ ...(next.upstreams as Array<Record<string, unknown>>)[0], allow: { groups: ['admins'] } }] }
  })
  t.equal(await live.reload('SIGHUP'), true)
  t.equal(await check(), 403, 'bob is not in admins: decided afresh')
})

t.test('close() with a proxied WebSocket open: the socket is closed and the drain ends, long before its bound', async (t) => {
  const { live, gw, write } = await setup(t)
  write((c) => ({ ...c, upstreams: [{ ...(c.upstreams as object[])[0], websocket: true }] }))
  t.equal(await live.reload('SIGHUP'), true)
  const browser = new Browser()
  await (await browser.signIn(`${gw}/api/v1/openid/redirect`, 'alice')).body?.cancel()
  const ws = await openSocket(`${gw.replace('http', 'ws')}/socket`, { cookie: browser.cookieHeader(gw) })
  if (typeof ws === 'number') throw new Error(`upgrade refused with ${ws}`)
  t.teardown(() => ws.terminate())
  t.equal(await echo(ws, 'open'), 'open')
  let code: number | undefined
  ws.once('close', (c) => (code = c))
  // An upgraded connection is no request: neither the server's close nor its closeAllConnections ends it.
  let drained = false
  void live.close(60_000).then(() => (drained = true))
  await eventually('the drain ends', () => drained, 10_000).catch(() => undefined)
  t.ok(drained, 'the drain ended within seconds of its 60 s bound')
  t.equal(await eventually('the socket closes', () => code, 1000).catch(() => undefined), 1008, 'the socket was closed by the gateway (policy: it is stopping)')
})
