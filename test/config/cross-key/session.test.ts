// The cross-key rules of session (config/cross-key/session.ts): one Redis topology, with only the
// keys that mean something with it. (A memory store shared by server.workers processes is refused
// in test/e2e/workers.test.ts, which starts them.)

import t from 'tap'
import { problems } from '../../fixtures/config/base.ts'
import { CLUSTER, ONE_OF, REDIS_URL, SENTINELS, session } from '../../fixtures/config/values.ts'

t.test('store: redis names where Redis is; a broken URL is reported alone', async (t) => {
  t.strictSame(problems({ session: { store: 'redis' } }), ['session.store: redis requires session.redisUrl, session.redis.sentinels or session.redis.cluster'], 'redis without redisUrl')
  t.strictSame(problems({ session: { store: 'redis', redisUrl: 'http://127.0.0.1' } }), ['session.redisUrl: must be a redis:// or rediss:// URL'], 'redis with a broken redisUrl: only the URL is reported')
})

t.test('store: redis needs one topology', async (t) => {
  t.strictSame(problems(session({ store: 'redis' })), ['session.store: redis requires session.redisUrl, session.redis.sentinels or session.redis.cluster'])
  t.strictSame(problems(session({ store: 'redis', redisUrl: REDIS_URL })), [], 'one node')
  t.strictSame(problems(session({ store: 'redis', redis: { sentinels: SENTINELS } })), [], 'Sentinel')
  t.strictSame(problems(session({ store: 'redis', redis: { cluster: CLUSTER } })), [], 'Cluster')
  t.strictSame(problems(session({ redis: { cluster: CLUSTER } })), [], 'with the cookie store: the revocation list and replay guard in a Cluster')
})

t.test('two topologies are refused, naming the second', async (t) => {
  t.strictSame(problems(session({ store: 'redis', redisUrl: REDIS_URL, redis: { sentinels: SENTINELS } })), [
    `session.redis.sentinels: must not be given with session.redisUrl: ${ONE_OF}`,
  ])
  t.strictSame(problems(session({ store: 'redis', redisUrl: REDIS_URL, redis: { cluster: CLUSTER } })), [`session.redis.cluster: must not be given with session.redisUrl: ${ONE_OF}`])
  t.strictSame(problems(session({ store: 'redis', redis: { sentinels: SENTINELS, cluster: CLUSTER } })), [
    `session.redis.cluster: must not be given with session.redis.sentinels: ${ONE_OF}`,
  ])
  t.strictSame(problems(session({ redisUrl: REDIS_URL, redis: { cluster: CLUSTER } })), [`session.redis.cluster: must not be given with session.redisUrl: ${ONE_OF}`], 'whatever the store')
  t.strictSame(problems(session({ store: 'redis', redisUrl: REDIS_URL, redis: { sentinels: SENTINELS, cluster: CLUSTER } })), [
    `session.redis.sentinels: must not be given with session.redisUrl: ${ONE_OF}`,
  ])
})

t.test("the data nodes' username, password and tls go with sentinels or cluster, not with redisUrl", async (t) => {
  t.strictSame(problems(session({ store: 'redis', redisUrl: REDIS_URL, redis: { username: 'gateway' } })), [
    'session.redis.username: applies to sentinels and cluster only; with session.redisUrl, write it in the URL',
  ])
  t.strictSame(problems(session({ store: 'redis', redisUrl: REDIS_URL, redis: { password: 'pw-123456' } })), [
    'session.redis.password: applies to sentinels and cluster only; with session.redisUrl, write it in the URL',
  ])
  t.strictSame(problems(session({ store: 'redis', redisUrl: REDIS_URL, redis: { tls: true } })), [
    'session.redis.tls: applies to sentinels and cluster only; with session.redisUrl, write rediss://',
  ])
  t.strictSame(problems(session({ store: 'redis', redisUrl: REDIS_URL, redis: { tls: false } })), [], 'tls: false is the default, said aloud')
  for (const topology of [{ sentinels: SENTINELS }, { cluster: CLUSTER }]) {
    t.strictSame(problems(session({ store: 'redis', redis: { ...topology, username: 'gateway', password: 'pw-123456', tls: true } })), [], Object.keys(topology)[0] as string)
  }
  t.strictSame(problems(session({ store: 'redis', redis: { cluster: CLUSTER, username: '' } })), ['session.redis.username: must not be empty'])
})

t.test('waitReplicas needs a Redis', async (t) => {
  t.strictSame(problems(session({ redis: { waitReplicas: 1 } })), ['session.redis.waitReplicas: needs a Redis: session.redisUrl, session.redis.sentinels or session.redis.cluster'])
  t.strictSame(problems(session({ store: 'memory', redis: { waitReplicas: 0 } })), ['session.redis.waitReplicas: needs a Redis: session.redisUrl, session.redis.sentinels or session.redis.cluster'])
  t.strictSame(problems(session({ store: 'redis', redisUrl: REDIS_URL, redis: { waitReplicas: 1 } })), [])
  t.strictSame(problems(session({ store: 'redis', redis: { cluster: CLUSTER, waitReplicas: 2, waitTimeoutMs: 100 } })), [])
  t.strictSame(problems(session({ store: 'redis', redisUrl: REDIS_URL, redis: { waitReplicas: 17 } })), ['session.redis.waitReplicas: must be between 0 and 16'])
  t.strictSame(problems(session({ store: 'redis', redisUrl: REDIS_URL, redis: { waitTimeoutMs: 0 } })), ['session.redis.waitTimeoutMs: must be between 1 and 60000'])
})
