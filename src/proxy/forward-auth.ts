import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { IdentityHeaderNames, UpstreamConfig } from '../config/types.js'
import { GatewayError } from '../errors.js'
import type { Authenticator } from './authenticate.js'
import { createTrustCheck } from './forwarded.js'
import { createAccessDecision, forbiddenError, unauthenticatedError, type AccessDecider } from './guard.js'
import { identityHeaderValues } from './identity-headers.js'
import { createUpstreamMatcher } from './match.js'
import { normalizePath, type NormalizedPath } from './path.js'
import { signInPath } from '../paths.js'
import { PROBLEM_HEADERS } from '../ops/hygiene.js'

// GET /api/v1/openid/auth: the forward-auth check of the contract, for ingress-nginx (`auth-url`)
// and Traefik (ForwardAuth). The ingress asks "may this request through?" and serves the request
// itself; the answer is 200 (with X-Auth-Request-* identity headers to copy onto the request), 401
// or 403, never a redirect (the ingress sends users to sign in) and never cacheable.
//
// Which request is being asked about comes from headers, and headers are only as trustworthy as
// the peer that sent them (issue #3; oauth2-proxy GHSA-7x63-xv5r-3p2x, where a client-sent
// X-Forwarded-Uri made skip-auth rules apply to a path of the client's choosing):
// - From a peer in server.trustedProxies: X-Original-URL (an absolute URL; ingress-nginx) or
//   X-Forwarded-Uri with X-Forwarded-Host (Traefik; without X-Forwarded-Host the Host header),
//   and X-Forwarded-Method or X-Original-Method. Both ingresses copy the client's own headers onto
//   the check, and each sets only its own set, so a client behind ingress-nginx can add an
//   X-Forwarded-Uri and one behind Traefik an X-Original-URL. When both sets are present they must
//   therefore name the same host and path, or the answer is 400: preferring either one would let
//   the client choose behind one of the two ingresses. A trusted peer that names no URI at all
//   gets 400 too, rather than a decision about a path it did not mean.
// - From any other peer they are ignored: the check is made for the request's own Host and the
//   path `/`, so an untrusted caller cannot choose which rules apply.
// No decision reads User-Agent: the same request gets the same answer from curl, a browser or a bot.

export interface ForwardAuthOptions {
  upstreams: UpstreamConfig[]
  trustedProxies: string[]
  authenticate: Authenticator
  /** The gateway's external origin; signInUrl is built on it. */
  publicUrl: string
  /** Returns the safe redirect target or `null` (see redirect-after.ts). */
  validateRedirectAfter: (value: string) => string | null
}

/** oauth2-proxy's names for the same headers, which ingress setups already copy upstream. */
const AUTH_REQUEST_HEADERS: IdentityHeaderNames = {
  user: 'X-Auth-Request-User',
  email: 'X-Auth-Request-Email',
  groups: 'X-Auth-Request-Groups',
  preferredUsername: 'X-Auth-Request-Preferred-Username',
}
const ACCESS_TOKEN_HEADER = 'x-auth-request-access-token'
/** RFC 6749 A.12: an access token is VSCHAR; anything else is not put in a header. */
const ACCESS_TOKEN = /^[\x20-\x7e]+$/

