import t from 'tap'
import { GatewayMetrics } from '../../src/ops/metrics.js'

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
  t.equal(await sample(redis, 'openid_gateway_session_evictions_total'), undefined)
  t.equal(await sample(redis, 'openid_gateway_revocation_list_entries'), undefined)
  const memory = new GatewayMetrics({ store: 'memory' })
  t.equal(await sample(memory, 'openid_gateway_session_evictions_total'), 0, 'memory: evictions')
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
})
