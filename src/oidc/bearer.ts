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
import { KeyedRateLimit } from '../lib/rate-limit.js'
import { GatewayError } from '../contract/errors.js'

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
//
// An upstream with `tokenAudience: resource` asks for its own audience instead of the
// provider's `audiences` (verify's `resource`): the token's audience must be exactly its resource
// identifier (RFC 8707 2; the MCP authorization specification, 2025-06-18 and 2025-11-25, "Token
// Audience Binding and Validation": a server accepts only tokens issued for it, and passes none
// through). What is accepted for one audience is not for another, so every cache entry and
// in-flight introspection is keyed by the audience it was judged for as well as the token (the
// provider's audiences: the token alone, as before; a resource: `resource token`, a space being
// outside RFC 6750's b64token): a token accepted at resource A is never a cache hit at B, nor at
// an upstream that takes the provider's audiences.
//
// A verified JWT is cached with the generation of the provider's keys that verified it
// (provider-keys.ts): once the provider publishes a different set, the token is verified again before it
// is used, so a token whose key was withdrawn stops working then, not at its `exp`.
//
// Introspection is a shared, slow resource that anonymous clients can spend (any string is a
// token to ask about). A refused token must never turn a valid one away (RFC 6750 3.1 keeps
// invalid_token for tokens that are invalid), so when the provider is saturated the answer is
// 503 with Retry-After, never a 401; and one client address may have at most a quarter of the
// slots under way, and start introspections only within its own budget (429 beyond it), so one
// client cannot saturate them. Refused tokens are cached (REFUSED_TTL_MS) and cost nothing more.

export const CACHE_ENTRIES = 10_000
export const INTROSPECTION_TTL_MS = 60_000
export const REFUSED_TTL_MS = 10_000
/** Introspection requests under way at once; beyond it 503 with Retry-After, never a 401. */
export const MAX_CONCURRENT_INTROSPECTIONS = 32
/** Introspections one client address may have under way at once: a quarter of the slots. */
export const MAX_CONCURRENT_INTROSPECTIONS_PER_CLIENT = 8
/**
 * What one client address may start (tokens already cached or under way cost nothing): 60 at
 * once, then 10 a second. An accepted token is cached for up to a minute, so this is 600 distinct
 * new tokens a minute from one address; a junk flood costs the provider at most this much.
 */
export const CLIENT_INTROSPECTION_BUDGET = { burst: 60, perSecond: 10 } as const
/** Client addresses whose budget is remembered; the least recently seen are forgotten. */
const TRACKED_CLIENTS = 10_000
/** Retry-After of a saturated provider: slots free as fast as the provider answers. */
const SATURATED_RETRY_AFTER_SECONDS = 1
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
   * The generation of the provider's keys (ProviderKeys.generation): a cached JWT verified with
   * another generation is verified again. Without it, a verified JWT is cached until `exp`.
   */
  keyGeneration?: () => number
  /** Only JWTs with the `typ` header `at+jwt` (RFC 9068 2.1) are access tokens (provider.bearer.requireAtJwt). */
  requireAtJwt?: boolean
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
export function introspectionViolation(response: IntrospectionResponse, ctx: IntrospectionContext & { resource?: string }): string | undefined {
  const now = ctx.now / 1000
  const tolerance = ctx.clockToleranceSeconds
  if (response.active !== true) return 'the token is not active'
  if (typeof response.sub !== 'string' || response.sub === '') return 'the response names no subject (sub)'
  if (response.exp !== undefined && !(typeof response.exp === 'number' && response.exp > now - tolerance)) return 'exp is in the past'
  if (response.nbf !== undefined && !(typeof response.nbf === 'number' && response.nbf <= now + tolerance)) return 'nbf is in the future'
  const iat = issuedInTheFutureViolation(response.iat, ctx.now, tolerance)
  if (iat !== undefined) return iat
  if (response.iss !== undefined && response.iss !== ctx.issuer) return 'iss is another issuer'
  const { aud } = response
  if (aud !== undefined) {
    const audiences = typeof aud === 'string' ? [aud] : isStringArray(aud) ? aud : []
    if (!audiences.some((value) => ctx.audiences.includes(value))) return 'aud names none of provider.audiences'
  } else if (typeof response.client_id !== 'string' || !ctx.audiences.includes(response.client_id)) {
    return 'without aud, client_id must be one of provider.audiences'
  }
  if (ctx.resource !== undefined) {
    const resource = resourceAudienceViolation(aud, ctx.resource)
    if (resource !== undefined) return resource
  }
  if (response.token_type !== undefined && !(typeof response.token_type === 'string' && BEARER_TOKEN_TYPES.has(response.token_type.toLowerCase()))) {
    return 'token_type is not Bearer'
  }
  if (response.token_use !== undefined && response.token_use !== 'access_token') return 'token_use is not access_token'
  return senderConstrainedViolation(response)
}

