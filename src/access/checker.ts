import { createHash } from 'node:crypto'
import type { ForwardAuthConfig, UpstreamConfig } from '../options/types.js'
import { GatewayError } from '../contract/errors.js'
import type { CheckRoute } from '../contract/endpoints.js'
import type { Clock } from '../lib/clock.js'
import { TtlCache } from '../lib/ttl-cache.js'
import { ASSERTION_JWKS_PATH, isAtOrBelow, isGatewayPath } from '../contract/endpoints.js'
import type { UrlRedactor } from '../ops/logging.js'
import { createRoutingAmbiguityCheck, type RoutingAmbiguityCheck } from './ambiguity.js'
import { isPreflight, verdictOf, type AccessDecisions, type DecisionRequest, type Verdict } from './decision.js'
import { refusal, type Answer, type Answers, type Exit } from './answer.js'
import type { SessionReply } from '../session/types.js'
import { canonicalHost, createUpstreamMatcher, type UpstreamMatcher } from './match.js'
import { isInNormalForm, normalizePath, type NormalizedPath } from './path.js'

// The decision of the check endpoints: a gateway or ingress serves the request itself and asks
// the gateway "may this request through, and as whom?". Every check dialect asks it
// (checks/dialects.ts: forward-auth for ingress-nginx and Traefik, Envoy ext_authz over HTTP and
// over gRPC); the question, the verdict and its answer are here, once (Checker.answer: the
// verdict of Checker.check rendered by answer.ts for the dialect's exit), and the access decision
// itself is the proxy guard's (decision.ts UpstreamAccess.decide), so a request gets the same
// answer whether the gateway proxies it or is asked about it.
//
// - The request checked is the one the dialect established (its method, canonical host, scheme
//   and target); a variant spelling that routes elsewhere is refused (ambiguity.ts).
// - The target is decided only as it is spelled (checkedTarget): the ingress forwards the client's
//   spelling, not the gateway's normal form of it, so a target the normalizer would rewrite (dot
//   segments, `//`, `%2e`, an encoded unreserved character) is refused with 400, never decided for
//   the path it normalizes to. An ingress that normalizes before the check (Envoy normalize_path
//   and merge_slashes, Istio MERGE_SLASHES, Traefik's sanitizePath) never sends one; see
//   docs/deploy/kubernetes.md. The request to the check endpoint itself is routed on its raw
//   target (isCheckRoute), so a `..` after the prefix cannot reach another endpoint.
// - The upstream is the one the host and path select, or the one the caller names (Envoy's
//   context_extensions): a name that is not configured is refused, never matched to something
//   else (a typo must not fall back to a laxer upstream).
// - The gateway's own paths (everything under /api/v1/openid, and the JWKS it publishes) are
//   never allowed by a check: a gateway that routes them through its auth filter is misconfigured,
//   and answering 200 would let the caller serve its own copy of them. They are decided like any
//   other path of their upstream (so a browser without a session is still sent to sign in), and
//   what would pass is refused.
// - Decisions can be cached (forwardAuth.cache, like ingress-nginx's auth-cache-key): keyed by a
//   SHA-256 digest of the credentials presented and of the request checked, bounded, for a few
//   seconds; logout and back-channel logout empty it, a reload replaces it with its app.

export interface CheckedRequest {
  method: string
  /** Canonical (canonicalHost): the name, and the port when one was sent. */
  host: string
  scheme: string
  target: NormalizedPath
  /** The client's address, where the dialect can know it (a Transaction Token's req_ip). */
  clientAddress?: () => string | undefined
}

export interface CheckerOptions {
  upstreams: UpstreamConfig[]
  /** The configuration's access decisions, one per upstream of `upstreams` (decision.ts). */
  access: AccessDecisions
  /** The gateway's external origin: the host its own cookies are set on. */
  publicUrl: string
  /** The answers of this configuration's verdicts (answer.ts). */
  answers: Answers
  /**
   * cookies.domain, or each of cookies.domains: the session cookie reaches each of these domains
   * and their subdomains (with cookies.domains, through the hand-off). Empty: host-only cookies.
   */
  cookieDomains: readonly string[]
  cache: ForwardAuthConfig['cache']
  /** Names of the gateway's cookies (the credentials a decision depends on). */
  isGatewayCookieName: (name: string) => boolean
  /** What cached decisions expire by. */
  clock: Clock
  /** log.redactQueryParams applied (ops/logging.ts). */
  redactUrl: UrlRedactor
  /** The providers' callback paths outside the gateway's own (oidc/providers.ts Providers.ownCallbackPaths): the gateway's too. */
  ownCallbackPaths?: readonly string[]
}

/**
 * The request a check decides on, for the session store and the authentication: the client's
 * cookies and headers as the caller passed them on, and the checked request's target as its URL,
 * since that is the request the browser chose its cookies for.
 */
