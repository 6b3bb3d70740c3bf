import { createHash, randomUUID } from 'node:crypto'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { GatewayError } from '../errors.js'
import type { Tokens } from '../oidc/client.js'
import { SingleFlight } from '../lib/single-flight.js'
import { TtlCache } from '../lib/ttl-cache.js'
import type { Session, SessionClaims, SessionStore } from './types.js'

/** Claims every session keeps: identity headers and the standard `allow` rules read them. */
export const IDENTITY_CLAIMS = ['sub', 'email', 'email_verified', 'groups', 'preferred_username', 'sid'] as const

/**
 * Redeems a refresh token at the provider. `sub` is the session's subject, which a refreshed ID
 * token must repeat (OpenID Connect Core 12.2). Throws GatewayError `refresh_token_invalid` when
 * the provider refuses the token, and a 5xx GatewayError when the provider fails.
 */
export type RefreshGrant = (refreshToken: string, sub: string) => Promise<Tokens>

/**
 * How long the result of redeeming a refresh token that the provider then rotated answers later
 * requests still carrying it (at most until the new access token expires). A browser's requests
 * sent before it received the refreshed cookies arrive with the old ones, and the provider would
 * refuse the spent token (and may revoke the whole grant). Okta's default rotation grace is 30 s.
 * A token that was not rotated is simply redeemed again.
 */
export const REFRESH_GRACE_SECONDS = 30
/** Bound of the grace memo: one entry per refresh within the last REFRESH_GRACE_SECONDS. */
const GRACE_ENTRIES = 10_000

/**
 * Creates sessions from token responses and refreshes them. Refreshes run once per session at a
 * time: concurrent requests of one session share the provider call. The one owner of "a refused
 * refresh token ends the session".
 */
export class SessionLifecycle {
  readonly #grant: RefreshGrant
  readonly #store: SessionStore
  readonly #claimNames: readonly string[]
  readonly #maxAgeSeconds: number
  readonly #flights = new SingleFlight<Tokens>()
  readonly #redeemed = new TtlCache<Tokens>(GRACE_ENTRIES)

  constructor(grant: RefreshGrant, store: SessionStore, extraClaims: Iterable<string>, maxAgeSeconds: number) {
    this.#grant = grant
    this.#store = store
    this.#claimNames = [...new Set([...IDENTITY_CLAIMS, ...extraClaims])]
    this.#maxAgeSeconds = maxAgeSeconds
  }

  /** A new session for a completed sign-in: always a fresh id, so an old session is never reused. */
  create(tokens: Tokens): Session {
    if (tokens.claims === undefined) throw new GatewayError('id_token_invalid', 'the token response carried no ID token')
    const now = Math.floor(Date.now() / 1000)
    const session: Session = {
      id: randomUUID(),
      claims: this.#pick(tokens.claims),
      accessToken: tokens.accessToken,
      expiresAt: this.#expiry(tokens, now),
      createdAt: now,
    }
    if (tokens.refreshToken !== undefined) session.refreshToken = tokens.refreshToken
    if (tokens.idToken !== undefined) session.idToken = tokens.idToken
    return session
  }

  /**
   * Redeems the session's refresh token (with its credentials, see SessionStore.withCredentials)
   * and stores the result. Concurrent refreshes of one session share one provider call, and a
   * token rotated out moments ago is answered with that refresh's result (REFRESH_GRACE_SECONDS). A refused
   * refresh token ends the session (its cookies are cleared) before the error propagates; a
   * provider fault keeps it.
   */
  async refresh(req: FastifyRequest, reply: FastifyReply, session: Session): Promise<Session> {
    const refreshToken = session.refreshToken
    if (refreshToken === undefined) throw new GatewayError('refresh_token_missing', 'the session holds no refresh token')
    // Keyed by a digest: the memo never holds a spent refresh token itself.
    const key = `${session.id}.${createHash('sha256').update(refreshToken).digest('base64url')}`
    let tokens: Tokens
    try {
      tokens =
        this.#redeemed.get(key, Date.now() / 1000) ??
        (await this.#flights.run(session.id, async () => {
          const fresh = await this.#grant(refreshToken, session.claims.sub)
          const now = Date.now() / 1000
          // Remembered before the flight ends, so no request falls between the two.
          if (fresh.refreshToken !== undefined && fresh.refreshToken !== refreshToken) {
            this.#redeemed.set(key, fresh, Math.min(now + REFRESH_GRACE_SECONDS, fresh.expiresAt ?? Infinity), now)
          }
          return fresh
        }))
    } catch (err) {
      if (err instanceof GatewayError && err.code === 'refresh_token_invalid') await this.#store.destroy(req, reply)
      throw err
    }
    const updated: Session = {
      ...session,
      accessToken: tokens.accessToken,
      expiresAt: this.#expiry(tokens, Math.floor(Date.now() / 1000)),
    }
    // Providers that rotate refresh tokens send a new one; the others keep the old one valid.
    if (tokens.refreshToken !== undefined) updated.refreshToken = tokens.refreshToken
    if (tokens.idToken !== undefined) updated.idToken = tokens.idToken
    // The client has validated the refreshed ID token, its unchanged `sub` included (Core 12.2).
    if (tokens.claims !== undefined) updated.claims = this.#pick(tokens.claims)
    await this.#store.save(req, reply, updated)
    return updated
  }

  #expiry(tokens: Tokens, now: number): number {
    // Without expires_in the access token is taken to live as long as the session may.
    const sessionEnd = now + this.#maxAgeSeconds
    return tokens.expiresAt === undefined ? sessionEnd : Math.min(tokens.expiresAt, sessionEnd)
  }

  #pick(claims: Record<string, unknown>): SessionClaims {
    const picked: Record<string, unknown> = {}
    for (const name of this.#claimNames) if (claims[name] !== undefined) picked[name] = claims[name]
    return picked as SessionClaims
  }
}