/**
 * RFC 8707 2 and the MCP authorization specification (2025-06-18 and 2025-11-25, "Token Audience
 * Binding and Validation"): at an upstream with `tokenAudience: resource` the token's audience is
 * exactly its resource identifier, a string or a list of that one string. A token that names other
 * audiences too is refused: each of them could replay it here (RFC 8707 1, RFC 9700 2.3 audience
 * restriction), and a token without `aud` is bound to nothing (an introspected one whose
 * `client_id` alone vouches for it included).
 */
export function resourceAudienceViolation(aud: unknown, resource: string): string | undefined {
  if (sameResource(aud, resource)) return undefined
  if (Array.isArray(aud) && aud.length === 1 && sameResource(aud[0], resource)) return undefined
  return aud === undefined
    ? 'the token names no audience (aud); this upstream takes only tokens for its resource'
    : "aud is not exactly this upstream's resource identifier"
}

/**
 * The same resource identifier: equal, or equal once their scheme and host are lowercased (the
 * MCP authorization specification, "Canonical Server URI": the canonical form is lowercase, and
 * servers SHOULD accept uppercase scheme and host components). The path and the rest are
 * compared exactly: `/mcp` and `/mcp/` are different resources.
 */
function sameResource(aud: unknown, resource: string): boolean {
  if (aud === resource) return true
  return typeof aud === 'string' && lowerOrigin(aud) === lowerOrigin(resource)
}

