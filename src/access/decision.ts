import type { IncomingHttpHeaders } from 'node:http'
import type { BaseLogger } from 'pino'
import type { UpstreamConfig } from '../options/types.js'
import { GatewayError } from '../contract/errors.js'
import { refreshPath, signInPath } from '../contract/endpoints.js'
import { userClaimVerdict, type AllowPolicy, type AllowRefusal, type AllowResult } from './allow.js'
import { createPathPolicies, type PathPolicies, type PathPolicy } from './rules.js'
import type { Identity } from '../contract/identity.js'
import {
  bearerTokenOf,
  type AuthenticationResult,
  type AuthRequest,
  type Authentication,
  type ResourceAudience,
  type UpstreamAuthentication,
} from './authenticate.js'
import { resourceAudience } from './resource-metadata.js'
import type { SessionReply } from '../session/types.js'
import { createPublicPathMatcher, type PublicPathMatcher } from './public-paths.js'
import { bearerChallenge, type BearerChallengeParams } from '../contract/bearer-challenge.js'
import { stepUpShortfall, type StepUpRequirement, type StepUpShortfall } from '../oidc/step-up.js'

// The access decision of one upstream: whether a request is signed in, may pass, and with which
// identity. The one decision core: the proxy's guard (proxy/guard.ts), the check endpoints'
// Checker (checker.ts) and the open-WebSocket verdict ask it; answer.ts turns its verdict into
// the one answer each exit writes out. It reads no Fastify request, so a gRPC check decides
// exactly as an HTTP request does. It opens the session cookie once and calls the provider only
// to refresh.
//
// This file owns the decision (`AccessDecisions`, one per configuration, holding each
// upstream's `UpstreamAccess`; nothing outside src/access/ builds one), its verdict (`Verdict`),
// the problems answer.ts renders: the 401 of RFC 6750 3.1, the step-up 401 of RFC 9470 3, the
// 403 of the `allow` rules, where a browser signs in, and their log lines.

/** Where a browser signs in: the public origin, and the redirect endpoint's rule for coming back. */
export interface SignInOrigin {
  publicUrl: string
  /** routes/redirect-after.ts's rule: a redirectAfter value as the redirect endpoint would accept it, or null. */
  validateRedirectAfter: (value: string) => string | null
}

/**
 * What a step-up rule's `auth_time` is judged by: the gateway's clock, in epoch seconds, and the
 * clock skew allowed for each provider (its clockToleranceSeconds, as at the callback).
 */
export interface StepUpJudge {
  nowSeconds(): number
  toleranceSeconds(provider: string): number
}

/** Without a judge: the system clock and no tolerance. */
const SYSTEM_JUDGE: StepUpJudge = { nowSeconds: () => Math.floor(Date.now() / 1000), toleranceSeconds: () => 0 }

/** The request an access decision is about, as the caller has established it. */
export interface AccessRequest {
  /** The normalized path (normalizePath), without the query. */
  path: string
  /**
   * The request's method (the checked request's, for a check), which `publicPaths` and `rules`
   * entries may name. Every exit passes it; absent, only the entries for every method apply.
   */
  method?: string
  /** A CORS preflight (isPreflight). */
  preflight: boolean
  /** The host the client asked (Host, or a check's forwarded host): an upstream's resource identifier may be on it. */
  host?: string
}

/**
 * `pass` with the identity to assert (null: anonymous, no identity headers; `until`: epoch ms at
 * which a step-up rule's max age stops passing it); `unauthenticated`
 * when a sign-in is needed (`expired`: there was one, but its access token could not be renewed
 * here; `refreshable`: the refresh endpoint can renew it); `forbidden` when signed in but refused
 * by the `allow` rules; `step_up` when admitted by them but not authenticated as their `acr` or
 * `maxAuthAgeSeconds` ask (`bearer`: the identity is the request's Bearer token, which a sign-in
 * cannot upgrade).
 */
export type AccessDecision =
  | { outcome: 'pass'; identity: Identity | null; until?: number }
  | { outcome: 'step_up'; identity: Identity; requirement: StepUpRequirement; shortfall: StepUpShortfall; bearer: boolean; rulePath?: string }
  | { outcome: 'unauthenticated'; expired: boolean; refreshable: boolean }
  | { outcome: 'forbidden'; identity: Identity; refusal: AllowRefusal; rulePath?: string }