/** A Host-header value: a DNS-ish name, IPv4 or bracketed IPv6, optional port. No lists. */
const HOST = /^(?:[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$/
const ABSOLUTE_URL = /^(https?):\/\/([^/?#]*)(.*)$/i
const FORWARDED_AUTH_HEADERS = ['x-original-url', 'x-forwarded-uri', 'x-forwarded-host', 'x-forwarded-method', 'x-original-method']

/** The request the ingress asks about. */
interface OriginalRequest {
  /** As in a Host header: the name, and the port when one was sent. */
  host: string
  scheme: string
  target: NormalizedPath
  /** The original method, when a trusted peer said which. */
  method: string | undefined
}

type Headers = FastifyRequest['headers']

/** A header's value; a repeated header comes back joined (`a, b`), which no check accepts. */
function header(headers: Headers, name: string): string | undefined {
  const value = headers[name]
  return Array.isArray(value) ? value.join(', ') : value
}

function badRequest(detail: string): GatewayError {
  return new GatewayError('bad_request', detail)
}

function normalizeTarget(target: string, name: string): NormalizedPath {
  const normalized = normalizePath(target)
  if (normalized === null) throw badRequest(`${name} is not a valid request path`)
  return normalized
}

/** X-Original-URL: `http(s)://host[:port]/path?query`, the request-target kept byte for byte. */
function parseOriginalUrl(value: string): { scheme: string; host: string; target: string } {
  const m = ABSOLUTE_URL.exec(value)
  const host = m?.[2] ?? ''
  if (m === null || !HOST.test(host)) throw badRequest('X-Original-URL must be an absolute http(s) URL')
  const rest = m[3] ?? ''
  // `https://host` and `https://host?q` are requests for `/` (RFC 9112 3.2.1's origin-form of an empty path).
  const target = rest === '' ? '/' : rest.charCodeAt(0) === 0x3f ? `/${rest}` : rest
  return { scheme: (m[1] ?? 'http').toLowerCase(), host, target }
}

function fromTrustedPeer(req: FastifyRequest): OriginalRequest {
  const headers = req.headers
  const originalUrl = header(headers, 'x-original-url')
  const forwardedUri = header(headers, 'x-forwarded-uri')
  const forwardedHost = header(headers, 'x-forwarded-host')
  if (forwardedHost !== undefined && !HOST.test(forwardedHost)) throw badRequest('X-Forwarded-Host must be one host')
  const method = header(headers, 'x-forwarded-method') ?? header(headers, 'x-original-method')

  if (originalUrl !== undefined) {
    const url = parseOriginalUrl(originalUrl)
    const target = normalizeTarget(url.target, 'X-Original-URL')
    if (forwardedHost !== undefined && forwardedHost.toLowerCase() !== url.host.toLowerCase()) {
      throw badRequest('X-Forwarded-Host and X-Original-URL name different hosts')
    }
    if (forwardedUri !== undefined && normalizeTarget(forwardedUri, 'X-Forwarded-Uri').path !== target.path) {
      throw badRequest('X-Forwarded-Uri and X-Original-URL name different paths')
    }
    return { host: url.host, scheme: url.scheme, target, method }
  }
  if (forwardedUri === undefined) throw badRequest('a trusted proxy must send X-Forwarded-Uri or X-Original-URL')
  const proto = header(headers, 'x-forwarded-proto')?.toLowerCase()
  return {
    host: forwardedHost ?? header(headers, 'host') ?? '',
    scheme: proto === 'http' || proto === 'https' ? proto : req.protocol,
    target: normalizeTarget(forwardedUri, 'X-Forwarded-Uri'),
    method,
  }
}

export async function forwardAuthRoutes(app: FastifyInstance, options: ForwardAuthOptions): Promise<void> {
  const isTrusted = createTrustCheck(options.trustedProxies)
  const matchUpstream = createUpstreamMatcher(options.upstreams)
  const deciders = new Map<UpstreamConfig, AccessDecider>(
    options.upstreams.map((u) => [u, createAccessDecision(u, options.authenticate)]),
  )
  const { publicUrl, validateRedirectAfter } = options
  let warnedUntrusted = false

  // An ingress must never cache a decision: it depends on the caller's cookies and on time.
  app.addHook('onSend', async (_req, reply, payload) => {
    reply.headers(PROBLEM_HEADERS)
    return payload
  })

  function describe(req: FastifyRequest): OriginalRequest {
    if (isTrusted(req.socket.remoteAddress)) return fromTrustedPeer(req)
    if (!warnedUntrusted && FORWARDED_AUTH_HEADERS.some((name) => req.headers[name] !== undefined)) {
      // Once per process: the usual cause is an ingress missing from server.trustedProxies, which
      // makes every check one about `/`.
      warnedUntrusted = true
      req.log.warn('forward-auth: X-Forwarded-Uri/-Host/X-Original-URL from a peer not in server.trustedProxies are ignored')
    }
    return { host: header(req.headers, 'host') ?? '', scheme: req.protocol, target: { path: '/', search: '' }, method: undefined }
  }

  /** The redirect endpoint's URL that brings the user back to the original request. */
  function signInUrl(original: OriginalRequest): string {
    const path = original.target.path + original.target.search
    // An absolute URL is only accepted on the public origin or an allowed host; otherwise the
    // path alone, which the gateway's own origin serves.
    const back = validateRedirectAfter(`${original.scheme}://${original.host}${path}`) ?? validateRedirectAfter(path)
    return publicUrl + signInPath(back ?? undefined)
  }

  app.get('/auth', async (req: FastifyRequest, reply: FastifyReply) => {
    const original = describe(req)
    const upstream = matchUpstream(original.host, original.target.path)
    const decide = upstream === undefined ? undefined : deciders.get(upstream)
    if (upstream === undefined || decide === undefined) throw new GatewayError('not_found', 'no upstream serves this host and path')
    // A preflight only when it can be told: the original method from a trusted peer, and the
    // client's Access-Control-Request-Method, which both ingresses copy onto the check.
    const preflight = original.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined
    const decision = await decide(req, reply, { path: original.target.path, preflight })
    switch (decision.outcome) {
      case 'unauthenticated':
        throw unauthenticatedError(decision.expired, signInUrl(original))
      case 'forbidden':
        throw forbiddenError()
      case 'pass': {
        const identity = decision.identity
        if (identity !== null) {
          req.identity = identity
          reply.headers(identityHeaderValues(identity.claims, AUTH_REQUEST_HEADERS))
          if (upstream.forwardAccessToken && ACCESS_TOKEN.test(identity.accessToken)) {
            reply.header(ACCESS_TOKEN_HEADER, identity.accessToken)
          }
        }
        return reply.code(200).send()
      }
    }
  })
}
