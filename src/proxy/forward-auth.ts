import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { IdentityHeaderNames, UpstreamConfig } from '../config/types.js'
import { GatewayError } from '../errors.js'
import type { Authenticator } from './authenticate.js'
import { createRoutingAmbiguityCheck } from './ambiguity.js'
import { createAccessDecision, forbiddenError, logForbidden, unauthenticatedError, type AccessDecider } from './guard.js'
import { identityHeaderValues } from './identity-headers.js'
import { canonicalHost, createUpstreamMatcher } from './match.js'
import { normalizePath, type NormalizedPath } from './path.js'
import { FORWARD_AUTH_PATH, signInPath } from '../paths.js'
import { PROBLEM_HEADERS } from '../ops/hygiene.js'
import { redactUrl } from '../ops/logging.js'

// GET /api/v1/openid/auth: the forward-auth check of the contract, for ingress-nginx (`auth-url`)
// and Traefik (ForwardAuth). The ingress asks "may this request through?" and serves the request
// itself; the answer is 200 (with X-Auth-Request-* identity headers to copy onto the request), 401
// or 403, never a redirect (the ingress sends users to sign in) and never cacheable.
//
// Which request is being asked about comes from headers (issue #6 point 1; oauth2-proxy
// GHSA-7x63-xv5r-3p2x, where a client-sent X-Forwarded-Uri made skip-auth rules apply to a path
// of the client's choosing). Each ingress names method, host and path with its own set:
// - ingress-nginx: X-Original-Method and X-Original-URL (`$scheme://$http_host$request_uri`), set
//   with proxy_set_header on every auth subrequest, so a client's own copies are overwritten;
// - Traefik: X-Forwarded-Method, X-Forwarded-Host and X-Forwarded-Uri (and -Proto), overwritten
//   with trustForwardHeader: false, its default.
// Both also copy the client's other headers onto the check, so behind ingress-nginx a client can
// add `X-Forwarded-Method: OPTIONS` and behind Traefik an X-Original-URL. Hence:
// - The target comes from one complete set (all three parts): ingress-nginx's when complete, else
//   Traefik's. A set missing its method is incomplete: neither ingress ever omits it, and reading
//   a missing method as GET would let a third kind of caller be decided on a guess. No complete
//   set, no decision (400), never a decision about a path the caller did not name.
// - Every part the other set names too must agree with it (method exactly, host canonical, path
//   normalized), else 400: preferring either set would let the client choose behind one of the
//   two ingresses.
// - The caller's address plays no part. The answer is about the credentials presented (the
//   caller's own cookie or Bearer token) for the request named; whoever can call this endpoint
//   directly learns no more than they would by sending that request through the ingress. What
//   needs protecting is the ingress's description, and that the agreement rule protects. (Until
//   issue #6, callers outside server.trustedProxies were decided for `/`: an ingress missing from
//   that list got `/`'s answer for `/admin`.)
// No decision reads User-Agent: the same request gets the same answer from curl, a browser or a bot.

export interface ForwardAuthOptions {
  upstreams: UpstreamConfig[]
  authenticate: Authenticator
  /** The gateway's external origin; signInUrl is built on it. */
  publicUrl: string
  /** cookies.domain: the session cookie reaches this domain and its subdomains. */
  cookieDomain: string | undefined
  /** Returns the safe redirect target or `null` (see redirect-after.ts). */
  validateRedirectAfter: (value: string) => string | null
}

/** oauth2-proxy's names for the same headers, which ingress setups already copy upstream. */
const AUTH_REQUEST_HEADERS: IdentityHeaderNames = {
  user: 'X-Auth-Request-User',
  email: 'X-Auth-Request-Email',
  groups: 'X-Auth-Request-Groups',
  preferredUsername: 'X-Auth-Request-Preferred-Username',
  issuer: 'X-Auth-Request-Issuer',
}
const ACCESS_TOKEN_HEADER = 'x-auth-request-access-token'
/** RFC 6749 A.12: an access token is VSCHAR; anything else is not put in a header. */
const ACCESS_TOKEN = /^[\x20-\x7e]+$/