/**
 * The decision about a request on one upstream, as every exit answers it (answer.ts): the
 * decision's outcome with the upstream it was taken for. `forbidden` names who was refused when
 * established (the request line's `sub`; a check refuses the gateway's own paths even to nobody).
 */
export type Verdict =
  | { outcome: 'pass'; upstream: UpstreamConfig; identity: Identity | null }
  | { outcome: 'unauthenticated'; upstream: UpstreamConfig; expired: boolean; refreshable: boolean }
  | { outcome: 'forbidden'; upstream: UpstreamConfig; identity: Identity | null; rulePath?: string }
  | { outcome: 'step_up'; upstream: UpstreamConfig; identity: Identity; requirement: StepUpRequirement; bearer: boolean }

/**
 * The verdict of `decision` on `upstream`, its refusals logged (logForbidden, logStepUp, with
 * `fields` in the line): once per decision taken, never for a cached one.
 */
export function verdictOf(upstream: UpstreamConfig, decision: AccessDecision, req: Pick<DecisionRequest, 'log'>, fields?: Record<string, unknown>): Verdict {
  switch (decision.outcome) {
    case 'pass':
      return { outcome: 'pass', upstream, identity: decision.identity }
    case 'unauthenticated':
      return { outcome: 'unauthenticated', upstream, expired: decision.expired, refreshable: decision.refreshable }
    case 'forbidden':
      logForbidden(req, upstream, decision, fields)
      return decision.rulePath === undefined
        ? { outcome: 'forbidden', upstream, identity: decision.identity }
        : { outcome: 'forbidden', upstream, identity: decision.identity, rulePath: decision.rulePath }
    case 'step_up':
      logStepUp(req, upstream, decision, fields)
      return { outcome: 'step_up', upstream, identity: decision.identity, requirement: decision.requirement, bearer: decision.bearer }
  }
}

/**
 * A CORS preflight, as the Fetch standard defines one (3.2.2 HTTP requests: "A CORS request is an
 * HTTP request that includes an `Origin` header"; "A CORS-preflight request is a CORS request that
 * checks to see if the CORS protocol is understood. It uses `OPTIONS` as method and includes the
 * following header: `Access-Control-Request-Method`"): OPTIONS with a non-empty `Origin` and a
 * non-empty Access-Control-Request-Method. A browser always sends both (4.8 CORS-preflight fetch
 * sets the method header from the request's method, never empty); an OPTIONS without them is an
 * ordinary request, decided as one, so `allowPreflight` cannot be stretched to every OPTIONS (what
 * oauth2-proxy's `--skip-auth-preflight` passes). The check endpoints pass the original request's
 * method and the client's headers (Envoy only those its `allowed_headers` names).
 */
export function isPreflight(method: string, headers: IncomingHttpHeaders): boolean {
  return method === 'OPTIONS' && nonEmpty(headers.origin) && nonEmpty(headers['access-control-request-method'])
}

function nonEmpty(value: string | string[] | undefined): boolean {
  return typeof value === 'string' ? value.trim() !== '' : value !== undefined && value.some((v) => v.trim() !== '')
}

/** What a decision reads of a request (AuthRequest), and where it logs. */
export interface DecisionRequest extends AuthRequest {
  readonly log: Pick<BaseLogger, 'info' | 'warn'>
}

const ANONYMOUS: AccessDecision = { outcome: 'pass', identity: null }

/**
 * Claims already warned about, per upstream (its configuration object, which the guard and
 * forward-auth share): once each.
 */
const missingClaimsWarned = new WeakMap<UpstreamConfig, Set<string>>()

/**
 * The log line of a 403 by the `allow` rules: who (`sub`), where (`upstream`), which rule and why
 * (never a claim value). A claim the identity lacks is also a configuration problem (the scope or
 * mapper that adds it is missing), said once per upstream and claim as a warning.
 */
export function logForbidden(
  req: Pick<DecisionRequest, 'log'>,
  upstream: UpstreamConfig,
  decision: Extract<AccessDecision, { outcome: 'forbidden' }>,
  fields: Record<string, unknown> = {},
): void {
  const { refusal } = decision
  const at = decision.rulePath === undefined ? {} : { path: decision.rulePath }
  req.log.info(
    { sub: decision.identity.claims.sub, upstream: upstream.name, ...at, rule: refusal.rule, reason: refusal.reason, ...fields },
    'access refused by the allow rules',
  )
  if (refusal.missingClaim === undefined) return
  let warned = missingClaimsWarned.get(upstream)
  if (warned === undefined) missingClaimsWarned.set(upstream, (warned = new Set()))
  if (warned.has(refusal.missingClaim)) return
  warned.add(refusal.missingClaim)
  req.log.warn(
    { upstream: upstream.name, rule: refusal.rule, claim: refusal.missingClaim },
    `an allow rule needs the \`${refusal.missingClaim}\` claim and a session does not carry it: request the scope or mapper that adds it`,
  )
}

