import { createHash } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import * as jose from 'jose'
import type { IntrospectionResponse } from 'openid-client'
import type { SessionClaims } from '../contract/identity.js'
import type { Clock } from '../lib/clock.js'
import { describe } from './errors.js'
import { SingleFlight } from '../lib/single-flight.js'
import { deepFreeze } from '../lib/deep-freeze.js'
import { TtlCache } from '../lib/ttl-cache.js'

// Bearer access tokens sent by API clients instead of a session cookie.
//
// - A JWT (RFC 9068 style) is verified against the provider's JWKS: signature with one of the
//   configured asymmetric algorithms, `iss` = the issuer, `aud` containing one of the audiences,
//   `exp` present, `sub` a non-empty string, and it must be an access token, not an ID token or
//   another JWT the provider signs with the same keys (see accessTokenViolation).
// - Any other token is, when enabled, introspected at the provider (RFC 7662), see
//   introspectionViolation for the rules.
//
// Verifying an RS256 signature costs about 100 µs, more than the whole proxy hop, and an
// introspection is a round trip to the provider, so results are cached: a verified token until
// it expires (an introspected one at most INTROSPECTION_TTL_MS, so that a revocation shows within
// a minute), a refused introspection for REFUSED_TTL_MS, so that a client repeating a junk token
// costs the provider one request per interval. Every cache is bounded. Accepted tokens are kept
// under the token itself: only the provider's own tokens get there, and a SHA-256 of the token
// on every request was a tenth of the Bearer row's cost beyond the bare proxy (the session cache
// keeps access tokens in memory all the same). What the client alone decides (refused
// introspections, introspections under way) is keyed by a SHA-256 of the token, so a flood of
// distinct junk tokens can neither grow memory beyond the bound nor keep such tokens in it.

export const CACHE_ENTRIES = 10_000
export const INTROSPECTION_TTL_MS = 60_000
export const REFUSED_TTL_MS = 10_000
/** Introspection requests under way at once; beyond it a token is refused, not queued. */
export const MAX_CONCURRENT_INTROSPECTIONS = 32
/** Provider failures during introspection are logged at most once per this interval. */
const FAILURE_LOG_INTERVAL_MS = 10_000

