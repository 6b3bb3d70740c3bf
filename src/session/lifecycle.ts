import { randomBytes } from 'node:crypto'
import { keptClaimNames, type ClaimReaders } from '../contract/claim-path.js'
import { GatewayError } from '../contract/errors.js'
import type { Clock } from '../lib/clock.js'
import type { Tokens } from '../oidc/client.js'
import type { RefreshCoordinator } from './refresh-coordinator.js'
import type { SessionClaims } from '../contract/identity.js'
import type { Session, SessionReply, SessionRequest, SessionStore } from './types.js'

/**
 * Claims every session keeps: identity headers and the standard `allow` rules read them; `acr`,
 * `amr` and `auth_time` say how and when the user authenticated (step-up rules, the identity
 * headers and assertion). A session sealed before they were kept has none, and simply does not
 * meet a step-up rule until its user signs in again.
 */
export const IDENTITY_CLAIMS = ['sub', 'email', 'email_verified', 'groups', 'preferred_username', 'sid', 'acr', 'amr', 'auth_time'] as const

/** How the user authenticated (OpenID Connect Core 2): a refresh does not authenticate again. */
const AUTHENTICATION_CLAIMS = ['acr', 'amr', 'auth_time'] as const

/**
 * Redeems a refresh token at the session's provider. The session's `sub` is the one a refreshed
 * ID token must repeat (OpenID Connect Core 12.2). Throws GatewayError `refresh_token_invalid` when
 * the provider refuses the token, and a 5xx GatewayError when the provider fails.
 */
export type RefreshGrant = (refreshToken: string, session: Pick<Session, 'claims' | 'dpopKey' | 'provider' | 'issuer'>) => Promise<Tokens>

/**
 * Told of each refresh this lifecycle redeemed at the provider, after it was stored (`refusal`
 * undefined) or refused: the audit trail's one line per redemption (ops/audit.ts). Requests that
 * shared another's redemption are not told again.
 */
export type RefreshObserver = (req: SessionRequest, session: Session, refusal?: unknown) => void

/** Session ids carry 256 random bits: unguessable, and never reused by a later sign-in. */
const SESSION_ID_BYTES = 32

/**
 * Creates sessions from token responses and refreshes them. Refreshes run once per session at a
 * time (the RefreshCoordinator: this process, or every replica through Redis). The one owner of
 * "a refused refresh token ends the session".
 */
export class SessionLifecycle {
  readonly #grant: RefreshGrant
  readonly #store: SessionStore
  readonly #claimNames: readonly string[]
  readonly #maxAgeSeconds: number
  readonly #coordinator: RefreshCoordinator
  readonly #clock: Clock
  readonly #observe: RefreshObserver | undefined

  constructor(
    grant: RefreshGrant,
    store: SessionStore,
    coordinator: RefreshCoordinator,
    /** What reads the claims besides the identity: a session keeps the claims they read, and no other. */
    readers: ClaimReaders,
    maxAgeSeconds: number,
    clock: Clock,
    observe?: RefreshObserver,
  ) {
    this.#grant = grant
    this.#store = store
    this.#coordinator = coordinator
    this.#claimNames = [...new Set([...IDENTITY_CLAIMS, ...keptClaimNames(readers)])]
    this.#maxAgeSeconds = maxAgeSeconds
    this.#clock = clock
    this.#observe = observe
  }