/**
 * The access decisions of one configuration: each upstream's UpstreamAccess, built once from the
 * configuration's one Authentication and handed to the proxy guard, the Checker and the
 * WebSocket verdict, which only ask it.
 */
export class AccessDecisions {
  readonly #byUpstream: ReadonlyMap<UpstreamConfig, UpstreamAccess>

  /**
   * `authentication`: the gateway's (authenticate.ts); `judge`: what step-up rules' max age is
   * judged by; `publicUrl`: server.publicUrl, which the resource identifiers of upstreams with
   * `tokenAudience: resource` are on (such an upstream without it is refused, never let through).
   */
  constructor(
    upstreams: readonly UpstreamConfig[],
    authentication: Pick<Authentication, 'forProviders'>,
    judge: StepUpJudge = SYSTEM_JUDGE,
    publicUrl?: string,
  ) {
    this.#byUpstream = new Map(
      upstreams.map((upstream) => [
        upstream,
        new UpstreamAccess(upstream, authentication.forProviders(upstream.providers, audienceOf(upstream, publicUrl), upstream.forwardIdToken), judge),
      ]),
    )
  }

  /** The access decision of `upstream`, one of this configuration's upstreams. */
  of(upstream: UpstreamConfig): UpstreamAccess {
    const access = this.#byUpstream.get(upstream)
    if (access === undefined) throw new Error(`the upstream ${upstream.name} is not one of this configuration's`)
    return access
  }
}

/**
 * Whether a browser without a sign-in is sent to sign in here: not where `tokenAudience: resource`
 * signs in no session (authenticate.ts), since the sign-in would come back to the same 401 for
 * ever. The guard and every check dialect ask here before they redirect a page load.
 */
export function offersSignIn(upstream: Pick<UpstreamConfig, 'tokenAudience'>): boolean {
  return upstream.tokenAudience !== 'resource'
}

/** The resource audience of an upstream with `tokenAudience: resource` (resource-metadata.ts), worked out once. */
function audienceOf(upstream: UpstreamConfig, publicUrl: string | undefined): ResourceAudience | undefined {
  if (upstream.tokenAudience !== 'resource') return undefined
  if (publicUrl === undefined)
    throw new Error(`the upstream ${upstream.name} has tokenAudience: resource, whose audience is on server.publicUrl, and none was given`)
  return resourceAudience(upstream, publicUrl)
}

/**
 * The access rules of one upstream, in order: `auth: none` and public paths pass without reading
 * any session; a preflight passes when the upstream allows preflights; otherwise the caller must
 * be signed in (session or Bearer of a provider it accepts, see authenticate.ts) unless `auth: optional`
 * on a path whose `allow` names nothing (optionalSignIn), and then pass the
 * `allow` rules: those of the most specific of the upstream's `rules` covering the path, else the
 * upstream's own (rules.ts).
 */
export class UpstreamAccess {
  readonly #upstream: UpstreamConfig
  readonly #authentication: Pick<UpstreamAuthentication, 'authenticate'>
  readonly #judge: StepUpJudge
  readonly #isPublic: PublicPathMatcher
  readonly #policyFor: PathPolicies

  /** `authentication`: the upstream's (Authentication.forProviders of its providers). */
  constructor(upstream: UpstreamConfig, authentication: Pick<UpstreamAuthentication, 'authenticate'>, judge: StepUpJudge = SYSTEM_JUDGE) {
    this.#upstream = upstream
    this.#authentication = authentication
    this.#judge = judge
    this.#isPublic = createPublicPathMatcher(upstream.publicPaths)
    this.#policyFor = createPathPolicies(upstream)
  }