export function checkContext(req: Pick<DecisionRequest, 'cookies' | 'headers' | 'log'>, checked: CheckedRequest): DecisionRequest {
  return { url: checked.target.path + checked.target.search, cookies: req.cookies, headers: req.headers, log: req.log }
}

/**
 * The target a check decides on: `raw` (`what` names where it was read, for the 400), refused
 * unless it is a request path already in normal form (isInNormalForm). Never a decision for the
 * path a rewritten spelling stands for: that is not the path the upstream receives.
 */
export function checkedTarget(raw: string, what: string): NormalizedPath {
  const target = normalizePath(raw)
  if (target === null) throw new GatewayError('bad_request', `${what} is not a valid request path`)
  if (!isInNormalForm(raw, target)) {
    throw new GatewayError(
      'bad_request',
      `${what} is not in normal form (dot segments, repeated slashes or needless percent-encoding): the gateway decides only for the path the upstream receives; normalize paths before the check`,
    )
  }
  return target
}

/**
 * Whether a request to the gateway is one of the check endpoints', by its raw target (before any
 * normalization), as each check dialect declares its route (checks/dialects.ts): an endpoint's
 * path with nothing, `/` or `?` after it, or a prefix followed by `/`. Such a request is routed to
 * its check and nowhere else: normalized first, `<prefix>/../redirect` would be the sign-in
 * endpoint's 200, which Envoy takes for an allow.
 */
export function isCheckRoute(rawUrl: string, routes: readonly CheckRoute[]): boolean {
  for (const { path, match } of routes) {
    if (!rawUrl.startsWith(path)) continue
    const next = rawUrl.charCodeAt(path.length)
    if (next === 0x2f) return true
    // The end or `?`: `/api/v1/openid/authx` is another path.
    if (match === 'endpoint' && (Number.isNaN(next) || next === 0x3f)) return true
  }
  return false
}

/** Hosts named in cookie-reach warnings; every caller can name hosts, so the memory is capped. */
const MAX_WARNED_HOSTS = 64

/** The name part of a canonical host, as cookies see it (they ignore ports). */
function hostName(host: string): string {
  if (host.charCodeAt(0) === 0x5b) return host.slice(0, host.indexOf(']') + 1)
  const colon = host.indexOf(':')
  return colon === -1 ? host : host.slice(0, colon)
}

/** Paths the gateway serves itself on its public port. */
function isServedByGateway(path: string, ownCallbackPaths: readonly string[]): boolean {
  return isGatewayPath(path) || path === ASSERTION_JWKS_PATH || ownCallbackPaths.some((own) => isAtOrBelow(path, own))
}

/**
 * The check endpoints' one decision, with its cache: built once per configuration (app.ts) and
 * asked by every dialect (checks/).
 */
export class Checker {
  readonly #options: CheckerOptions
  readonly #matchUpstream: UpstreamMatcher
  readonly #isAmbiguous: RoutingAmbiguityCheck
  readonly #byName: ReadonlyMap<string, UpstreamConfig>
  readonly #publicHost: string
  readonly #warnedHosts = new Set<string>()
  readonly #cache: TtlCache<Verdict> | undefined
  readonly #ttlMs: number

  constructor(options: CheckerOptions) {
    this.#options = options
    this.#matchUpstream = createUpstreamMatcher(options.upstreams)
    this.#isAmbiguous = createRoutingAmbiguityCheck(options.upstreams)
    this.#byName = new Map(options.upstreams.map((u) => [u.name, u]))
    this.#publicHost = hostName(canonicalHost(new URL(options.publicUrl).host))
    this.#cache = options.cache.enabled ? new TtlCache<Verdict>(options.cache.maxEntries, options.clock) : undefined
    this.#ttlMs = options.cache.ttlSeconds * 1000
  }