  /**
   * A new session for a completed sign-in at `provider`, whose issuer is `issuer` (the session is
   * bound to it, issuer-binding.ts): always a fresh id, so an old session is never reused.
   */
  create(tokens: Tokens, provider: string, issuer: string): Session {
    if (tokens.claims === undefined) throw new GatewayError('id_token_invalid', 'the token response carried no ID token')
    const now = Math.floor(this.#clock.now() / 1000)
    const session: Session = {
      id: randomBytes(SESSION_ID_BYTES).toString('base64url'),
      claims: this.#pick(tokens.claims),
      accessToken: tokens.accessToken,
      expiresAt: this.#expiry(tokens, now),
      createdAt: now,
      provider,
      issuer,
    }
    if (tokens.refreshToken !== undefined) session.refreshToken = tokens.refreshToken
    if (tokens.idToken !== undefined) session.idToken = tokens.idToken
    if (tokens.dpopKey !== undefined) session.dpopKey = tokens.dpopKey
    return session
  }

  /**
   * Redeems the session's refresh token (with its credentials, see SessionStore.withCredentials)
   * and stores the result. Concurrent refreshes of one session share one provider call, and a
   * token rotated out moments ago is answered with that refresh's result (see RefreshCoordinator). A refused
   * refresh token ends the session (its cookies are cleared) before the error propagates; a
   * provider fault keeps it.
   */
  async refresh(req: SessionRequest, reply: SessionReply, session: Session): Promise<Session> {
    const refreshToken = session.refreshToken
    if (refreshToken === undefined) throw new GatewayError('refresh_token_missing', 'the session holds no refresh token')
    let redeemed = false
    try {
      const updated = await this.#redeem(req, reply, session, refreshToken, () => {
        redeemed = true
      })
      if (redeemed) this.#observe?.(req, updated)
      return updated
    } catch (err) {
      if (redeemed) this.#observe?.(req, session, err)
      throw err
    }
  }

  /** The refresh itself; `redeeming` is called when this request is the one to redeem the token. */
  async #redeem(req: SessionRequest, reply: SessionReply, session: Session, refreshToken: string, redeeming: () => void): Promise<Session> {
    let tokens: Tokens
    try {
      tokens = await this.#coordinator.redeem(session, refreshToken, () => {
        redeeming()
        return this.#grant(refreshToken, session)
      })
    } catch (err) {
      if (err instanceof GatewayError && err.code === 'refresh_token_invalid') await this.#store.destroy(req, reply)
      throw err
    }
    const updated: Session = {
      ...session,
      accessToken: tokens.accessToken,
      expiresAt: this.#expiry(tokens, Math.floor(this.#clock.now() / 1000)),
    }
    // Providers that rotate refresh tokens send a new one; the others keep the old one valid.
    if (tokens.refreshToken !== undefined) updated.refreshToken = tokens.refreshToken
    if (tokens.idToken !== undefined) updated.idToken = tokens.idToken
    if (tokens.dpopKey !== undefined) updated.dpopKey = tokens.dpopKey
    if (tokens.claims !== undefined) updated.claims = refreshedClaims(session.claims, this.#pick(tokens.claims))
    // Ended while the provider answered (logout, back-channel logout): not brought back.
    if (!(await this.#store.update(req, reply, updated))) throw new GatewayError('unauthenticated', 'the session ended while it was being refreshed')
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

/**
 * The claims of a session after a refresh whose ID token carried `fresh`. OpenID Connect Core
 * 12.2: the refreshed ID token's `sub` must be the sign-in's (the client checks it too; a change
 * is refused here as well, since the session would otherwise become someone else's), and it need
 * not carry `sid`: the sign-in's `sid` is kept then, or a back-channel logout naming it (Back-Channel
 * Logout 1.0, 2.4) would find nothing to end.
 */
export function refreshedClaims(signedIn: SessionClaims, fresh: SessionClaims): SessionClaims {
  if (fresh.sub !== signedIn.sub) {
    throw new GatewayError('provider_unavailable', 'the refreshed ID token is about another subject than the sign-in (OpenID Connect Core 12.2)')
  }
  let claims = fresh
  if (fresh.sid === undefined && signedIn.sid !== undefined) claims = { ...claims, sid: signedIn.sid }
  // A refreshed ID token need not repeat acr, amr or auth_time (Core 12.2 lists only iss, sub,
  // aud, iat, azp as its musts): the sign-in's stand, since no one authenticated since.
  for (const name of AUTHENTICATION_CLAIMS) {
    if (fresh[name] === undefined && signedIn[name] !== undefined) claims = { ...claims, [name]: signedIn[name] }
  }
  return claims
}
