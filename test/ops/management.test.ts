import { randomUUID } from 'node:crypto'
import t from 'tap'
import type { GatewayApp } from '#src/app/app'
import { startDevProvider } from '#src/dev/provider'
import { buildManagement, readiness, type ReadinessProbe } from '#src/ops/management'
import { manualClock } from '../fixtures/clock.ts'
import { rawRequest } from '../fixtures/http.ts'
import { eventually } from '../fixtures/poll.ts'
import { startRedis } from '../fixtures/redis.ts'
import { CLIENT_ID, CLIENT_SECRET, freePort, startStack, type Teardown } from '../fixtures/stack.ts'

// The management listener as cli.ts runs it, on its own port: probes, readiness rules and the
// Prometheus metrics, against the real provider, upstream and Redis.

async function management(t: Teardown, app: GatewayApp, draining = () => false): Promise<string> {
  const server = await buildManagement({ ...app.management, draining })
  t.teardown(() => server.close())
  return server.listen({ host: '127.0.0.1', port: 0 })
}

/** The sample lines of one metric family in a Prometheus text exposition. */
function samples(text: string, name: string): string[] {
  return text.split('\n').filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
}

async function metrics(origin: string): Promise<string> {
  return (await rawRequest(origin, '/metrics')).body
}

t.test("readiness(): /readyz's verdict, asked of every probe at the call; draining asks none", async (t) => {
  const asked: string[] = []
  const probe = (name: string, ready: boolean | Promise<boolean>, detail?: () => unknown): ReadinessProbe => ({
    name,
    ready: () => {
      asked.push(name)
      return ready
    },
    ...(detail === undefined ? {} : { detail }),
  })
  t.same(await readiness([probe('a', true), probe('b', Promise.resolve(true))], false), { status: 'ready' }, 'every probe passes')
  t.same(asked, ['a', 'b'], 'each asked once')
  t.same(
    await readiness([probe('a', false), probe('b', true), probe('c', Promise.resolve(false))], false),
    { status: 'not_ready', failing: ['a', 'c'] },
    'the failing ones, in order',
  )
  t.same(
    await readiness([probe('a', true, () => ({ x: 1 })), probe('b', true, () => undefined)], false),
    { status: 'ready', details: { a: { x: 1 } } },
    'details of the probes that have some',
  )
  asked.length = 0
  t.same(await readiness([probe('a', true)], true), { status: 'draining' }, 'draining')
  t.same(asked, [], 'no probe asked while draining')
})

t.test('healthz, readyz and metrics answer on the management port; readyz is 503 while draining', async (t) => {
  const stack = await startStack(t)
  let draining = false
  const origin = await management(t, stack.app, () => draining)
  const health = await rawRequest(origin, '/healthz')
  t.equal(health.status, 200)
  t.equal(health.headers['cache-control'], 'no-store')
  const ready = await rawRequest(origin, '/readyz')
  t.equal(ready.status, 200, 'provider metadata, keys and store ready')
  t.same(ready.json(), { status: 'ready' })
  const res = await rawRequest(origin, '/metrics')
  t.equal(res.status, 200)
  t.match(res.headers['content-type'], /^text\/plain; version=0\.0\.4/)
  t.match(res.body, /^process_cpu_user_seconds_total /m, "Node's default metrics")
  t.match(res.body, /^nodejs_eventloop_lag_seconds /m)
  draining = true
  const during = await rawRequest(origin, '/readyz')
  t.equal(during.status, 503)
  t.same(during.json(), { status: 'draining' })
  t.equal((await rawRequest(origin, '/healthz')).status, 200, 'still alive while draining')
})