/** `uri` with the part before its path (scheme, authority) lowercased. */
function lowerOrigin(uri: string): string {
  const authority = uri.indexOf('://')
  if (authority === -1) return uri
  const rest = uri.slice(authority + 3).search(/[/?#]/)
  const end = rest === -1 ? uri.length : authority + 3 + rest
  return uri.slice(0, end).toLowerCase() + uri.slice(end)
}

/**
 * An `iat` later than now (beyond the clock tolerance) is refused: no token is issued in the
 * future, and the revocation list judges a token by its `iat` (issued after a logout passes), so a
 * future `iat` would also outlast every logout. RFC 7519 4.1.6 makes `iat` a number; jose checks
 * its type, and its future only with maxTokenAge, which the gateway does not set.
 */
export function issuedInTheFutureViolation(iat: unknown, nowMs: number, toleranceSeconds: number): string | undefined {
  if (iat === undefined) return undefined
  if (typeof iat !== 'number' || !Number.isFinite(iat)) return 'iat is not a number'
  return iat > nowMs / 1000 + toleranceSeconds ? 'iat is in the future' : undefined
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
 * - A token whose `aud` names the gateway's client id (alone or among others: OpenID Connect
 *   Core 2 lets an ID token name other audiences too), or that carries a `nonce`, is shaped like
 *   an ID token at every provider (Keycloak, Entra ID, Auth0, Okta: ID token `aud` = the client
 *   id; Auth0 and Okta access tokens name an API instead). Such a token must show that it is an
 *   access token: `typ: at+jwt`, Keycloak's `typ: Bearer`, or one of ACCESS_TOKEN_CLAIMS. This is
 *   RFC 8725 3.11 (explicit typing) and 3.12 (the tokens of one issuer differ by audience), kept
 *   lenient on `typ` because those providers send `JWT` on both kinds; RFC 9068 4 asks resource
 *   servers for `at+jwt`, which `requireAtJwt` enforces where the provider sends it.
 *   (Keycloak before 24 copied `nonce` into access tokens; its `typ: Bearer` vouches for them.)
 */
export function accessTokenViolation(
  header: jose.ProtectedHeaderParameters,
  payload: jose.JWTPayload,
  clientId: string,
  options: { requireAtJwt?: boolean } = {},
): string | undefined {
  let rfc9068 = false
  if (header.typ !== undefined) {
    const typ = typeof header.typ === 'string' ? lowerTyp(header.typ) : ''
    if (!ACCESS_TOKEN_TYPS.has(typ)) return 'the typ header is not an access token type'
    rfc9068 = typ === 'at+jwt'
  }
  if (options.requireAtJwt === true && !rfc9068) return 'the typ header is not at+jwt (provider.bearer.requireAtJwt)'
  let keycloakBearer = false
  if (payload.typ !== undefined) {
    if (typeof payload.typ !== 'string' || payload.typ.toLowerCase() !== 'bearer') return 'the typ claim is not Bearer (a Keycloak ID, refresh or logout token)'
    keycloakBearer = true
  }
  for (const claim of ID_TOKEN_ONLY_CLAIMS) if (payload[claim] !== undefined) return `it carries ${claim}, an ID token claim`
  const { aud } = payload
  const namesClient = aud === clientId || (Array.isArray(aud) && aud.includes(clientId))
  if ((namesClient || payload.nonce !== undefined) && !rfc9068 && !keycloakBearer && !ACCESS_TOKEN_CLAIMS.some((c) => payload[c] !== undefined)) {
    return 'it is shaped like an ID token (aud names the client id, or a nonce) and nothing marks it as an access token'
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

/** A cached accepted token: its claims, and for a JWT the key generation that verified it. */
interface Accepted {
  claims: SessionClaims
  generation?: number
}

/** 503: the provider has as many introspections under way as the gateway allows. */
function introspectionSaturated(): GatewayError {
  const retryAfter = String(SATURATED_RETRY_AFTER_SECONDS)
  return new GatewayError('decision_unavailable', `the provider is busy with Bearer token introspections; retry in ${retryAfter} s`, {
    headers: { 'retry-after': retryAfter },
    extensions: { cause: 'introspection_busy' },
    logged: true,
  })
}

/** 429: this client address has spent its introspection budget. */
function introspectionBudgetSpent(retryAfterSeconds: number): GatewayError {
  const retryAfter = String(retryAfterSeconds)
  return new GatewayError('rate_limited', `too many new Bearer tokens from this address; retry in ${retryAfter} s`, {
    headers: { 'retry-after': retryAfter },
  })
}

export class BearerVerifier {
  readonly #options: BearerOptions
  readonly #clock: Clock
  /** Verified and introspected tokens alike. */
  readonly #accepted: TtlCache<Accepted>
  readonly #refused: TtlCache<true>
  readonly #introspecting = new SingleFlight<SessionClaims | undefined>()
  /** Introspections under way per client address; an address leaves it at zero (at most MAX_CONCURRENT_INTROSPECTIONS keys). */
  readonly #underWay = new Map<string, number>()
  readonly #budget: KeyedRateLimit
  #lastFailureLog = Number.NEGATIVE_INFINITY
  #unloggedFailures = 0

  constructor(options: BearerOptions) {
    this.#options = options
    this.#clock = options.clock
    this.#accepted = new TtlCache(options.cacheEntries ?? CACHE_ENTRIES, options.clock)
    this.#refused = new TtlCache(options.cacheEntries ?? CACHE_ENTRIES, options.clock)
    this.#budget = new KeyedRateLimit({ ...CLIENT_INTROSPECTION_BUDGET, clock: options.clock, maxKeys: TRACKED_CLIENTS })
  }

  /** Entries of the caches: accepted tokens and refused introspections. */
  get cacheSizes(): { accepted: number; refused: number } {
    return { accepted: this.#accepted.size, refused: this.#refused.size }
  }

  /**
   * The verified claims, or `undefined` for any token that does not sign the request in.
   * `client`: the client's address as the sign-in rate limit counts it (authenticate.ts), for
   * the per-client introspection budget; without it only the global bound applies. Throws a
   * GatewayError (503 decision_unavailable, 429 rate_limited, both with Retry-After) when an
   * introspection cannot be made now: the token may be valid, so it is not refused.
   * `resource`: the audience the token must name exactly (resourceAudienceViolation), instead of
   * one of provider.audiences: an upstream's resource identifier (`tokenAudience: resource`).
   */
  async verify(token: string, client?: string, resource?: string): Promise<SessionClaims | undefined> {
    const now = this.#clock.now()
    // What the token was judged for, with it: the token alone for the provider's audiences.
    const entry = resource === undefined ? token : `${resource} ${token}`
    const cached = this.#accepted.get(entry)
    if (cached !== undefined) {
      if (cached.generation === undefined || cached.generation === this.#options.keyGeneration?.()) return cached.claims
      // Verified with keys the provider has replaced since: verified again with the current ones.
      this.#accepted.delete(entry)
    }
    if (isJwt(token)) return this.#verifyJwt(token, entry, resource, now)
    if (this.#options.introspect === undefined) return undefined
    const key = cacheKey(entry)
    if (this.#refused.get(key) !== undefined) return undefined
    // Concurrent requests with one token share one introspection, at no cost to anyone's budget.
    const introspect = this.#options.introspect
    if (this.#introspecting.has(key)) return this.#introspecting.run(key, () => this.#introspect(introspect, token, entry, resource, key, now))
    if (client !== undefined && (this.#underWay.get(client) ?? 0) >= MAX_CONCURRENT_INTROSPECTIONS_PER_CLIENT) {
      throw introspectionBudgetSpent(SATURATED_RETRY_AFTER_SECONDS)
    }
    if (this.#introspecting.size >= MAX_CONCURRENT_INTROSPECTIONS) {
      this.#failure({ err: { message: `more than ${MAX_CONCURRENT_INTROSPECTIONS} introspections under way` } })
      throw introspectionSaturated()
    }
    if (client === undefined) return this.#introspecting.run(key, () => this.#introspect(introspect, token, entry, resource, key, now))
    const wait = this.#budget.take(client)
    if (wait !== undefined) throw introspectionBudgetSpent(wait)
    this.#underWay.set(client, (this.#underWay.get(client) ?? 0) + 1)
    try {
      return await this.#introspecting.run(key, () => this.#introspect(introspect, token, entry, resource, key, now))
    } finally {
      const left = (this.#underWay.get(client) ?? 1) - 1
      if (left <= 0) this.#underWay.delete(client)
      else this.#underWay.set(client, left)
    }
  }

  /** `entry`: the accepted cache's key (verify); `resource`: the audience asked instead of the provider's. */
  async #verifyJwt(token: string, entry: string, resource: string | undefined, now: number): Promise<SessionClaims | undefined> {
    const { issuer, audiences, algorithms, clockToleranceSeconds, getKey, keyGeneration } = this.#options
    // Read before the key lookup: a refresh during it makes the entry older, never newer, than its key.
    const generation = keyGeneration?.()
    let payload: jose.JWTPayload
    let header: jose.ProtectedHeaderParameters
    try {
      ;({ payload, protectedHeader: header } = await jose.jwtVerify(token, getKey, {
        issuer,
        audience: resource ?? audiences,
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
        : (issuedInTheFutureViolation(payload.iat, now, clockToleranceSeconds) ??
          accessTokenViolation(header, payload, this.#options.clientId, { requireAtJwt: this.#options.requireAtJwt === true }) ??
          senderConstrainedViolation(payload) ??
          (resource === undefined ? undefined : resourceAudienceViolation(payload.aud, resource)))
    if (violation !== undefined) {
      this.#options.log.debug({ reason: violation }, 'Bearer JWT refused')
      return undefined
    }
    // Frozen: every request with this token shares them (and so their identity headers).
    const claims = deepFreeze(payload as SessionClaims)
    this.#accepted.set(entry, generation === undefined ? { claims } : { claims, generation }, (payload.exp as number) * 1000)
    return claims
  }

  async #introspect(
    introspect: NonNullable<BearerOptions['introspect']>,
    token: string,
    entry: string,
    resource: string | undefined,
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
    // A resource's own audience replaces the provider's (verify).
    const violation = introspectionViolation(
      response,
      resource === undefined ? { issuer, audiences, clockToleranceSeconds, now } : { issuer, audiences: [resource], clockToleranceSeconds, now, resource },
    )
    if (violation !== undefined) {
      this.#options.log.debug({ reason: violation }, 'introspected Bearer token refused')
      this.#refused.set(key, true, now + REFUSED_TTL_MS)
      return undefined
    }
    const claims = deepFreeze(introspectionClaims(response as IntrospectionResponse & { sub: string }))
    const exp = typeof response.exp === 'number' ? response.exp * 1000 : Number.POSITIVE_INFINITY
    this.#accepted.set(entry, { claims }, Math.min(exp, now + INTROSPECTION_TTL_MS))
    return claims
  }

  /** `described`: the failure's log fields (errors.ts describe). */
  #failure(described: Record<string, unknown>): void {
    const now = this.#clock.now()
    if (now - this.#lastFailureLog < FAILURE_LOG_INTERVAL_MS) {
      this.#unloggedFailures++
      return
    }
    this.#options.log.warn(
      { call: 'introspection', ...described, unlogged: this.#unloggedFailures },
      'Bearer token introspection failed; the request is not signed in',
    )
    this.#lastFailureLog = now
    this.#unloggedFailures = 0
  }
}
