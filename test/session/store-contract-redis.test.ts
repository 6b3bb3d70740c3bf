import t from 'tap'
import pino from 'pino'
import { CookieCipher } from '../../src/session/cipher.js'
import { GatewayCookies } from '../../src/session/cookies.js'
import { connectRedis, firstConnection } from '../../src/session/redis-client.js'
import { RedisKeys } from '../../src/session/redis-keys.js'
import { RedisSessionStore } from '../../src/session/redis-store.js'
import { startRedis } from '../fixtures/redis.js'
import { CONTRACT_SECRET, storeContract } from '../fixtures/store-contract.js'

// The session store contract (test/fixtures/store-contract.ts) against the Redis store and a real redis-server.

const cipher = new CookieCipher([CONTRACT_SECRET])
const cookies = new GatewayCookies({ name: 'ogw', secrets: [CONTRACT_SECRET], secure: false, sameSite: 'lax', credentialsPath: '/' }, cipher)

t.test('redis store', async (t) => {
  const server = await startRedis(t)
  const redis = await connectRedis({ url: `redis://127.0.0.1:${server.port}`, timeoutMs: 1000 }, pino({ level: 'silent' }))
  t.teardown(() => redis.disconnect())
  await firstConnection(redis, 2000)
  let prefix = 0
  storeContract(t, async () => new RedisSessionStore({ redis, keys: new RedisKeys(`contract${++prefix}:`), cookies, cipher, maxAgeSeconds: 600 }))
})