t.test('requests are counted by upstream, method and status class; sign-in, refresh and provider calls by outcome', async (t) => {
  const clock = manualClock()
  const stack = await startStack(t, {
    clock,
    provider: { accessTokenTtlSeconds: 2 },
    upstreams: [{ name: 'app' }, { name: 'docs', match: { pathPrefix: '/docs' }, auth: 'none' }],
  })
  const origin = await management(t, stack.app)
  const browser = await stack.signedIn('alice')
  t.equal((await browser.fetch(`${stack.gw}/page`)).status, 200)
  await rawRequest(stack.gw, '/docs/intro')
  await rawRequest(stack.gw, '/page', { headers: { accept: 'application/json' } })
  await rawRequest(stack.gw, '/page', { method: 'PROPFIND', headers: { accept: 'application/json' } })
  await rawRequest(stack.gw, '/api/v1/openid/callback?code=x&state=y', { headers: { accept: 'application/json' } })
  // The access token expires (on the gateway's clock): the next request refreshes it transparently.
  clock.advance(2100)
  t.equal((await browser.fetch(`${stack.gw}/page`)).status, 200)

  const text = await metrics(origin)
  const requests = samples(text, 'openid_gateway_requests_total')
  t.ok(
    requests.some((l) => l.startsWith('openid_gateway_requests_total{route="app",method="GET",status="2xx"} ')),
    'signed-in requests to app',
  )
  t.ok(
    requests.some((l) => l.startsWith('openid_gateway_requests_total{route="docs",method="GET",status="2xx"} ')),
    'public upstream',
  )
  t.ok(
    requests.some((l) => l.startsWith('openid_gateway_requests_total{route="app",method="GET",status="4xx"} ')),
    'refused',
  )
  t.ok(
    requests.some((l) => /method="other",status="4xx"\} 1$/.test(l)),
    'unusual methods counted as other',
  )
  t.ok(
    requests.some((l) => l.startsWith('openid_gateway_requests_total{route="_gateway",method="GET",status="3xx"} ')),
    "the gateway's own endpoints",
  )
  t.ok(
    samples(text, 'openid_gateway_request_duration_seconds_bucket').some((l) => l.includes('route="app"')),
    'latency histogram',
  )

  const outcomes = samples(text, 'openid_gateway_endpoint_outcomes_total')
  t.ok(
    outcomes.some((l) => /endpoint="redirect",code="ok"\} 1$/.test(l)),
    'one sign-in started',
  )
  t.ok(
    outcomes.some((l) => /endpoint="callback",code="ok"\} 1$/.test(l)),
    'one completed',
  )
  t.ok(
    outcomes.some((l) => /endpoint="callback",code="state_mismatch"\} 1$/.test(l)),
    'one refused, by its code',
  )
  t.ok(
    samples(text, 'openid_gateway_refreshes_total').some((l) => /code="ok"\} 1$/.test(l)),
    'the refresh',
  )

  const provider = samples(text, 'openid_gateway_provider_request_duration_seconds_count')
  for (const call of ['discovery', 'jwks', 'token']) {
    t.ok(
      provider.some((l) => l.includes(`call="${call}"`)),
      `provider call ${call} measured`,
    )
  }
  t.same(samples(text, 'openid_gateway_provider_errors_total'), [], 'no provider error')
})

t.test('labels are bounded: a thousand distinct paths, hosts and users add no series', async (t) => {
  const stack = await startStack(t)
  const origin = await management(t, stack.app)
  const json = { accept: 'application/json' }
  await rawRequest(stack.gw, '/warm', { headers: json })
  const count = async (): Promise<number> => (await metrics(origin)).split('\n').filter((l) => l.startsWith('openid_gateway_')).length
  const before = await count()
  for (let i = 0; i < 1000; i++) {
    const id = randomUUID()
    await rawRequest(stack.gw, `/${id}/x?u=${id}`, { headers: { ...json, host: `${id}.example`, authorization: `Bearer ${id}` } })
  }
  t.equal(await count(), before, 'the same number of series after 1000 distinct requests')
  t.notMatch(await metrics(origin), /[0-9a-f]{8}-[0-9a-f]{4}-/, 'no request value in any label')
})

