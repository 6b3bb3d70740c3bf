import { createHash } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import * as jose from 'jose'
import type { IntrospectionResponse } from 'openid-client'
import type { SessionClaims } from '../session/types.js'
import { describe } from './errors.js'
import { SingleFlight } from '../lib/single-flight.js'
import { TtlCache } from '../lib/ttl-cache.js'

// Bearer access tokens sent by API clients instead of a session cookie.
//
// - A JWT (RFC 9068 style) is verified against the provider's JWKS: signature with one of the
//   configured asymmetric algorithms, `iss` = the issuer, `aud` containing one of the audiences,
//   `exp` and `sub` present.
// - Any other token is, when enabled, introspected at the provider (RFC 7662), see
//   introspectionViolation for the rules.
//
// Verifying an RS256 signature costs about 100 µs, more than the whole proxy hop, and an
// introspection is a round trip to the provider, so results are cached: a verified token until
// it expires (an introspected one at most INTROSPECTION_TTL_MS, so that a revocation shows within
// a minute), a refused introspection for REFUSED_TTL_MS, so that a client repeating a junk token
// costs the provider one request per interval. Every cache is bounded and keyed by a SHA-256 of
// the token, so a flood of distinct tokens can neither grow memory nor keep tokens in it.

export { ASYMMETRIC_ALGORITHMS } from './algorithms.js'

export const CACHE_ENTRIES = 10_000
export const INTROSPECTION_TTL_MS = 60_000
export const REFUSED_TTL_MS = 10_000
/** Introspection requests under way at once; beyond it a token is refused, not queued. */
export const MAX_CONCURRENT_INTROSPECTIONS = 32
/** Provider failures during introspection are logged at most once per this interval. */
const FAILURE_LOG_INTERVAL_MS = 10_000

export interface BearerOptions {
  issuer: string
  audiences: string[]
  /** Accepted JWS algorithms of Bearer JWTs (asymmetric only; the configuration checks it). */
  algorithms: string[]
  clockToleranceSeconds: number
  /** The provider's key for a JWS header (ProviderKeys.getKey). */
  getKey: jose.JWTVerifyGetKey
  /**
   * RFC 7662 introspection, when provider.bearer.introspection is on. Resolves `undefined` when
   * the provider has no introspection endpoint; throws when the provider fails.
   */
  introspect?: (token: string) => Promise<IntrospectionResponse | undefined>
  log: Pick<FastifyBaseLogger, 'warn'>
  /** Entries per cache; tests lower it. */
  cacheEntries?: number
  /** Milliseconds since the epoch; tests replace it. */
  now?: () => number
}

export interface IntrospectionContext {
  issuer: string
  audiences: readonly string[]
  clockToleranceSeconds: number
  /** Milliseconds since the epoch. */
  now: number
}

const BEARER_TOKEN_TYPES = new Set(['bearer', 'access_token'])

function isStringArray(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((item) => typeof item === 'string')
}

/**
 * The first reason an active-looking introspection response does not sign the request in, or
 * `undefined` when it does. RFC 7662 2.2 leaves every member but `active` optional, so each rule
 * applies when its member is present, except that the token must name a subject (the identity
 * headers need one) and must be meant for this gateway:
 *
 * - `active` is true;
 * - `sub` is a non-empty string;
 * - `exp` (when present) is in the future and `nbf` (when present) in the past, with the clock
 *   tolerance; `iss` (when present) is provider.issuer;
 * - audience, like `aud` of a Bearer JWT: `aud` (when present) contains one of provider.audiences;
 *   without `aud`, `client_id` must be one of them (the token was issued to an accepted client,
 *   by default the gateway itself); a token with neither is refused;
 * - `token_type` (when present) is Bearer or access_token (a refresh token is not a Bearer
 *   token); `token_use` (when present, e.g. Ory Hydra) is access_token;
 * - no `cnf`: a sender-constrained token (DPoP, RFC 9449; mTLS, RFC 8705) is only valid with a
 *   proof of possession, which the gateway does not check, so it is never accepted as plain Bearer.
 */
export function introspectionViolation(response: IntrospectionResponse, ctx: IntrospectionContext): string | undefined {
  const now = ctx.now / 1000
  const tolerance = ctx.clockToleranceSeconds
  if (response.active !== true) return 'the token is not active'
  if (typeof response.sub !== 'string' || response.sub === '') return 'the response names no subject (sub)'
  if (response.exp !== undefined && !(typeof response.exp === 'number' && response.exp > now - tolerance)) return 'exp is in the past'
  if (response.nbf !== undefined && !(typeof response.nbf === 'number' && response.nbf <= now + tolerance)) return 'nbf is in the future'
  if (response.iss !== undefined && response.iss !== ctx.issuer) return 'iss is another issuer'
  const { aud } = response
  if (aud !== undefined) {
    const audiences = typeof aud === 'string' ? [aud] : isStringArray(aud) ? aud : []
    if (!audiences.some((value) => ctx.audiences.includes(value))) return 'aud names none of provider.audiences'
  } else if (typeof response.client_id !== 'string' || !ctx.audiences.includes(response.client_id)) {
    return 'without aud, client_id must be one of provider.audiences'
  }
  if (response.token_type !== undefined && !(typeof response.token_type === 'string' && BEARER_TOKEN_TYPES.has(response.token_type.toLowerCase()))) {
    return 'token_type is not Bearer'
  }
  if (response.token_use !== undefined && response.token_use !== 'access_token') return 'token_use is not access_token'
  if (response.cnf !== undefined) return 'the token is sender-constrained (cnf)'
  return undefined
}

