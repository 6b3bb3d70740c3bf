import t from 'tap'
import { GatewayMetrics } from '#src/ops/metrics'

// The process's metrics (ops/metrics.ts): a store's series exist by the store's kind, and the
// counters a store keeps stay monotone when a reload builds a new store whose counts start at 0.

async function sample(metrics: GatewayMetrics, name: string): Promise<number | undefined> {
  const line = (await metrics.registry.metrics()).split('\n').find((l) => l.startsWith(`${name} `))
  return line === undefined ? undefined : Number(line.split(' ')[1])
}

t.test('the series of a store are those of its kind', async (t) => {
  const cookie = new GatewayMetrics({ store: 'cookie', revocations: async () => 3 })
  t.equal(await sample(cookie, 'openid_gateway_session_store_errors_total'), undefined)
  t.equal(await sample(cookie, 'openid_gateway_session_evictions_total'), undefined)
  t.equal(await sample(cookie, 'openid_gateway_revocation_list_entries'), 3)
  const redis = new GatewayMetrics({ store: 'redis' })
  t.equal(await sample(redis, 'openid_gateway_session_store_errors_total'), 0, 'redis: store errors, before any app binds its store')
  t.equal(await sample(redis, 'openid_gateway_session_evictions_total{reason="user_limit"}'), 0, 'redis: evictions past the per-user bound')
  t.equal(await sample(redis, 'openid_gateway_session_evictions_total{reason="store_full"}'), undefined, 'redis: no global bound of ours')
  t.equal(await sample(redis, 'openid_gateway_revocation_list_entries'), undefined)
  const memory = new GatewayMetrics({ store: 'memory' })
  t.equal(await sample(memory, 'openid_gateway_session_evictions_total{reason="store_full"}'), 0, 'memory: evictions of a full store')
  t.equal(await sample(memory, 'openid_gateway_session_evictions_total{reason="user_limit"}'), 0, 'memory: evictions past the per-user bound')
  t.equal(await sample(memory, 'openid_gateway_session_store_errors_total'), undefined)
})

t.test("a reload's new store starts at zero: the counter keeps what the retired one counted", async (t) => {
  const metrics = new GatewayMetrics({ store: 'redis' })
  let first = 0
  metrics.bindStore({ storeErrors: () => first })
  first = 5
  t.equal(await sample(metrics, 'openid_gateway_session_store_errors_total'), 5)
  let second = 0
  metrics.bindStore({ storeErrors: () => second })
  second = 2
  t.equal(await sample(metrics, 'openid_gateway_session_store_errors_total'), 7, 'five before the reload, two after')
  const evictions = { store_full: 0, user_limit: 3 }
  metrics.bindStore({ evictions: () => evictions })
  t.equal(await sample(metrics, 'openid_gateway_session_evictions_total{reason="user_limit"}'), 3)
  metrics.bindStore({ evictions: () => ({ store_full: 0, user_limit: 1 }) })
  t.equal(await sample(metrics, 'openid_gateway_session_evictions_total{reason="user_limit"}'), 4, 'evictions by reason stay monotone across a reload')
})

t.test("the request series read exactly as prom-client's own Counter and Histogram would, text and JSON (the workers' aggregation)", async (t) => {
  const { Counter, Histogram, Registry } = await import('prom-client')
  const metrics = new GatewayMetrics()
  const reference = new Registry()
  const counter = new Counter({
    name: 'openid_gateway_requests_total',
    help: 'Requests answered, by upstream (or _gateway, _none), method and status class.',
    labelNames: ['route', 'method', 'status'],
    registers: [reference],
  })
  const histogram = new Histogram({
    name: 'openid_gateway_request_duration_seconds',
    help: 'Time from the request to the end of the response, by upstream and method.',
    labelNames: ['route', 'method'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [reference],
  })
  // On a bound, between bounds, past the last one; several routes, methods and classes.
  const observations = [
    { route: 'app', method: 'GET', status: 200, seconds: 0.001 },
    { route: 'app', method: 'GET', status: 200, seconds: 0.0011 },
    { route: 'app', method: 'GET', status: 503, seconds: 31 },
    { route: 'api', method: 'POST', status: 401, seconds: 0.2 },
    { route: 'app', method: 'BREW', status: 404, seconds: 0 },
  ]
  for (const o of observations) {
    metrics.observeRequest({ ...o, routeUrl: undefined, code: undefined })
    const method = o.method === 'BREW' ? 'other' : o.method
    counter.inc({ route: o.route, method, status: `${Math.floor(o.status / 100)}xx` })
    histogram.observe({ route: o.route, method }, o.seconds)
  }
  for (const name of ['openid_gateway_requests_total', 'openid_gateway_request_duration_seconds']) {
    t.equal(await metrics.registry.getSingleMetricAsString(name), await reference.getSingleMetricAsString(name), `${name}: text`)
    const ours = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === name)
    const theirs = (await reference.getMetricsAsJSON()).find((m) => m.name === name)
    // As the workers send it to the primary: JSON over IPC.
    t.same(JSON.parse(JSON.stringify(ours)), JSON.parse(JSON.stringify(theirs)), `${name}: JSON`)
  }
  metrics.registry.resetMetrics()
  t.match(await metrics.registry.getSingleMetricAsString('openid_gateway_requests_total'), /status="2xx"} 0/, 'reset zeroes the series')
})