t.test('started while the provider is down: alive, not ready, sign-in 503 not_ready; ready by itself once it is up', async (t) => {
  const providerPort = await freePort()
  const stack = await startStack(t, { issuer: `http://127.0.0.1:${providerPort}` })
  const origin = await management(t, stack.app)
  t.equal((await rawRequest(origin, '/healthz')).status, 200, 'alive')
  const ready = await rawRequest(origin, '/readyz')
  t.equal(ready.status, 503, 'not ready')
  t.same(ready.json(), { status: 'not_ready', failing: ['provider_metadata', 'provider_keys'] })
  const signIn = await rawRequest(stack.gw, '/api/v1/openid/redirect', { headers: { accept: 'application/json' } })
  t.equal(signIn.status, 503)
  t.equal(signIn.json().code, 'not_ready')
  t.ok(
    samples(await metrics(origin), 'openid_gateway_provider_errors_total').some((l) => l.includes('call="discovery"')),
    'failed discovery counted',
  )

  const provider = await startDevProvider({
    port: providerPort,
    clients: [{ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, redirectUris: [`${stack.gw}/api/v1/openid/callback`] }],
  })
  t.teardown(() => provider.close())
  // The gateway retries discovery in the background, with a backoff.
  const readyz = async (): Promise<boolean> => (await rawRequest(origin, '/readyz')).status === 200
  t.equal(await eventually('ready once the provider is up', readyz, 20_000), true, 'ready once discovery succeeded by itself')
  const started = await rawRequest(stack.gw, '/api/v1/openid/redirect?performRedirect=false')
  t.equal(started.status, 200, 'sign-in works')
  t.match(started.json(), { value: new RegExp(`^http://127\\.0\\.0\\.1:${providerPort}/`) })
})

t.test('Redis store: readyz names the session store and redis while Redis is down, and recovers; store errors are counted', async (t) => {
  const redis = await startRedis(t)
  const stack = await startStack(t, { config: { session: { store: 'redis', redisUrl: redis.url, redis: { timeoutMs: 500 } } } })
  const origin = await management(t, stack.app)
  const browser = await stack.signedIn('alice')
  t.equal((await rawRequest(origin, '/readyz')).status, 200)
  await redis.stop()
  const down = await rawRequest(origin, '/readyz')
  t.equal(down.status, 503)
  t.same(down.json(), { status: 'not_ready', failing: ['session_store', 'redis'] })
  const res = await browser.fetch(`${stack.gw}/page`, { headers: { accept: 'application/json' } })
  t.equal(res.status, 503)
  const text = await metrics(origin)
  t.match(text, /^openid_gateway_session_store_unavailable_total 1$/m, 'the 503 answer counted')
  t.match(text, /^openid_gateway_session_store_errors_total [1-9]/m, "the store's failed operations counted")
  await redis.start()
  const readyz = async (): Promise<boolean> => (await rawRequest(origin, '/readyz')).status === 200
  t.equal(await eventually('ready again once Redis is back', readyz), true, 'ready again by itself')
})

t.test('cookie store with Redis: the revocation list Redis is a readiness condition; its size is a gauge', async (t) => {
  const redis = await startRedis(t)
  const stack = await startStack(t, { config: { session: { redisUrl: redis.url, redis: { timeoutMs: 500 } } } })
  const origin = await management(t, stack.app)
  t.match(await metrics(origin), /^openid_gateway_revocation_list_entries 0$/m)
  await redis.stop()
  const down = await rawRequest(origin, '/readyz')
  t.equal(down.status, 503)
  t.same(down.json(), { status: 'not_ready', failing: ['redis'] })
})

t.test('memory store: evictions are counted', async (t) => {
  const stack = await startStack(t, { config: { session: { store: 'memory', memory: { maxSessions: 1 } } } })
  const origin = await management(t, stack.app)
  await stack.signedIn('alice')
  await stack.signedIn('bob')
  t.match(await metrics(origin), /^openid_gateway_session_evictions_total\{reason="store_full"\} 1$/m)
})

t.test('memory store: evictions past session.maxSessionsPerUser are counted as user_limit', async (t) => {
  const stack = await startStack(t, { config: { session: { store: 'memory', maxSessionsPerUser: 1 } } })
  const origin = await management(t, stack.app)
  const bob = await stack.signedIn('bob')
  await stack.signedIn('alice')
  await stack.signedIn('alice')
  const text = await metrics(origin)
  t.match(text, /^openid_gateway_session_evictions_total\{reason="user_limit"\} 1$/m)
  t.match(text, /^openid_gateway_session_evictions_total\{reason="store_full"\} 0$/m)
  t.equal((await bob.fetch(`${stack.gw}/x`, { headers: { accept: 'application/json' } })).status, 200, "bob's session survives")
})