export interface BearerOptions {
  issuer: string
  /** The gateway's own client id: the `aud` of its ID tokens. */
  clientId: string
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
  log: Pick<FastifyBaseLogger, 'warn' | 'debug'>
  /** Entries per cache; tests lower it. */
  cacheEntries?: number
  /** What tokens' expiry and the caches are judged by. */
  clock: Clock
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
 * RFC 9449 section 7 (DPoP) and RFC 8705 section 3 (mTLS): a token with a `cnf` claim is bound to
 * a key, and a resource server must check the proof of possession of that key before accepting
 * it. The gateway checks no such proof (it accepts the Bearer scheme only, RFC 6750), so a bound
 * token is refused whichever way it was read, JWT or introspection: accepted without its proof it
 * would work for anyone who copied it, which is what binding it was meant to prevent.
 */
export function senderConstrainedViolation(claims: Readonly<Record<string, unknown>>): string | undefined {
  return claims.cnf === undefined ? undefined : 'the token is sender-constrained (cnf): it needs a proof of possession, which a Bearer token does not carry'
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
  return senderConstrainedViolation(response)
}

/** `typ` header values of access tokens (RFC 9068 2.1, and plain JWT), `application/` dropped. */
const ACCESS_TOKEN_TYPS = new Set(['at+jwt', 'jwt'])

/** Claims OpenID Connect Core defines for ID tokens only (3.1.3.6, 3.3.2.11, FAPI's s_hash). */
const ID_TOKEN_ONLY_CLAIMS = ['at_hash', 'c_hash', 's_hash'] as const

/**
 * Claims that only access tokens carry at the common providers: `scope` (RFC 9068 2.2.3, Auth0,
 * Keycloak), `client_id` (RFC 9068 2.2), `scp` and `cid` (Okta, Entra ID), `azpacr`/`appidacr`
 * (Entra ID v2/v1 access tokens, app-only ones included).
 */
const ACCESS_TOKEN_CLAIMS = ['scope', 'client_id', 'scp', 'cid', 'azpacr', 'appidacr'] as const

function lowerTyp(value: string): string {
  const typ = value.toLowerCase()
  return typ.startsWith('application/') ? typ.slice('application/'.length) : typ
}

/**
 * The first reason a verified JWT is not an access token, or `undefined` when it may be one. An
 * ID token is signed by the same keys and its `aud` is the gateway's client id, which is an
 * accepted audience by default; but it is proof of a sign-in, not a grant, and the browser sees
 * it (id_token_hint of the logout URL). Logout tokens (`typ: logout+jwt`) are the same case.
 *
 * - A `typ` header, when present, is `at+jwt` or `JWT` (RFC 9068 2.1; Entra ID, Keycloak and
 *   Okta send `JWT` on both kinds, so `JWT` alone proves nothing).
 * - Keycloak's `typ` claim, when present, is `Bearer` (its ID tokens say `ID`, refresh tokens
 *   `Refresh`/`Offline`, logout tokens `Logout`).
 * - No `at_hash`, `c_hash` or `s_hash`: they exist only in ID tokens.
 * - A token whose `aud` is the gateway's client id alone, or that carries a `nonce`, is shaped
 *   like an ID token at every provider (Keycloak, Entra ID, Auth0, Okta: ID token `aud` = the
 *   client id; Auth0 and Okta access tokens name an API instead). Such a token must show that it
 *   is an access token: `typ: at+jwt`, Keycloak's `typ: Bearer`, or one of ACCESS_TOKEN_CLAIMS.
 *   (Keycloak before 24 copied `nonce` into access tokens; its `typ: Bearer` vouches for them.)
 */
export function accessTokenViolation(header: jose.ProtectedHeaderParameters, payload: jose.JWTPayload, clientId: string): string | undefined {
  let rfc9068 = false
  if (header.typ !== undefined) {
    const typ = typeof header.typ === 'string' ? lowerTyp(header.typ) : ''
    if (!ACCESS_TOKEN_TYPS.has(typ)) return 'the typ header is not an access token type'
    rfc9068 = typ === 'at+jwt'
  }
  let keycloakBearer = false
  if (payload.typ !== undefined) {
    if (typeof payload.typ !== 'string' || payload.typ.toLowerCase() !== 'bearer') return 'the typ claim is not Bearer (a Keycloak ID, refresh or logout token)'
    keycloakBearer = true
  }
  for (const claim of ID_TOKEN_ONLY_CLAIMS) if (payload[claim] !== undefined) return `it carries ${claim}, an ID token claim`
  const { aud } = payload
  const clientAlone = aud === clientId || (Array.isArray(aud) && aud.length === 1 && aud[0] === clientId)
  if ((clientAlone || payload.nonce !== undefined) && !rfc9068 && !keycloakBearer && !ACCESS_TOKEN_CLAIMS.some((c) => payload[c] !== undefined)) {
    return 'it is shaped like an ID token (aud is the client id alone, or a nonce) and nothing marks it as an access token'
  }
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
  readonly #clock: Clock
  /** Verified and introspected tokens alike. */
  readonly #accepted: TtlCache<SessionClaims>
  readonly #refused: TtlCache<true>
  readonly #introspecting = new SingleFlight<SessionClaims | undefined>()
  #lastFailureLog = Number.NEGATIVE_INFINITY
  #unloggedFailures = 0

  constructor(options: BearerOptions) {
    this.#options = options
    this.#clock = options.clock
    this.#accepted = new TtlCache(options.cacheEntries ?? CACHE_ENTRIES, options.clock)
    this.#refused = new TtlCache(options.cacheEntries ?? CACHE_ENTRIES, options.clock)
  }

  /** Entries of the caches: accepted tokens and refused introspections. */
  get cacheSizes(): { accepted: number; refused: number } {
    return { accepted: this.#accepted.size, refused: this.#refused.size }
  }

  /** The verified claims, or `undefined` for any token that does not sign the request in. */
  async verify(token: string): Promise<SessionClaims | undefined> {
    const now = this.#clock.now()
    const cached = this.#accepted.get(token)
    if (cached !== undefined) return cached
    if (isJwt(token)) return this.#verifyJwt(token, now)
    if (this.#options.introspect === undefined) return undefined
    const key = cacheKey(token)
    if (this.#refused.get(key) !== undefined) return undefined
    // Concurrent requests with one token share one introspection.
    const introspect = this.#options.introspect
    if (!this.#introspecting.has(key) && this.#introspecting.size >= MAX_CONCURRENT_INTROSPECTIONS) {
      this.#failure({ err: { message: `more than ${MAX_CONCURRENT_INTROSPECTIONS} introspections under way` } })
      return undefined
    }
    return this.#introspecting.run(key, () => this.#introspect(introspect, token, key, now))
  }

  async #verifyJwt(token: string, now: number): Promise<SessionClaims | undefined> {
    const { issuer, audiences, algorithms, clockToleranceSeconds, getKey } = this.#options
    let payload: jose.JWTPayload
    let header: jose.ProtectedHeaderParameters
    try {
      ;({ payload, protectedHeader: header } = await jose.jwtVerify(token, getKey, {
        issuer,
        audience: audiences,
        algorithms,
        clockTolerance: clockToleranceSeconds,
        requiredClaims: ['exp', 'sub'],
        currentDate: new Date(now),
      }))
    } catch (err) {
      // jose's codes name the failed check (ERR_JWT_EXPIRED, ERR_JWS_SIGNATURE_VERIFICATION_FAILED…).
      this.#options.log.debug({ reason: err instanceof jose.errors.JOSEError ? err.code : 'malformed' }, 'Bearer JWT refused')
      return undefined
    }
    // The identity headers and the log name the subject: it must be one (jose checks presence only).
    const violation =
      typeof payload.sub !== 'string' || payload.sub === ''
        ? 'sub is not a non-empty string'
        : (accessTokenViolation(header, payload, this.#options.clientId) ?? senderConstrainedViolation(payload))
    if (violation !== undefined) {
      this.#options.log.debug({ reason: violation }, 'Bearer JWT refused')
      return undefined
    }
    // Frozen: every request with this token shares them (and so their identity headers).
    const claims = deepFreeze(payload as SessionClaims)
    this.#accepted.set(token, claims, (payload.exp as number) * 1000)
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
    const violation = introspectionViolation(response, { issuer, audiences, clockToleranceSeconds, now })
    if (violation !== undefined) {
      this.#options.log.debug({ reason: violation }, 'introspected Bearer token refused')
      this.#refused.set(key, true, now + REFUSED_TTL_MS)
      return undefined
    }
    const claims = deepFreeze(introspectionClaims(response as IntrospectionResponse & { sub: string }))
    const exp = typeof response.exp === 'number' ? response.exp * 1000 : Number.POSITIVE_INFINITY
    this.#accepted.set(token, claims, Math.min(exp, now + INTROSPECTION_TTL_MS))
    return claims
  }

  /** `described`: the failure's log fields (errors.ts describe). */
  #failure(described: Record<string, unknown>): void {
    const now = this.#clock.now()
    if (now - this.#lastFailureLog < FAILURE_LOG_INTERVAL_MS) {
      this.#unloggedFailures++
      return
    }
    this.#options.log.warn({ call: 'introspection', ...described, unlogged: this.#unloggedFailures }, 'Bearer token introspection failed; the request is not signed in')
    this.#lastFailureLog = now
    this.#unloggedFailures = 0
  }
}
