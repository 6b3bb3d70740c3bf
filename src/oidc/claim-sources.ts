import * as jose from 'jose'
import type { FastifyBaseLogger } from 'fastify'
import type { IDToken } from 'openid-client'
import { GatewayError } from '../contract/errors.js'
import type { SessionClaims } from '../contract/identity.js'
import type { Clock } from '../lib/clock.js'
import { ASYMMETRIC_ALGORITHMS } from '../options/algorithms.js'
import type { ClaimSourcesConfig, ProviderConfig } from '../options/types.js'
import type { OidcClient, Tokens } from './client.js'
import { describe } from './errors.js'
import { loggableUrl, MAX_PROVIDER_BODY_BYTES, readLimited } from './fetch.js'
import { GITLAB_PROJECT_PREFIX, type GitlabProject, gitlabProjectGroups, parseGitlabProject } from './gitlab-projects.js'
import { GoogleGroups, loadServiceAccount } from './google-groups.js'
import { graphGroups } from './graph-groups.js'
import { groupList } from './group-api.js'

// Claims from beyond the ID token, per provider (provider.claimSources), resolved at sign-in and
// at each refresh (routes/sign-in-flow.ts and session/refresh-grant.ts call resolve):
//
// - UserInfo (OpenID Connect Core 5.3). Its `sub` must equal the ID token's (Core 5.3.2: "if
//   [it does] not match, the UserInfo Response values MUST NOT be used"): openid-client checks it
//   and so does userInfoSubjectMismatch. Which source wins is mergedClaims's rule: the ID token's
//   verified claims stand for every claim the ID token defines (Core 2: iss, sub, aud, exp, iat,
//   auth_time, nonce, acr, amr, azp, and sid, at_hash...), UserInfo's answer wins for the others
//   (the profile, email, groups...), being what the provider says now.
// - Aggregated and distributed claims (Core 5.6.2). Only from the configuration's trustedIssuers
//   and trustedEndpoints: another source is logged and never fetched (no request goes where a
//   token says: no SSRF through a claim source). An aggregated JWT, and what a distributed
//   endpoint answers ("The endpoint URL MUST return the Claims as a JWT"), are verified against
//   their issuer's keys, found through that issuer's discovery (Discovery 1.0 4). A source never
//   sets a claim the ID token defines. At most MAX_CLAIM_SOURCES per token, each bounded in time
//   and size.
// - Entra ID's group overage (graph-groups.ts).
// - GitLab project membership as groups `project:<path>` (gitlab-projects.ts), added to `groups`.
// - Google Workspace groups from the Directory API (google-groups.ts): they are the `groups`.
//
// Fail closed: a source the configuration trusts that fails (unreachable, not a verified JWT, a
// UserInfo about another user) fails the sign-in or the refresh with 502 provider_unavailable;
// the session then keeps what it had, and nothing is merged from a source that could not be checked.

/** Claims only the ID token speaks for (OpenID Connect Core 2, 3.1.3.6, 3.3.2.11; Front- and Back-Channel Logout's sid). */
export const ID_TOKEN_CLAIMS: ReadonlySet<string> = new Set([
  'iss',
  'sub',
  'aud',
  'exp',
  'iat',
  'nbf',
  'jti',
  'auth_time',
  'nonce',
  'acr',
  'amr',
  'azp',
  'sid',
  'at_hash',
  'c_hash',
  's_hash',
])

/** Core 5.6.2's members, and Entra ID's overage flag: markers, never claims of a session. */
const MARKERS: ReadonlySet<string> = new Set(['_claim_names', '_claim_sources', 'hasgroups'])

/** Claim sources resolved per token (ID token or UserInfo); more are ignored and logged. */
export const MAX_CLAIM_SOURCES = 5
/** How long an issuer's keys (for aggregated and distributed claims) are kept. */
const ISSUER_KEYS_TTL_MS = 10 * 60 * 1000
/** An unknown `kid` fetches the issuer's keys again, at most this often (key rotation). */
const ISSUER_KEYS_REFETCH_MS = 60 * 1000

