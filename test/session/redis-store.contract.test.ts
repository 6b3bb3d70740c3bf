import t from 'tap'
import pino from 'pino'
import type { Clock } from '#src/lib/clock'
import { CookieCipher } from '#src/session/cipher'
import { GatewayCookies } from '#src/session/cookies'
import { connectRedis, firstConnection } from '#src/session/redis-client'
import { RedisKeys } from '#src/session/redis-keys'
import { RedisSessionStore } from '#src/session/redis-store'
import { startRedis } from '../fixtures/redis.ts'
import { CONTRACT_MAX_AGE, CONTRACT_SECRET, storeContract } from '../fixtures/store-contract.ts'

// The session store contract (test/fixtures/store-contract.ts) against the Redis store and a real redis-server.

/** The cookies of a store on `clock`: its seals expire by it too. */
function cookiesOn(clock: Clock): { cipher: CookieCipher; cookies: GatewayCookies } {
  const cipher = new CookieCipher([CONTRACT_SECRET], clock)
  return { cipher, cookies: new GatewayCookies({ name: 'ogw', secrets: [CONTRACT_SECRET], secure: false, sameSite: 'lax', credentialsPath: '/' }, cipher) }
}

t.test('redis store', async (t) => {
  const server = await startRedis(t)
  const redis = await connectRedis({ url: `redis://127.0.0.1:${server.port}`, timeoutMs: 1000 }, pino({ level: 'silent' }))
  t.teardown(() => redis.disconnect())
  await firstConnection(redis, 2000)
  let prefix = 0
  // Redis expires the entries at the end of the session on its own, real clock (EXAT): the
  // contract's clock starts at the real time and moves ahead of it, so what ends a session on
  // the contract's clock is the store's own check.
  storeContract(
    t,
    async (_t, clock) =>
      new RedisSessionStore({ redis, keys: new RedisKeys(`contract${++prefix}:`), ...cookiesOn(clock), maxAgeSeconds: CONTRACT_MAX_AGE, clock }),
  )
})
