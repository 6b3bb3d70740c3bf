import { createRequire } from 'node:module'
import pino from 'pino'
import t from 'tap'
import { connectRedis } from '../../src/session/redis-client.js'
import { startStack } from '../fixtures/stack.js'

// ioredis adds some 20 MiB to a process's resident memory: only gateways that use Redis load it.
const loaded = (): boolean => Object.keys(createRequire(import.meta.url).cache).some((path) => path.includes('/node_modules/ioredis/'))

t.test('ioredis is loaded only when Redis is used', async (t) => {
  const stack = await startStack(t, { upstreams: [{ name: 'app' }] })
  t.equal((await stack.browser().fetch(`${stack.gw}/page`, { headers: { accept: 'application/json' } })).status, 401, 'a request was served')
  t.notOk(loaded(), 'not by a gateway without session.redisUrl')
  const redis = await connectRedis({ url: 'redis://127.0.0.1:1', timeoutMs: 100 }, pino({ level: 'silent' }))
  redis.disconnect()
  t.ok(loaded(), 'by the Redis client, when one is made')
})
