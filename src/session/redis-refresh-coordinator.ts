import { randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { GatewayError } from '../contract/errors.js'
import type { Clock } from '../lib/clock.js'
import { SingleFlight } from '../lib/single-flight.js'
import type { Tokens } from '../oidc/client.js'
import type { CookieCipher } from './cipher.js'
import { graceEnd, rotated, type RefreshCoordinator, type RefreshingSession } from './refresh-coordinator.js'
import { durableWrite, type RedisClient } from './redis-client.js'
import type { RedisKeys } from './redis-keys.js'
import { runScript } from './redis-scripts.js'
import { recordOutcome, storeUnavailable } from './redis-store.js'
import { SEALED_REFRESH_RESULT } from './sealed.js'

// Refreshes coordinated across replicas. One replica at a time holds a session's refresh lock and
// redeems the token; when the provider rotated it, the result is kept in Redis, sealed, for the
// grace period, and every replica's request still carrying the spent token is answered with it.
// Within a replica, concurrent requests share one flight, so one replica sends one lock request,
// not one per request.
//
// The lock and the result carry the user's hash tag (redis-keys.ts) and change together by two
// scripts (redis-scripts.ts): a claim (the result if there is one, else the lock if it is free)
// and a settlement (store the result, release the lock). A lock is short (SET NX PX with a random
// token), but the claim also records the attempt to redeem this token, which lives longer
// (lockMs + waitMs) and ends when its holder's redemption is over: a holder slower than its lock
// (a loaded machine) keeps it, so no request sends the token while the first redemption may still
// be under way at the provider (two in flight at once: a rotating provider with reuse detection
// revokes the grant). A failed redemption is over: the next request tries again, as the contract's
// 502 promises; had the provider spent the token, that try gets invalid_grant whenever it is made,
// so holding it back would only delay the same answer. A holder that dies blocks that token's
// refresh until the attempt expires; then the next request redeems.
//
// Failover (Sentinel, Cluster): the lock and the result are written with WAIT (durableWrite), so
// the promoted replica has them. A redemption that finished while no primary was reachable keeps
// trying to settle until its wait runs out: the provider has spent the old token, and the new one
// is worth the wait (a lost result would sign the user out at the next refresh).

const POLL_MS = 25

export interface RedisRefreshOptions {
  redis: RedisClient
  keys: RedisKeys
  cipher: CookieCipher
  /** Lifetime of a lock: longer than a refresh can take (the provider's timeouts). */
  lockMs: number
  /** How long a request waits for another replica's refresh (or to settle its own) before answering 503. */
  waitMs: number
  /** What the grace of a rotation is counted on. */
  clock: Clock
}

export class RedisRefreshCoordinator implements RefreshCoordinator {
  readonly #redis: RedisClient
  readonly #keys: RedisKeys
  readonly #cipher: CookieCipher
  readonly #lockMs: number
  readonly #waitMs: number
  readonly #attemptMs: number
  readonly #clock: Clock
  readonly #flights = new SingleFlight<Tokens>()

  constructor(options: RedisRefreshOptions) {
    this.#redis = options.redis
    this.#keys = options.keys
    this.#cipher = options.cipher
    this.#lockMs = options.lockMs
    this.#waitMs = options.waitMs
    // Longer than a waiter waits after the lock expired: no request that found the lock taken
    // outlasts the attempt and redeems the token again.
    this.#attemptMs = options.lockMs + options.waitMs
    this.#clock = options.clock
  }

  redeem(session: RefreshingSession, refreshToken: string, grant: () => Promise<Tokens>): Promise<Tokens> {
    return this.#flights.run(session.id, () => this.#coordinated(session, refreshToken, grant))
  }

  async #coordinated(session: RefreshingSession, refreshToken: string, grant: () => Promise<Tokens>): Promise<Tokens> {
    const user = this.#keys.userTag({ provider: session.provider, sub: session.claims.sub })
    const keys = [
      this.#keys.refreshResult(user, session.id, refreshToken),
      this.#keys.refreshLock(user, session.id),
      this.#keys.refreshAttempt(user, session.id, refreshToken),
    ] as const
    // A bound on real waiting (the polls below sleep), so monotonic time, not the clock.
    const deadline = performance.now() + this.#waitMs
    for (;;) {
      const token = randomBytes(16).toString('base64url')
      const claim = await this.#redisCall(() =>
        durableWrite(this.#redis, keys[1], (r) => runScript(r, 'ogwRefreshClaim', keys, [token, this.#lockMs, this.#attemptMs])),
      )
      const [outcome, sealed] = claim as [string, string?]
      if (outcome === 'result' && sealed !== undefined) {
        const remembered = this.#open(keys[0], sealed)
        if (remembered !== undefined) return remembered
      }
      if (outcome === 'locked') {
        let fresh: Tokens
        try {
          fresh = await grant()
        } catch (err) {
          // Over, though failed: the attempt ends with the lock. Best effort: an unreleased lock and
          // attempt expire by themselves.
          await durableWrite(this.#redis, keys[1], (r) => runScript(r, 'ogwRefreshSettle', keys, [token, '', 0])).catch(() => undefined)
          throw err
        }
        await this.#settle(keys, token, refreshToken, fresh, deadline)
        return fresh
      }
      if (performance.now() >= deadline) {
        throw new GatewayError('session_store_unavailable', 'another replica is refreshing this session and has not finished; try again', {
          headers: { 'retry-after': '1' },
        })
      }
      await sleep(POLL_MS)
    }
  }

  /**
   * Keeps a rotation's result and releases the lock, in one step, so no waiter finds neither.
   * While Redis cannot be reached (a failover) it tries again until `deadline`.
   */
  async #settle(keys: readonly [string, string, string], token: string, refreshToken: string, fresh: Tokens, deadline: number): Promise<void> {
    const now = this.#clock.now() / 1000
    const until = graceEnd(fresh, now)
    const keep = rotated(refreshToken, fresh) && until > now
    const sealed = keep ? this.#cipher.seal(purpose(keys[0]), SEALED_REFRESH_RESULT.encode(fresh), until) : ''
    const ttlMs = keep ? Math.ceil((until - now) * 1000) : 0
    for (;;) {
      try {
        await durableWrite(this.#redis, keys[1], (r) => runScript(r, 'ogwRefreshSettle', keys, [token, sealed, ttlMs]))
        recordOutcome(this.#redis, true)
        return
      } catch (err) {
        // Nothing to keep: the lock expires by itself. One operation however many tries: it
        // failed when it gives up.
        if (!keep || performance.now() >= deadline) {
          recordOutcome(this.#redis, false)
          if (keep) throw storeUnavailable(err)
          return
        }
        await sleep(POLL_MS * 4)
      }
    }
  }

  #open(key: string, sealed: string): Tokens | undefined {
    const value = SEALED_REFRESH_RESULT.decode(this.#cipher.open(purpose(key), sealed))
    if (value === undefined) return undefined
    const tokens: Tokens = {
      accessToken: value.accessToken,
      expiresAt: value.expiresAt,
      refreshToken: value.refreshToken,
      idToken: value.idToken,
      claims: value.claims,
    }
    if (value.dpopKey !== undefined) tokens.dpopKey = value.dpopKey
    return tokens
  }

  async #redisCall<T>(operation: () => Promise<T>): Promise<T> {
    let result: T
    try {
      result = await operation()
    } catch (err) {
      recordOutcome(this.#redis, false)
      throw storeUnavailable(err)
    }
    recordOutcome(this.#redis, true)
    return result
  }
}

/** The seal's authenticated data: a result opens only under the key it was written to. */
function purpose(key: string): string {
  return `redis-refresh:${key}`
}
