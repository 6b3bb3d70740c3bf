import { createHash } from 'node:crypto'
import type { Clock } from '../lib/clock.js'
import type { Tokens } from '../oidc/client.js'
import { SingleFlight } from '../lib/single-flight.js'
import { TtlCache } from '../lib/ttl-cache.js'
import type { Session } from './types.js'

/**
 * How long the result of redeeming a refresh token that the provider then rotated answers later
 * requests still carrying it (at most until the new access token expires). A browser's requests
 * sent before it received the refreshed cookies arrive with the old ones, and the provider would
 * refuse the spent token (and may revoke the whole grant). Okta's default rotation grace is 30 s.
 * A token that was not rotated is simply redeemed again.
 */
export const REFRESH_GRACE_SECONDS = 30

/**
 * Decides who redeems a session's refresh token: concurrent refreshes of one session share one
 * provider call, and a token rotated out moments ago is answered with that call's result
 * (REFRESH_GRACE_SECONDS), so a provider that detects reuse never sees one token twice.
 */
export interface RefreshCoordinator {
  /** The tokens that redeeming `refreshToken` of `session` gave, calling `grant` only when needed. */
  redeem(session: RefreshingSession, refreshToken: string, grant: () => Promise<Tokens>): Promise<Tokens>
}

/** What a coordinator knows of the session it refreshes: its id, and whose it is (the Redis keys' tag). */
export type RefreshingSession = Pick<Session, 'id' | 'provider'> & { claims: { sub: string } }

/** Whether `fresh` replaced `refreshToken`, so that redeeming `refreshToken` again would fail. */
export function rotated(refreshToken: string, fresh: Tokens): boolean {
  return fresh.refreshToken !== undefined && fresh.refreshToken !== refreshToken
}

/** Until when the result of a rotation answers requests with the spent token (epoch seconds). */
export function graceEnd(fresh: Tokens, now: number): number {
  return Math.min(now + REFRESH_GRACE_SECONDS, fresh.expiresAt ?? Infinity)
}

/**
 * The grace memo's key for a session's refresh token: a digest, so that the memo (here or in the
 * primary of server.workers) never holds a spent refresh token itself.
 */
export function graceKey(sessionId: string, refreshToken: string): string {
  return `${sessionId}.${createHash('sha256').update(refreshToken).digest('base64url')}`
}

/** Bound of the grace memo: one entry per refresh within the last REFRESH_GRACE_SECONDS. */
const GRACE_ENTRIES = 10_000

/** Coordination within this process: enough for the cookie and memory stores (one replica's sessions). */
export class LocalRefreshCoordinator implements RefreshCoordinator {
  readonly #flights = new SingleFlight<Tokens>()
  readonly #redeemed: TtlCache<Tokens>
  readonly #clock: Clock

  constructor(clock: Clock) {
    this.#clock = clock
    this.#redeemed = new TtlCache(GRACE_ENTRIES, clock)
  }

  async redeem(session: RefreshingSession, refreshToken: string, grant: () => Promise<Tokens>): Promise<Tokens> {
    const sessionId = session.id
    const key = graceKey(sessionId, refreshToken)
    return (
      this.#redeemed.get(key) ??
      this.#flights.run(sessionId, async () => {
        const fresh = await grant()
        // Remembered before the flight ends, so no request falls between the two.
        if (rotated(refreshToken, fresh)) this.#redeemed.set(key, fresh, graceEnd(fresh, this.#clock.now() / 1000) * 1000)
        return fresh
      })
    )
  }
}
