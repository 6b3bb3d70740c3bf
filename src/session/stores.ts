import type { ProviderConfig, SessionConfig } from '../options/types.js'
import type { Clock } from '../lib/clock.js'
import type { CookieCipher } from './cipher.js'
import type { GatewayCookies } from './cookies.js'
import { CookieSessionStore } from './cookie-store.js'
import { MemorySessionStore, type MemorySessions } from './memory-store.js'
import type { RedisClient } from './redis-client.js'
import type { RedisKeys } from './redis-keys.js'
import { RedisRefreshCoordinator } from './redis-refresh-coordinator.js'
import { RedisSessionStore } from './redis-store.js'
import type { RefreshCoordinator } from './refresh-coordinator.js'
import type { RevocationList } from './revocation.js'
import type { SessionStore } from './types.js'

// The session store `session.store` names, with the refresh coordinator that goes with it: the
// cookie and memory stores share the process's coordinator (the primary's across workers); the
// Redis store coordinates in Redis, so that one redemption serves every replica.

/** What the store is built on that outlives one configuration (the process's). */
export interface StoreFoundations {
  cookies: GatewayCookies
  cipher: CookieCipher
  clock: Clock
  redis: RedisClient | undefined
  keys: RedisKeys
  coordinator: RefreshCoordinator
  memorySessions: MemorySessions
  revocations: RevocationList
}

export function createSessionStore(
  session: SessionConfig,
  providers: readonly Pick<ProviderConfig, 'timeoutMs' | 'ssf'>[],
  on: StoreFoundations,
): { store: SessionStore; coordinator: RefreshCoordinator } {
  const { cookies, cipher, clock, redis, keys } = on
  const { maxAgeSeconds } = session
  if (session.store === 'redis') {
    // config/ refuses store: redis without a Redis, and the process opens it then.
    if (redis === undefined) throw new TypeError('session.store: redis without a Redis client')
    // A refresh calls the token endpoint and may fetch the provider's keys: two provider timeouts.
    const lockMs = 2 * Math.max(...providers.map((p) => p.timeoutMs)) + session.redis.timeoutMs
    return {
      // The email link only with a Shared Signals receiver, which is its one reader.
      store: new RedisSessionStore({
        redis,
        keys,
        cookies,
        cipher,
        maxAgeSeconds,
        maxSessionsPerUser: session.maxSessionsPerUser,
        clock,
        indexEmail: providers.some((p) => p.ssf !== undefined),
      }),
      coordinator: new RedisRefreshCoordinator({ redis, keys, cipher, lockMs, waitMs: 2 * lockMs, clock }),
    }
  }
  if (session.store === 'memory') {
    const bounds = { maxSessions: session.memory.maxSessions, maxSessionsPerUser: session.maxSessionsPerUser }
    return { store: new MemorySessionStore(cookies, maxAgeSeconds, bounds, clock, on.memorySessions), coordinator: on.coordinator }
  }
  return { store: new CookieSessionStore(cookies, maxAgeSeconds, clock, on.revocations), coordinator: on.coordinator }
}