type Claims = Record<string, unknown>

/** A `_claim_sources` entry (Core 5.6.2) and the claims `_claim_names` maps to it. */
export type ClaimSource =
  | { name: string; claims: string[]; kind: 'aggregated'; jwt: string }
  | { name: string; claims: string[]; kind: 'distributed'; endpoint: string; accessToken: string | undefined }

/**
 * The session's claims from the ID token's `idToken` and UserInfo's `userInfo` (both already
 * resolved and about the same `sub`): UserInfo wins, except for the claims the ID token defines.
 */
export function mergedClaims(idToken: Claims, userInfo: Claims): Claims {
  const merged: Claims = { ...idToken }
  for (const [name, value] of Object.entries(userInfo)) {
    if (ID_TOKEN_CLAIMS.has(name) || MARKERS.has(name)) continue
    merged[name] = value
  }
  return merged
}

/** Core 5.3.2: a UserInfo answer about anyone but `subject` is not used. */
export function userInfoSubjectMismatch(subject: string, userInfo: Claims): boolean {
  return userInfo.sub !== subject
}

/** Entra ID's groups overage marker: `_claim_names.groups` (an ID token or access token) or `hasgroups` (implicit flow). */
export function hasGroupOverage(claims: Claims): boolean {
  const names = claims._claim_names
  return claims.hasgroups === true || (isRecord(names) && names.groups !== undefined)
}

/**
 * The sources `claims` names (Core 5.6.2), well-formed ones only: `_claim_names` maps a claim to
 * a source name, `_claim_sources` a name to `{ JWT }` or `{ endpoint, access_token? }`. A claim
 * mapped to a missing or malformed source is left out.
 */
export function claimSourcesOf(claims: Claims): ClaimSource[] {
  const names = claims._claim_names
  const sources = claims._claim_sources
  if (!isRecord(names) || !isRecord(sources)) return []
  const byName = new Map<string, string[]>()
  for (const [claim, source] of Object.entries(names)) {
    if (typeof source === 'string') byName.set(source, [...(byName.get(source) ?? []), claim])
  }
  const found: ClaimSource[] = []
  for (const [name, claimNames] of byName) {
    const source = Object.hasOwn(sources, name) ? sources[name] : undefined
    if (!isRecord(source)) continue
    if (typeof source.JWT === 'string') found.push({ name, claims: claimNames, kind: 'aggregated', jwt: source.JWT })
    else if (typeof source.endpoint === 'string') {
      const accessToken = typeof source.access_token === 'string' ? source.access_token : undefined
      found.push({ name, claims: claimNames, kind: 'distributed', endpoint: source.endpoint, accessToken })
    }
  }
  return found
}

/** Whether the configuration trusts a distributed endpoint: listed exactly as the token names it. */
export function trustedEndpoint(endpoint: string, trusted: readonly string[]): boolean {
  return trusted.includes(endpoint)
}

/** Whether `config` asks for anything: without, the provider has no ClaimSources and nothing more is done. */
export function claimSourcesWanted(config: ClaimSourcesConfig | undefined): config is ClaimSourcesConfig {
  return (
    config !== undefined &&
    (config.userInfo ||
      config.entraGroupOverage ||
      config.trustedIssuers.length > 0 ||
      config.trustedEndpoints.length > 0 ||
      config.gitlabProjects.length > 0 ||
      config.googleGroups !== undefined)
  )
}

interface IssuerKeys {
  keys: ReturnType<typeof jose.createLocalJWKSet>
  fetchedAt: number
}

/** One provider's claim sources (provider.claimSources). */
export class ClaimSources {
  readonly #config: ClaimSourcesConfig
  readonly #provider: ProviderConfig
  readonly #client: OidcClient
  readonly #log: FastifyBaseLogger
  readonly #clock: Clock
  /** By trusted issuer: at most one entry per `trustedIssuers` item. */
  readonly #issuerKeys = new Map<string, IssuerKeys>()
  readonly #gitlabProjects: GitlabProject[]
  readonly #googleGroups: GoogleGroups | undefined

