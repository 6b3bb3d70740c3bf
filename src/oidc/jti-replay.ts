import { createHash } from 'node:crypto'
import type { Cluster, Redis } from 'ioredis'
import { GatewayError } from '../contract/errors.js'
import type { Clock } from '../lib/clock.js'
import { TtlCache } from '../lib/ttl-cache.js'

// Back-Channel Logout 1.0, 2.6 step 9: a logout token whose jti was already received is refused.
// Replaying one would end the sessions it names again, a sign-in made after the logout included
// (the cookie store's revocation list takes the replay's time). Each jti is remembered, keyed
// with the issuer, until its token could no longer be accepted anyway: in this process's memory,
// or in Redis (SET NX EX) when the gateway has a Redis client, so that a token replayed to
// another replica is refused too.

/**
 * jtis remembered in memory. Only tokens signed by the provider get here, so only the provider
 * fills it: beyond it the oldest (the nearest to expiry) is forgotten.
 */
export const REMEMBERED_JTIS = 100_000

/** Where the guard's keys live in Redis: session/redis-keys.ts (RedisKeys), without importing session/. */
export interface JtiKeys {
  logoutJti(digest: string): string
}

/** A Redis client comes with the keys to use in it. */
export type JtiReplayOptions = ({ redis?: undefined; keys?: JtiKeys } | { redis: Redis | Cluster | undefined; keys: JtiKeys }) & {
  maxEntries?: number
  clock: Clock
}

/** A digest: the key's length does not depend on what the token carries. */
function keyOf(issuer: string, jti: string): string {
  return createHash('sha256').update(issuer).update('\0').update(jti).digest('base64url')
}

/** The replay check of logout-token `jti`s: this class, or the primary's over IPC (server.workers). */
export interface JtiReplay {
  firstUse(issuer: string, jti: string, until: number): Promise<boolean>
  release(issuer: string, jti: string): Promise<void>
}

export class JtiReplayGuard implements JtiReplay {
  readonly #redis: { client: Redis | Cluster; keys: JtiKeys } | undefined
  readonly #seen: TtlCache<true>
  readonly #clock: Clock

  constructor(options: JtiReplayOptions) {
    this.#redis = options.redis === undefined ? undefined : { client: options.redis, keys: options.keys }
    this.#seen = new TtlCache(options.maxEntries ?? REMEMBERED_JTIS, options.clock)
    this.#clock = options.clock
  }

  /**
   * True the first time `jti` of `issuer` is presented, false for a replay; `until` (epoch
   * seconds) is when its token stops being acceptable. Throws GatewayError 503 when Redis cannot
   * answer.
   */
  async firstUse(issuer: string, jti: string, until: number): Promise<boolean> {
    const key = keyOf(issuer, jti)
    if (this.#redis === undefined) {
      if (this.#seen.get(key) !== undefined) return false
      this.#seen.set(key, true, until * 1000)
      return true
    }
    const now = this.#clock.now() / 1000
    const ttl = Math.max(1, Math.ceil(until - now))
    try {
      return (await this.#redis.client.set(this.#redis.keys.logoutJti(key), '1', 'EX', ttl, 'NX')) === 'OK'
    } catch (cause) {
      throw new GatewayError('session_store_unavailable', 'the logout token replay cache in Redis cannot be reached', { cause })
    }
  }

  /** Forgets `jti` again: its logout failed, and the provider's retry must not pass for a replay. */
  async release(issuer: string, jti: string): Promise<void> {
    const key = keyOf(issuer, jti)
    if (this.#redis === undefined) {
      this.#seen.delete(key)
      return
    }
    try {
      await this.#redis.client.del(this.#redis.keys.logoutJti(key))
    } catch (cause) {
      throw new GatewayError('session_store_unavailable', 'the logout token replay cache in Redis cannot be reached', { cause })
    }
  }
}