  /**
   * The verdict on `checked` for the credentials `req` carries (a refresh may set cookies on
   * `reply`). `req.url` is the checked request's target, not the check's: the browser sent its
   * cookies with that one (a credentials cookie on /api/v1/openid never reaches /app). `upstreamName`: the upstream whose rules apply, as the caller names it. Throws
   * GatewayError: bad_request (an ambiguous path), not_found (no upstream serves it), forbidden
   * (an unknown upstream name), and whatever authentication throws (503 store, 502 provider).
   */
  async check(req: DecisionRequest, reply: SessionReply, checked: CheckedRequest, upstreamName?: string): Promise<Verdict> {
    const { method, host, target } = checked
    if (this.#isAmbiguous(host, target.path, method)) {
      throw new GatewayError('bad_request', 'the path reads as another route in another case or without trailing dots or spaces')
    }
    let upstream: UpstreamConfig | undefined
    if (upstreamName === undefined) {
      upstream = this.#matchUpstream(host, target.path)
      if (upstream === undefined) throw new GatewayError('not_found', 'no upstream serves this host and path')
    } else {
      upstream = this.#byName.get(upstreamName)
      if (upstream === undefined) throw new GatewayError('forbidden', 'the upstream named for this check is not configured')
    }
    const access = this.#options.access.of(upstream)
    if (upstream.auth !== 'none') this.#warnIfCookiesCannotReach(req, host)
    // A preflight only when it can be told: the check carries the client's Access-Control-Request-Method.
    const preflight = isPreflight(method, req.headers)
    const cache = this.#cache
    const key = cache === undefined ? undefined : this.#cacheKey(req, checked, upstreamName, preflight)
    // The decision's time: a verdict is kept ttlSeconds from when it was asked for.
    const now = this.#options.clock.now()
    const cached = key === undefined ? undefined : cache?.get(key)
    if (cached !== undefined) return cached
    const decision = await access.decide(req, reply, { path: target.path, method, preflight, host: checked.host })
    let verdict = verdictOf(upstream, decision, req, { method, url: this.loggedUrl(checked) })
    if (verdict.outcome === 'pass' && isServedByGateway(target.path, this.#options.ownCallbackPaths ?? [])) {
      req.log.warn(
        { upstream: upstream.name, path: target.path },
        "a check asked about one of the gateway's own paths: refused; route them to the gateway without the auth filter",
      )
      verdict = { outcome: 'forbidden', upstream, identity: verdict.identity }
    }
    // Neither a sign-in to come nor a step-up is kept: the next answer is the one after it. A pass
    // under a step-up rule's max age is kept no longer than the age allows.
    if (key !== undefined && verdict.outcome !== 'unauthenticated' && verdict.outcome !== 'step_up') {
      const until = decision.outcome === 'pass' && decision.until !== undefined ? Math.min(now + this.#ttlMs, decision.until) : now + this.#ttlMs
      if (until > now) cache?.set(key, verdict, until)
    }
    return verdict
  }

  /**
   * The answer of `exit` to the check of `checked` (answer.ts): the verdict rendered, or the
   * refusal of a check that could not be decided (an ambiguous path, no upstream, an unknown
   * upstream name, a store or provider that failed).
   */
  async answer(req: DecisionRequest, reply: SessionReply, checked: CheckedRequest, exit: Exit, upstreamName?: string): Promise<Answer> {
    let verdict: Verdict
    try {
      verdict = await this.check(req, reply, checked, upstreamName)
    } catch (err) {
      if (!(err instanceof GatewayError)) throw err
      return refusal(err)
    }
    const { method, scheme, host, target } = checked
    return this.#options.answers.answer(
      verdict,
      {
        method,
        headers: req.headers,
        scheme,
        host,
        target: target.path + target.search,
        path: target.path,
        transport: scheme,
        clientAddress: checked.clientAddress,
      },
      exit,
    )
  }

  /** Empties the decision cache (a session ended). */
  forget(): void {
    this.#cache?.clear()
  }

  /** The checked request's URL as log lines carry it: secret query values redacted. */
  loggedUrl(checked: CheckedRequest): string {
    return this.#options.redactUrl(`${checked.scheme}://${checked.host}${checked.target.path}${checked.target.search}`)
  }

  /**
   * With host-only cookies (no cookies.domain or cookies.domains) the session set on the public
   * host never reaches an application on another host, so every check there is "not signed in"
   * and the browser goes round the provider for ever. Said once per host.
   */
  #warnIfCookiesCannotReach(req: DecisionRequest, host: string): void {
    const { cookieDomains } = this.#options
    const publicHost = this.#publicHost
    const warnedHosts = this.#warnedHosts
    const name = hostName(host)
    const reachable = name === publicHost || cookieDomains.some((domain) => name === domain || name.endsWith(`.${domain}`))
    if (reachable || warnedHosts.has(name) || warnedHosts.size >= MAX_WARNED_HOSTS) return
    warnedHosts.add(name)
    req.log.warn(
      { host: name, cookieHost: publicHost, cookieDomains },
      'forward-auth: the session cookie never reaches this host, so signed-in browsers are sent to sign in again and again; set cookies.domain (or cookies.domains) to a domain that covers it',
    )
  }

  /**
   * The cache key: what the verdict depends on. The credentials are the gateway's cookies and the
   * Authorization header (hashed: the key is kept in memory); the request is its method, host and
   * path (the query plays no part in a decision), the upstream named, and whether it is a preflight.
   */
  #cacheKey(req: DecisionRequest, checked: CheckedRequest, upstreamName: string | undefined, preflight: boolean): string {
    const { isGatewayCookieName } = this.#options
    const hash = createHash('sha256')
    const cookies = req.cookies
    for (const name in cookies) {
      if (isGatewayCookieName(name)) hash.update(`c\0${name}\0${cookies[name] ?? ''}\0`)
    }
    const authorization = req.headers.authorization
    if (authorization !== undefined) hash.update(`a\0${authorization}\0`)
    hash.update(`r\0${checked.method}\0${checked.host}\0${checked.target.path}\0${upstreamName ?? ''}\0${preflight ? 1 : 0}`)
    return hash.digest('base64url')
  }
}
