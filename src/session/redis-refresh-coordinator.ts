import { setTimeout as sleep } from 'node:timers/promises'
import type { Redis } from 'ioredis'
import { GatewayError } from '../contract/errors.js'
import type { Clock } from '../lib/clock.js'
import { SingleFlight } from '../lib/single-flight.js'
import type { Tokens } from '../oidc/client.js'
import type { CookieCipher } from './cipher.js'
import { graceEnd, rotated, type RefreshCoordinator } from './refresh-coordinator.js'
import type { RedisKeys } from './redis-keys.js'
import { RedisLock } from './redis-lock.js'
import { storeUnavailable } from './redis-store.js'
import { SEALED_REFRESH_RESULT } from './sealed.js'

// Refreshes coordinated across replicas. One replica at a time holds a session's refresh lock
// (RedisLock) and redeems the token; when the provider rotated it, the result is kept in Redis,
// sealed, for the grace period, and every replica's request still carrying the spent token is
// answered with it. Within a replica, concurrent requests share one flight, so one replica sends
// one lock request, not one per request.
//
// A holder that dies leaves its lock to expire; the next request then redeems. A waiter gives up
// after a bounded wait with 503 rather than redeem the token a second time.

const POLL_MS = 25

export interface RedisRefreshOptions {
  redis: Redis
  keys: RedisKeys
  cipher: CookieCipher
  /** Lifetime of a lock: longer than a refresh can take (the provider's timeouts). */
  lockMs: number
  /** How long a request waits for another replica's refresh before answering 503. */
  waitMs: number
  /** What the grace of a rotation is counted on. */
  clock: Clock
}

export class RedisRefreshCoordinator implements RefreshCoordinator {
  readonly #redis: Redis
  readonly #keys: RedisKeys
  readonly #cipher: CookieCipher
  readonly #lock: RedisLock
  readonly #lockMs: number
  readonly #waitMs: number
  readonly #clock: Clock
  readonly #flights = new SingleFlight<Tokens>()

  constructor(options: RedisRefreshOptions) {
    this.#redis = options.redis
    this.#keys = options.keys
    this.#cipher = options.cipher
    this.#lock = new RedisLock(options.redis)
    this.#lockMs = options.lockMs
    this.#waitMs = options.waitMs
    this.#clock = options.clock
  }

  redeem(sessionId: string, refreshToken: string, grant: () => Promise<Tokens>): Promise<Tokens> {
    return this.#flights.run(sessionId, () => this.#coordinated(sessionId, refreshToken, grant))
  }

  async #coordinated(sessionId: string, refreshToken: string, grant: () => Promise<Tokens>): Promise<Tokens> {
    const resultKey = this.#keys.refreshResult(sessionId, refreshToken)
    const lockKey = this.#keys.refreshLock(sessionId)
    // A bound on real waiting (the polls below sleep), so monotonic time, not the clock.
    const deadline = performance.now() + this.#waitMs
    for (;;) {
      const remembered = await this.#recall(resultKey)
      if (remembered !== undefined) return remembered
      const token = await this.#redisCall(() => this.#lock.acquire(lockKey, this.#lockMs))
      if (token !== undefined) {
        try {
          // The previous holder may have finished between the read above and the lock.
          const justRemembered = await this.#recall(resultKey)
          if (justRemembered !== undefined) return justRemembered
          const fresh = await grant()
          // Kept before the lock is released, so no waiter finds neither lock nor result.
          if (rotated(refreshToken, fresh)) await this.#remember(resultKey, fresh)
          return fresh
        } finally {
          // Best effort: an unreleased lock expires by itself.
          await this.#lock.release(lockKey, token).catch(() => false)
        }
      }
      if (performance.now() >= deadline) {
        throw new GatewayError('session_store_unavailable', 'another replica is refreshing this session and has not finished; try again', {
          headers: { 'retry-after': '1' },
        })
      }
      await sleep(POLL_MS)
    }
  }

  async #recall(key: string): Promise<Tokens | undefined> {
    const sealed = await this.#redisCall(() => this.#redis.get(key))
    if (sealed === null) return undefined
    const value = SEALED_REFRESH_RESULT.decode(this.#cipher.open(purpose(key), sealed))
    if (value === undefined) return undefined
    const tokens: Tokens = { accessToken: value.accessToken, expiresAt: value.expiresAt, refreshToken: value.refreshToken, idToken: value.idToken, claims: value.claims }
    if (value.dpopKey !== undefined) tokens.dpopKey = value.dpopKey
    return tokens
  }

  async #remember(key: string, fresh: Tokens): Promise<void> {
    const now = this.#clock.now() / 1000
    const until = graceEnd(fresh, now)
    if (until <= now) return
    const sealed = this.#cipher.seal(purpose(key), SEALED_REFRESH_RESULT.encode(fresh), until)
    await this.#redisCall(() => this.#redis.set(key, sealed, 'PX', Math.ceil((until - now) * 1000)))
  }

  async #redisCall<T>(operation: () => Promise<T>): Promise<T> {
    try {
      return await operation()
    } catch (err) {
      throw storeUnavailable(err)
    }
  }
}

/** The seal's authenticated data: a result opens only under the key it was written to. */
function purpose(key: string): string {
  return `redis-refresh:${key}`
}