  /** The decision on `request`, authenticating `req` when the path needs it (a refresh may set cookies on `reply`). */
  async decide(req: DecisionRequest, reply: SessionReply, request: AccessRequest): Promise<AccessDecision> {
    if (this.#passesUnread(request)) return ANONYMOUS
    return this.#decideAs(await this.#authentication.authenticate(req, reply, request.host), req, request)
  }

  /**
   * The decision on `request` for a caller already authenticated as `identity` (an open
   * WebSocket's grant; undefined: nobody): nothing is read, refreshed or written. An identity of
   * a provider this upstream does not accept signs nobody in, as in authenticate.ts.
   */
  decideFor(identity: Identity | undefined, req: DecisionRequest, request: AccessRequest): AccessDecision {
    if (this.#passesUnread(request)) return ANONYMOUS
    return this.#decideAs(identity !== undefined && this.#upstream.providers.includes(identity.provider) ? identity : undefined, req, request)
  }

  /** `auth: none`, a public path, or a preflight the upstream allows: passes without reading any session. */
  #passesUnread(request: AccessRequest): boolean {
    const upstream = this.#upstream
    if (upstream.auth === 'none' || this.#isPublic(request.path, request.method)) return true
    return upstream.allowPreflight && request.preflight
  }

  /** The verdict on what authentication found. */
  #decideAs(identity: AuthenticationResult, req: DecisionRequest, request: AccessRequest): AccessDecision {
    const pathPolicy = this.#policyFor(request.path, request.method)
    if (identity === undefined || identity === 'expired' || identity === 'refreshable' || identity === 'invalid_token') {
      if (optionalSignIn(this.#upstream, pathPolicy)) return ANONYMOUS
      return { outcome: 'unauthenticated', expired: identity !== undefined, refreshable: identity === 'refreshable' }
    }
    const { policy, stepUp } = pathPolicy
    // A regex rule's refusal names the path it refused, the client's own, not the pattern.
    const path = pathPolicy.regex === undefined ? pathPolicy.path : request.path
    // A provider that maps the user to another claim than `sub`: a user without it is refused.
    const allowed = identity.mapping.isDefault ? policy(identity.claims, identity.provider) : mappedVerdict(identity, policy)
    if (!allowed.allowed)
      return path === undefined ? { outcome: 'forbidden', identity, refusal: allowed } : { outcome: 'forbidden', identity, refusal: allowed, rulePath: path }
    // Without allow.acr or allow.maxAuthAgeSeconds this property test is all step-up costs.
    if (stepUp === undefined) return { outcome: 'pass', identity }
    return stepUpDecision(identity, stepUp, path, req, this.#judge)
  }
}

/** The allow rules' verdict under a provider's claim mapping: its user must be usable, its groups are the mapped claim. */
function mappedVerdict(identity: Identity, policy: AllowPolicy): AllowResult {
  const user = userClaimVerdict(identity.claims, identity.mapping)
  return user.allowed ? policy(identity.claims, identity.provider, identity.mapping) : user
}

/**
 * Whether a request without a sign-in passes anonymously: only on an `auth: optional` upstream,
 * and only where the deciding `allow` names nothing. An `allow` that names who may pass (or how
 * they authenticated) is about a signed-in user; passing anyone signed out there would open to
 * strangers what it refuses to signed-in users, so such a path needs a sign-in as `required` does.
 */
export function optionalSignIn(upstream: Pick<UpstreamConfig, 'auth'>, policy: Pick<PathPolicy, 'needsSignIn'>): boolean {
  return upstream.auth === 'optional' && !policy.needsSignIn
}

/**
 * The verdict of a step-up rule on an identity its `allow` admits. Only who the user is (the other
 * kinds) is a 403; how they authenticated is fixed by authenticating again, so it asks for that.
 */
function stepUpDecision(
  identity: Identity,
  requirement: StepUpRequirement,
  path: string | undefined,
  req: DecisionRequest,
  judge: StepUpJudge,
): AccessDecision {
  const now = judge.nowSeconds()
  const tolerance = judge.toleranceSeconds(identity.provider)
  const shortfall = stepUpShortfall(identity.claims, requirement, now, tolerance)
  if (shortfall === undefined) {
    if (requirement.maxAge === undefined) return { outcome: 'pass', identity }
    // A cached verdict must not outlive the authentication's age limit (check.ts).
    return { outcome: 'pass', identity, until: ((identity.claims.auth_time as number) + requirement.maxAge + tolerance) * 1000 }
  }
  const bearer = isBearerOf(req.headers.authorization, identity.accessToken)
  const decision: AccessDecision = { outcome: 'step_up', identity, requirement, shortfall, bearer }
  return path === undefined ? decision : { ...decision, rulePath: path }
}

/** Whether the identity is the request's own Bearer token (authenticate.ts prefers a session). */
function isBearerOf(authorization: string | undefined, accessToken: string): boolean {
  return bearerTokenOf(authorization) === accessToken
}

/** The log line of a step-up: who, where, and what fell short (never a claim value). */
export function logStepUp(
  req: Pick<DecisionRequest, 'log'>,
  upstream: UpstreamConfig,
  decision: Extract<AccessDecision, { outcome: 'step_up' }>,
  fields: Record<string, unknown> = {},
): void {
  const at = decision.rulePath === undefined ? {} : { path: decision.rulePath }
  req.log.info(
    { sub: decision.identity.claims.sub, upstream: upstream.name, ...at, shortfall: decision.shortfall, bearer: decision.bearer, ...fields },
    'step-up authentication required',
  )
}

/**
 * RFC 9470 3: the 401 of a request whose authentication does not meet a step-up rule, with the
 * `insufficient_user_authentication` challenge naming what would (`acr_values`, `max_age`), and
 * where a browser signs in for it (`signInUrl`, whose redirect endpoint asks the provider for it).
 * `challenge`: more parameters of the same challenge (RFC 9728 `resource_metadata`).
 */
export function stepUpError(requirement: StepUpRequirement, signInUrl: string, challenge: BearerChallengeParams = {}): GatewayError {
  const acrValues = requirement.acrValues?.join(' ')
  const extensions: Record<string, unknown> = { signInUrl }
  if (acrValues !== undefined) extensions.acr_values = acrValues
  if (requirement.maxAge !== undefined) extensions.max_age = requirement.maxAge
  const params: BearerChallengeParams = {
    error: 'insufficient_user_authentication',
    error_description: 'A different authentication level is required',
    acr_values: acrValues,
    max_age: requirement.maxAge === undefined ? undefined : String(requirement.maxAge),
    ...challenge,
  }
  return new GatewayError('insufficient_user_authentication', 'this resource needs a stronger or more recent sign-in', {
    headers: { 'www-authenticate': bearerChallenge(params) },
    extensions,
  })
}

/**
 * The 401 of the contract: `WWW-Authenticate: Bearer` (RFC 6750 3.1) and where to sign in.
 * `challenge`: more parameters of the Bearer challenge (RFC 9728 `resource_metadata`), after `error`.
 */
export function unauthenticatedError(expired: boolean, signInUrl: string, challenge: BearerChallengeParams = {}): GatewayError {
  return new GatewayError('unauthenticated', expired ? 'the sign-in has expired, or the Bearer token was refused' : 'sign in first', {
    headers: { 'www-authenticate': bearerChallenge(expired ? { error: 'invalid_token', ...challenge } : challenge) },
    extensions: { signInUrl },
  })
}

/**
 * Where a browser is sent to sign in (or to refresh) for `scheme://host<target>`: the redirect
 * endpoint on the public origin, with the request's own URL as `redirectAfter` when the redirect
 * endpoint would accept it (the public origin or an allowed host), else its path. The sign-in
 * starts on the public origin, where the callback is: the transaction's browser binding is a
 * host-only cookie (session/cookies.ts), so a sign-in begun on another host could not finish.
 */
export function signInLocation(deps: SignInOrigin, request: { scheme: string; host: string; target: string }, refreshable: boolean): string {
  const { publicUrl, validateRedirectAfter } = deps
  const back = validateRedirectAfter(`${request.scheme}://${request.host}${request.target}`) ?? validateRedirectAfter(request.target) ?? undefined
  return publicUrl + (refreshable ? refreshPath(back ?? '/') : signInPath(back))
}

/**
 * The 403 of the `allow` rules. `rulePath`: the path of the per-path rule that refused (the
 * upstream's own `allow` admits the rest), named in the detail and as the `refusedPath` extension,
 * so that a person refused `/admin` is not told the whole application is closed to them. It is a
 * prefix of the path the client asked for: it says nothing the client does not know, but which
 * part of it is refused.
 */
export function forbiddenError(rulePath?: string): GatewayError {
  if (rulePath === undefined) return new GatewayError('forbidden', 'your account is not allowed to use this application')
  return new GatewayError('forbidden', `your account is not allowed to use ${rulePath} of this application`, { extensions: { refusedPath: rulePath } })
}