  constructor(provider: ProviderConfig & { claimSources: ClaimSourcesConfig }, client: OidcClient, log: FastifyBaseLogger, clock: Clock) {
    this.#config = provider.claimSources
    this.#provider = provider
    this.#client = client
    this.#log = log
    this.#clock = clock
    // Validation has refused a malformed item (cross-key/group-sources.ts).
    this.#gitlabProjects = provider.claimSources.gitlabProjects.map(parseGitlabProject).filter((p): p is GitlabProject => typeof p !== 'string')
    const google = provider.claimSources.googleGroups
    this.#googleGroups = google === undefined ? undefined : new GoogleGroups(google, loadServiceAccount(google, process.env), provider.timeoutMs, clock)
  }

  /**
   * `tokens` with the session's claims resolved from every configured source. At a refresh
   * without an ID token, `previous` (the session's claims) gives the claims the ID token defines;
   * the others are then what the sources say now (a claim UserInfo no longer returns is gone).
   * Throws GatewayError `provider_unavailable` when a trusted source fails.
   */
  async resolve(tokens: Tokens, previous?: SessionClaims): Promise<Tokens> {
    const base = this.#base(tokens, previous)
    if (base === undefined || typeof base.sub !== 'string') return tokens
    let claims = await this.#resolveSources(base, tokens.accessToken)
    // Without an ID token the marker is not seen again: the groups are read anew, as at sign-in.
    let overage = hasGroupOverage(base) || tokens.claims === undefined
    if (this.#config.userInfo) {
      const userInfo = await this.#userInfo(tokens, base.sub)
      overage ||= hasGroupOverage(userInfo)
      claims = mergedClaims(claims, await this.#resolveSources(userInfo, tokens.accessToken))
    }
    if (this.#config.entraGroupOverage && overage) {
      claims.groups = await graphGroups(tokens.accessToken, { baseUrl: this.#config.graphBaseUrl, timeoutMs: this.#provider.timeoutMs })
    }
    if (this.#gitlabProjects.length > 0) {
      // The projects are read anew each time: the previous ones are dropped first (a GitLab group path never holds `:`).
      const groups = groupList(claims.groups).filter((group) => !group.startsWith(GITLAB_PROJECT_PREFIX))
      const baseUrl = this.#config.gitlabUrl ?? this.#provider.issuer
      claims.groups = [...groups, ...(await gitlabProjectGroups(tokens.accessToken, this.#gitlabProjects, { baseUrl, timeoutMs: this.#provider.timeoutMs }))]
    }
    if (this.#googleGroups !== undefined) {
      if (typeof claims.email !== 'string' || claims.email === '' || claims.email_verified === false) {
        throw new GatewayError(
          'provider_unavailable',
          "the user's Google groups could not be read: the session has no verified email (provider.scopes needs email)",
        )
      }
      claims.groups = await this.#googleGroups.groupsOf(claims.email)
    }
    for (const marker of MARKERS) delete claims[marker]
    // The lifecycle reads the session's claims by name (session/lifecycle.ts); these are its.
    return { ...tokens, claims: claims as IDToken }
  }

  /**
   * What the sources add to: the ID token's claims; at a refresh without one, the session's. A
   * source an ID token named is not named again then: with userInfo, UserInfo's answer is the
   * whole profile (the session keeps only the claims the ID token defines, so a claim UserInfo no
   * longer returns is gone, not kept stale); else the session's claims stand, and only the
   * groups of the overage, GitLab's projects and Google's Directory are read again. `undefined`: nothing to ask again.
   */
  #base(tokens: Tokens, previous: SessionClaims | undefined): Claims | undefined {
    if (tokens.claims !== undefined) return tokens.claims
    if (previous === undefined) return undefined
    if (this.#config.userInfo) return idTokenPart(previous)
    const groupsAgain = this.#config.entraGroupOverage || this.#gitlabProjects.length > 0 || this.#googleGroups !== undefined
    return groupsAgain ? { ...previous } : undefined
  }

  async #userInfo(tokens: Tokens, subject: string): Promise<Claims> {
    let answer: Claims | undefined
    try {
      answer = await this.#client.userInfo(tokens.accessToken, subject, tokens.dpopKey)
    } catch (err) {
      this.#log.warn({ call: 'userinfo', ...describe(err) }, 'UserInfo refused or failed: the sign-in or refresh fails')
      throw new GatewayError(
        'provider_unavailable',
        'the UserInfo endpoint failed, or answered about another user than the ID token (OpenID Connect Core 5.3.2)',
        {
          cause: err,
          logged: true,
        },
      )
    }
    if (answer === undefined) {
      throw new GatewayError('provider_unavailable', 'provider.claimSources.userInfo is on but the provider advertises no userinfo_endpoint')
    }
    // openid-client has checked it; checked here again, as the rule this module keeps.
    if (userInfoSubjectMismatch(subject, answer)) {
      throw new GatewayError('provider_unavailable', 'the UserInfo response is about another user than the ID token (OpenID Connect Core 5.3.2)')
    }
    return answer
  }

  /** `claims` with the claims of its trusted aggregated and distributed sources filled in. */
  async #resolveSources(claims: Claims, accessToken: string): Promise<Claims> {
    const resolved: Claims = { ...claims }
    const sources = claimSourcesOf(claims).filter((source) => !(this.#config.entraGroupOverage && source.claims.includes('groups')))
    if (sources.length === 0) return resolved
    if (sources.length > MAX_CLAIM_SOURCES) {
      this.#log.warn({ sources: sources.length, max: MAX_CLAIM_SOURCES }, 'claim sources past the limit are ignored')
    }
    for (const source of sources.slice(0, MAX_CLAIM_SOURCES)) {
      const payload = await this.#sourcePayload(source, accessToken)
      if (payload === undefined) continue
      for (const name of source.claims) {
        if (ID_TOKEN_CLAIMS.has(name) || MARKERS.has(name) || payload[name] === undefined) continue
        resolved[name] = payload[name]
      }
    }
    return resolved
  }

  /** The verified claims of `source`, or `undefined` for a source the configuration does not trust (logged, never fetched). */
  async #sourcePayload(source: ClaimSource, accessToken: string): Promise<Claims | undefined> {
    if (source.kind === 'distributed' && !trustedEndpoint(source.endpoint, this.#config.trustedEndpoints)) {
      this.#log.warn(
        { source: source.name, endpoint: loggableUrl(source.endpoint), claims: source.claims },
        'distributed claims from an untrusted endpoint ignored (not fetched)',
      )
      return undefined
    }
    const jwt = source.kind === 'aggregated' ? source.jwt : await this.#fetchDistributed(source.endpoint, source.accessToken ?? accessToken)
    const issuer = unverifiedIssuer(jwt)
    if (issuer === undefined || !this.#config.trustedIssuers.includes(issuer)) {
      this.#log.warn({ source: source.name, kind: source.kind, claims: source.claims }, 'claims from an untrusted issuer ignored')
      return undefined
    }
    try {
      return await this.#verify(jwt, issuer)
    } catch (err) {
      if (err instanceof GatewayError) throw err
      this.#log.warn({ source: source.name, kind: source.kind, ...describe(err) }, 'claim source JWT refused')
      throw new GatewayError('provider_unavailable', `the claims of source ${JSON.stringify(source.name)} could not be verified (OpenID Connect Core 5.6.2)`, {
        cause: err,
        logged: true,
      })
    }
  }

  async #verify(jwt: string, issuer: string): Promise<Claims> {
    const options = {
      issuer,
      algorithms: [...ASYMMETRIC_ALGORITHMS],
      clockTolerance: this.#provider.clockToleranceSeconds,
      currentDate: new Date(this.#clock.now()),
    }
    try {
      return (await jose.jwtVerify(jwt, await this.#keysOf(issuer), options)).payload
    } catch (err) {
      // A key rotated since the keys were read: read them once more, at most once a minute.
      const held = this.#issuerKeys.get(issuer)
      if (!(err instanceof jose.errors.JWKSNoMatchingKey) || held === undefined || this.#clock.now() - held.fetchedAt < ISSUER_KEYS_REFETCH_MS) throw err
      this.#issuerKeys.delete(issuer)
      return (await jose.jwtVerify(jwt, await this.#keysOf(issuer), options)).payload
    }
  }

  /** A trusted issuer's keys, through its discovery document (its `issuer` must be the one asked). */
  async #keysOf(issuer: string): Promise<IssuerKeys['keys']> {
    const held = this.#issuerKeys.get(issuer)
    if (held !== undefined && this.#clock.now() - held.fetchedAt < ISSUER_KEYS_TTL_MS) return held.keys
    const metadata = await this.#getJson(`${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`)
    if (metadata.issuer !== issuer || typeof metadata.jwks_uri !== 'string') {
      throw new GatewayError('provider_unavailable', "a trusted claims issuer's discovery document names another issuer or no jwks_uri")
    }
    const jwks = await this.#getJson(metadata.jwks_uri)
    if (!Array.isArray(jwks.keys)) throw new GatewayError('provider_unavailable', "a trusted claims issuer's JWKS has no keys")
    const keys = jose.createLocalJWKSet({ keys: jwks.keys as jose.JWK[] })
    this.#issuerKeys.set(issuer, { keys, fetchedAt: this.#clock.now() })
    return keys
  }

  async #getJson(url: string): Promise<Claims> {
    const text = await this.#get(url, { accept: 'application/json' }, /^application\/([a-z0-9.+-]+\+)?json\s*(;|$)/i)
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {
      parsed = undefined
    }
    if (!isRecord(parsed)) throw new GatewayError('provider_unavailable', `${loggableUrl(url)} answered malformed JSON`)
    return parsed
  }

  /** Core 5.6.2: the endpoint is an OAuth 2.0 resource, given the source's access token or else the session's (RFC 6750 2.1). */
  async #fetchDistributed(endpoint: string, accessToken: string): Promise<string> {
    return (await this.#get(endpoint, { accept: 'application/jwt', authorization: `Bearer ${accessToken}` }, /^application\/jwt\s*(;|$)/i)).trim()
  }

  /** A bounded GET (time, size, no redirect) whose 200 answer has a content type `type` matches. */
  async #get(url: string, headers: Record<string, string>, type: RegExp): Promise<string> {
    let res: Response
    let body: string
    try {
      res = await fetch(url, { headers, redirect: 'manual', signal: AbortSignal.timeout(this.#provider.timeoutMs) })
      body = await readLimited(res, MAX_PROVIDER_BODY_BYTES)
    } catch (err) {
      this.#log.warn({ url: loggableUrl(url), ...describe(err) }, 'claim source failed')
      throw new GatewayError('provider_unavailable', `a claim source (${loggableUrl(url)}) could not be read`, { cause: err, logged: true })
    }
    if (res.status !== 200 || !type.test(res.headers.get('content-type') ?? '')) {
      this.#log.warn({ url: loggableUrl(url), status: res.status, contentType: res.headers.get('content-type') }, 'claim source failed')
      throw new GatewayError(
        'provider_unavailable',
        `a claim source (${loggableUrl(url)}) answered HTTP ${res.status} ${res.headers.get('content-type') ?? ''}`,
        {
          logged: true,
        },
      )
    }
    return body
  }
}

/** The claims of `session` the ID token defines: what a refresh without an ID token keeps. */
function idTokenPart(claims: SessionClaims): Claims {
  return Object.fromEntries(Object.entries(claims).filter(([name]) => ID_TOKEN_CLAIMS.has(name)))
}

function unverifiedIssuer(jwt: string): string | undefined {
  try {
    const { iss } = jose.decodeJwt(jwt)
    return typeof iss === 'string' ? iss : undefined
  } catch {
    return undefined
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