/** Identity claims from an accepted introspection response: its members, `username` as preferred_username. */
export function introspectionClaims(response: IntrospectionResponse & { sub: string }): SessionClaims {
  const { active: _active, ...members } = response
  const claims: SessionClaims = { ...members, sub: response.sub }
  if (claims.preferred_username === undefined && typeof response.username === 'string') claims.preferred_username = response.username
  return claims
}

/** JWS compact serialization (RFC 7515 7.1) with a JSON header: verified, never introspected. */
function isJwt(token: string): boolean {
  if (token.split('.').length !== 3) return false
  try {
    jose.decodeProtectedHeader(token)
    return true
  } catch {
    return false
  }
}

function cacheKey(token: string): string {
  return createHash('sha256').update(token).digest('base64url')
}

export class BearerVerifier {
  readonly #options: BearerOptions
  readonly #now: () => number
  /** Verified and introspected tokens alike. */
  readonly #accepted: TtlCache<SessionClaims>
  readonly #refused: TtlCache<true>
  readonly #introspecting = new SingleFlight<SessionClaims | undefined>()
  #lastFailureLog = Number.NEGATIVE_INFINITY
  #unloggedFailures = 0

  constructor(options: BearerOptions) {
    this.#options = options
    this.#now = options.now ?? Date.now
    this.#accepted = new TtlCache(options.cacheEntries ?? CACHE_ENTRIES)
    this.#refused = new TtlCache(options.cacheEntries ?? CACHE_ENTRIES)
  }

  /** Entries of the caches: accepted tokens and refused introspections. */
  get cacheSizes(): { accepted: number; refused: number } {
    return { accepted: this.#accepted.size, refused: this.#refused.size }
  }

  /** The verified claims, or `undefined` for any token that does not sign the request in. */
  async verify(token: string): Promise<SessionClaims | undefined> {
    const now = this.#now()
    const key = cacheKey(token)
    const cached = this.#accepted.get(key, now)
    if (cached !== undefined) return cached
    if (isJwt(token)) return this.#verifyJwt(token, key, now)
    if (this.#options.introspect === undefined) return undefined
    if (this.#refused.get(key, now) !== undefined) return undefined
    // Concurrent requests with one token share one introspection.
    const introspect = this.#options.introspect
    if (!this.#introspecting.has(key) && this.#introspecting.size >= MAX_CONCURRENT_INTROSPECTIONS) {
      this.#failure({ message: `more than ${MAX_CONCURRENT_INTROSPECTIONS} introspections under way` })
      return undefined
    }
    return this.#introspecting.run(key, () => this.#introspect(introspect, token, key, now))
  }

  async #verifyJwt(token: string, key: string, now: number): Promise<SessionClaims | undefined> {
    const { issuer, audiences, algorithms, clockToleranceSeconds, getKey } = this.#options
    let payload: jose.JWTPayload
    try {
      ;({ payload } = await jose.jwtVerify(token, getKey, {
        issuer,
        audience: audiences,
        algorithms,
        clockTolerance: clockToleranceSeconds,
        requiredClaims: ['exp', 'sub'],
        currentDate: new Date(now),
      }))
    } catch {
      return undefined
    }
    // An ID token is signed by the same keys and its aud is this client, but it is proof of a
    // sign-in, not an access token, and the browser sees it (id_token_hint of the logout URL).
    // ID tokens carry a nonce whenever the request had one, and this gateway always sends one;
    // access tokens never do (RFC 9068 2.2 lists no nonce).
    if (payload.nonce !== undefined) return undefined
    const claims = payload as SessionClaims
    this.#accepted.set(key, claims, (payload.exp as number) * 1000, now)
    return claims
  }

  async #introspect(
    introspect: NonNullable<BearerOptions['introspect']>,
    token: string,
    key: string,
    now: number,
  ): Promise<SessionClaims | undefined> {
    let response: IntrospectionResponse | undefined
    try {
      response = await introspect(token)
    } catch (err) {
      // Not cached: a provider outage must not outlast itself for tokens that are valid.
      this.#failure(describe(err))
      return undefined
    }
    // No introspection endpoint: said once at discovery.
    if (response === undefined) return undefined
    const { issuer, audiences, clockToleranceSeconds } = this.#options
    if (introspectionViolation(response, { issuer, audiences, clockToleranceSeconds, now }) !== undefined) {
      this.#refused.set(key, true, now + REFUSED_TTL_MS, now)
      return undefined
    }
    const claims = introspectionClaims(response as IntrospectionResponse & { sub: string })
    const exp = typeof response.exp === 'number' ? response.exp * 1000 : Number.POSITIVE_INFINITY
    this.#accepted.set(key, claims, Math.min(exp, now + INTROSPECTION_TTL_MS), now)
    return claims
  }

  #failure(err: Record<string, unknown>): void {
    const now = this.#now()
    if (now - this.#lastFailureLog < FAILURE_LOG_INTERVAL_MS) {
      this.#unloggedFailures++
      return
    }
    this.#options.log.warn({ err, unlogged: this.#unloggedFailures }, 'Bearer token introspection failed; the request is not signed in')
    this.#lastFailureLog = now
    this.#unloggedFailures = 0
  }
}