/** A Host-header value: a DNS-ish name, IPv4 or bracketed IPv6, optional port. No lists. */
const HOST = /^(?:[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_.])?|\[[0-9A-Fa-f:.]+\])(?::[0-9]{0,5})?$/
const ABSOLUTE_URL = /^(https?):\/\/([^/?#]*)(.*)$/i
/** RFC 9110 5.6.2: a method is a token. */
const METHOD = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
/** Hosts named in cookie-reach warnings; every caller can name hosts, so the memory is capped. */
const MAX_WARNED_HOSTS = 64

/** The request the ingress asks about. */
interface OriginalRequest {
  method: string
  /** Canonical (canonicalHost): the name, and the port when one was sent. */
  host: string
  scheme: string
  target: NormalizedPath
}

/** One ingress's description; a part is undefined when its header is absent. */
type Description = { [K in keyof OriginalRequest]: OriginalRequest[K] | undefined }

type Headers = FastifyRequest['headers']

/** A header's value; a repeated header comes back joined (`a, b`), which no check accepts. */
function header(headers: Headers, name: string): string | undefined {
  const value = headers[name]
  return Array.isArray(value) ? value.join(', ') : value
}

function badRequest(detail: string): GatewayError {
  return new GatewayError('bad_request', detail)
}

function methodOf(headers: Headers, name: string): string | undefined {
  const value = header(headers, name)
  if (value !== undefined && !METHOD.test(value)) throw badRequest(`${name} must be one method`)
  return value
}

function normalizeTarget(target: string, name: string): NormalizedPath {
  const normalized = normalizePath(target)
  if (normalized === null) throw badRequest(`${name} is not a valid request path`)
  return normalized
}

/** ingress-nginx: X-Original-URL is `http(s)://host[:port]/path?query`, the request-target byte for byte. */
function nginxDescription(headers: Headers): Description {
  const method = methodOf(headers, 'x-original-method')
  const value = header(headers, 'x-original-url')
  if (value === undefined) return { method, host: undefined, scheme: undefined, target: undefined }
  const m = ABSOLUTE_URL.exec(value)
  const host = m?.[2] ?? ''
  if (m === null || !HOST.test(host)) throw badRequest('X-Original-URL must be an absolute http(s) URL')
  const rest = m[3] ?? ''
  // `https://host` and `https://host?q` are requests for `/` (RFC 9112 3.2.1's origin-form of an empty path).
  const target = rest === '' ? '/' : rest.charCodeAt(0) === 0x3f ? `/${rest}` : rest
  return {
    method,
    host: canonicalHost(host),
    scheme: (m[1] ?? 'http').toLowerCase(),
    target: normalizeTarget(target, 'X-Original-URL'),
  }
}

/** Traefik: X-Forwarded-Method, -Host, -Uri (path and query) and -Proto. */
function traefikDescription(req: FastifyRequest): Description {
  const headers = req.headers
  const host = header(headers, 'x-forwarded-host')
  if (host !== undefined && !HOST.test(host)) throw badRequest('X-Forwarded-Host must be one host')
  const uri = header(headers, 'x-forwarded-uri')
  const proto = header(headers, 'x-forwarded-proto')?.toLowerCase()
  return {
    method: methodOf(headers, 'x-forwarded-method'),
    host: host === undefined ? undefined : canonicalHost(host),
    scheme: proto === 'http' || proto === 'https' ? proto : req.protocol,
    target: uri === undefined ? undefined : normalizeTarget(uri, 'X-Forwarded-Uri'),
  }
}

function complete(d: Description): OriginalRequest | undefined {
  const { method, host, scheme, target } = d
  return method === undefined || host === undefined || scheme === undefined || target === undefined
    ? undefined
    : { method, host, scheme, target }
}

/** The request the caller names: one complete set, with whatever the other set says agreeing. */
function describe(req: FastifyRequest): OriginalRequest {
  const nginx = nginxDescription(req.headers)
  const traefik = traefikDescription(req)
  const fromNginx = complete(nginx)
  const original = fromNginx ?? complete(traefik)
  if (original === undefined) {
    throw badRequest(
      'name the request to check: X-Original-Method and X-Original-URL (ingress-nginx), or X-Forwarded-Method, X-Forwarded-Host and X-Forwarded-Uri (Traefik)',
    )
  }
  const other = fromNginx === undefined ? nginx : traefik
  if (other.method !== undefined && other.method !== original.method) {
    throw badRequest('X-Original-Method and X-Forwarded-Method name different methods')
  }
  if (other.host !== undefined && other.host !== original.host) {
    throw badRequest('X-Original-URL and X-Forwarded-Host name different hosts')
  }
  if (other.target !== undefined && other.target.path !== original.target.path) {
    throw badRequest('X-Original-URL and X-Forwarded-Uri name different paths')
  }
  return original
}

/** The name part of a canonical host, as cookies see it (they ignore ports). */
function hostName(host: string): string {
  if (host.charCodeAt(0) === 0x5b) return host.slice(0, host.indexOf(']') + 1)
  const colon = host.indexOf(':')
  return colon === -1 ? host : host.slice(0, colon)
}

export async function forwardAuthRoutes(app: FastifyInstance, options: ForwardAuthOptions): Promise<void> {
  const matchUpstream = createUpstreamMatcher(options.upstreams)
  const isAmbiguous = createRoutingAmbiguityCheck(options.upstreams)
  const deciders = new Map<UpstreamConfig, AccessDecider>(
    options.upstreams.map((u) => [u, createAccessDecision(u, options.authenticate)]),
  )
  const { publicUrl, validateRedirectAfter, cookieDomain } = options
  const publicHost = new URL(publicUrl).hostname
  const warnedHosts = new Set<string>()

  // An ingress must never cache a decision: it depends on the caller's cookies and on time.
  app.addHook('onSend', (_req, reply, payload, done) => {
    reply.headers(PROBLEM_HEADERS)
    done(null, payload)
  })

  /**
   * Issue #6 point 12: with host-only cookies (no cookies.domain) the session set on the public
   * host never reaches an application on another host, so every check there is "not signed in"
   * and the browser goes round the provider for ever. Said once per host.
   */
  function warnIfCookiesCannotReach(req: FastifyRequest, host: string): void {
    const name = hostName(host)
    const reachable = name === publicHost || (cookieDomain !== undefined && (name === cookieDomain || name.endsWith(`.${cookieDomain}`)))
    if (reachable || warnedHosts.has(name) || warnedHosts.size >= MAX_WARNED_HOSTS) return
    warnedHosts.add(name)
    req.log.warn(
      { host: name, cookieHost: publicHost, cookieDomain },
      'forward-auth: the session cookie never reaches this host, so signed-in browsers are sent to sign in again and again; set cookies.domain to a domain that covers it',
    )
  }

  /** The redirect endpoint's URL that brings the user back to the original request. */
  function signInUrl(original: OriginalRequest): string {
    const path = original.target.path + original.target.search
    // An absolute URL is only accepted on the public origin or an allowed host; otherwise the
    // path alone, which the gateway's own origin serves.
    const back = validateRedirectAfter(`${original.scheme}://${original.host}${path}`) ?? validateRedirectAfter(path)
    return publicUrl + signInPath(back ?? undefined)
  }

  app.get(FORWARD_AUTH_PATH, async (req: FastifyRequest, reply: FastifyReply) => {
    let original: OriginalRequest
    try {
      original = describe(req)
    } catch (err) {
      reply.logFields = { forwardAuth: { outcome: 'bad_request', reason: (err as Error).message } }
      throw err
    }
    const { method, host, target } = original
    const checked = { method, url: redactUrl(`${original.scheme}://${host}${target.path}${target.search}`) }
    const logOutcome = (outcome: string, upstream?: UpstreamConfig): void => {
      reply.logFields = { forwardAuth: { method: checked.method, url: checked.url, upstream: upstream?.name, outcome } }
    }
    if (isAmbiguous(host, target.path)) {
      logOutcome('bad_request')
      throw badRequest('the path reads as another route in another case or without trailing dots or spaces')
    }
    const upstream = matchUpstream(host, target.path)
    const decide = upstream === undefined ? undefined : deciders.get(upstream)
    if (upstream === undefined || decide === undefined) {
      logOutcome('not_found')
      throw new GatewayError('not_found', 'no upstream serves this host and path')
    }
    if (upstream.auth !== 'none') warnIfCookiesCannotReach(req, host)
    // A preflight only when it can be told: the original method is OPTIONS and the check carries
    // the client's Access-Control-Request-Method, which both ingresses copy onto it.
    const preflight = method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined
    const decision = await decide(req, reply, { path: target.path, preflight })
    logOutcome(decision.outcome, upstream)
    switch (decision.outcome) {
      case 'unauthenticated':
        throw unauthenticatedError(decision.expired, signInUrl(original))
      case 'forbidden':
        logForbidden(req, upstream, decision, checked)
        throw forbiddenError()
      case 'pass': {
        const identity = decision.identity
        if (identity !== null) {
          req.identity = identity
          reply.headers(identityHeaderValues(identity.claims, AUTH_REQUEST_HEADERS, identity.issuer))
          if (upstream.forwardAccessToken && ACCESS_TOKEN.test(identity.accessToken)) {
            reply.header(ACCESS_TOKEN_HEADER, identity.accessToken)
          }
        }
        return reply.code(200).send()
      }
    }
  })
}
