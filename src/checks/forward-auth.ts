import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { GatewayError } from '../contract/errors.js'
import { checkContext, checkedTarget, type CheckedRequest, type Checker } from '../access/checker.js'
import type { Exit } from '../access/answer.js'
import type { TrustCheck } from '../ops/trusted-peers.js'
import { clientAddress } from '../upstream/forwarded.js'
import { AUTH_REQUEST_HEADERS } from '../upstream/header-policy.js'
import { canonicalHost, isHostValue } from '../access/match.js'
import { ENDPOINTS, FORWARD_AUTH_PATH } from '../contract/endpoints.js'
import { PROBLEM_HEADERS } from '../ops/response-headers.js'
import { writeAnswer, type CheckDialect } from './dialect.js'

// GET /api/v1/openid/auth: the forward-auth check of the contract, for ingress-nginx (`auth-url`)
// and Traefik (ForwardAuth). The ingress asks "may this request through?" and serves the request
// itself; the answer is 200 (with X-Auth-Request-* identity headers to copy onto the request), 401
// or 403, and never cacheable. A browser's page load asked about by Traefik, which hands non-2xx
// answers to the client as they are, gets a 302 to sign in; ingress-nginx accepts only 2xx, 401
// and 403 from auth-url (anything else is a 500) and sends the browser to auth-signin itself.
// The answer is the check endpoints' one (access/checker.ts Checker.answer); this module only reads the ingress's
// description of the request and renders the verdict.
//
// Which request is being asked about comes from headers (oauth2-proxy's
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
//   exactly), else 400: preferring either set would let the client choose behind one of the
//   two ingresses.
// - The path named is decided only when already in normal form (access/checker.ts checkedTarget), else
//   400: ingress-nginx names `$request_uri` and forwards it unchanged, so `/admin//../users` is
//   `/admin/users` to the application whatever the gateway would make of it.
// - The caller's address plays no part. The answer is about the credentials presented (the
//   caller's own cookie or Bearer token) for the request named; whoever can call this endpoint
//   directly learns no more than they would by sending that request through the ingress. What
//   needs protecting is the ingress's description, and that the agreement rule protects. (Deciding
//   callers outside server.trustedProxies for `/` instead would give an ingress missing from that
//   list `/`'s answer for `/admin`.)
// No decision reads User-Agent: the same request gets the same answer from curl, a browser or a bot.

export interface ForwardAuthOptions {
  checker: Checker
  /** server.trustedProxies' test: the client an ingress names in X-Forwarded-For goes into a Txn-Token only when the ingress is trusted. */
  isTrustedProxy: TrustCheck
}

/** oauth2-proxy's names for the identity headers (header-policy.ts owns every identity header name). */
export { AUTH_REQUEST_HEADERS }

/**
 * What each ingress can do with an answer: both copy the identity from X-Auth-Request-* (and the
 * headers they are told to: Authorization, the assertion, Txn-Token); Traefik hands a non-2xx
 * answer to the client as it is, so a browser's page load is sent to sign in here, while
 * ingress-nginx turns anything but 2xx, 401 and 403 into a 500 and sends the browser to sign in
 * itself (auth-signin).
 */
const EXITS: Record<OriginalRequest['ingress'], Exit> = {
  traefik: { redirects: true, carrier: 'ingress' },
  'ingress-nginx': { redirects: false, carrier: 'ingress' },
}

const ABSOLUTE_URL = /^(https?):\/\/([^/?#]*)(.*)$/i
/** RFC 9110 5.6.2: a method is a token. */
const METHOD = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
/** The request the ingress asks about, and which ingress described it. */
interface OriginalRequest extends CheckedRequest {
  /** Traefik passes any non-2xx answer on to the client; ingress-nginx takes only 2xx, 401 and 403. */
  ingress: 'ingress-nginx' | 'traefik'
}

/** One ingress's description; a part is undefined when its header is absent. */
type Description = { [K in keyof CheckedRequest]: CheckedRequest[K] | undefined }

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

/** ingress-nginx: X-Original-URL is `http(s)://host[:port]/path?query`, the request-target byte for byte. */
function nginxDescription(headers: Headers): Description {
  const method = methodOf(headers, 'x-original-method')
  const value = header(headers, 'x-original-url')
  if (value === undefined) return { method, host: undefined, scheme: undefined, target: undefined }
  const m = ABSOLUTE_URL.exec(value)
  const host = m?.[2] ?? ''
  if (m === null || !isHostValue(host)) throw badRequest('X-Original-URL must be an absolute http(s) URL')
  const rest = m[3] ?? ''
  // `https://host` and `https://host?q` are requests for `/` (RFC 9112 3.2.1's origin-form of an empty path).
  const target = rest === '' ? '/' : rest.charCodeAt(0) === 0x3f ? `/${rest}` : rest
  return {
    method,
    host: canonicalHost(host),
    scheme: (m[1] ?? 'http').toLowerCase(),
    target: checkedTarget(target, 'X-Original-URL'),
  }
}

/** Traefik: X-Forwarded-Method, -Host, -Uri (path and query) and -Proto. */
function traefikDescription(req: FastifyRequest): Description {
  const headers = req.headers
  const host = header(headers, 'x-forwarded-host')
  if (host !== undefined && !isHostValue(host)) throw badRequest('X-Forwarded-Host must be one host')
  const uri = header(headers, 'x-forwarded-uri')
  const proto = header(headers, 'x-forwarded-proto')?.toLowerCase()
  return {
    method: methodOf(headers, 'x-forwarded-method'),
    host: host === undefined ? undefined : canonicalHost(host),
    scheme: proto === 'http' || proto === 'https' ? proto : req.protocol,
    target: uri === undefined ? undefined : checkedTarget(uri, 'X-Forwarded-Uri'),
  }
}

function complete(d: Description, ingress: OriginalRequest['ingress']): OriginalRequest | undefined {
  const { method, host, scheme, target } = d
  return method === undefined || host === undefined || scheme === undefined || target === undefined ? undefined : { method, host, scheme, target, ingress }
}

/** The request the caller names: one complete set, with whatever the other set says agreeing. */
function describe(req: FastifyRequest): OriginalRequest {
  const nginx = nginxDescription(req.headers)
  const traefik = traefikDescription(req)
  const fromNginx = complete(nginx, 'ingress-nginx')
  const original = fromNginx ?? complete(traefik, 'traefik')
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

export async function forwardAuthRoutes(app: FastifyInstance, options: ForwardAuthOptions): Promise<void> {
  const { checker } = options

  // An ingress must never cache a decision: it depends on the caller's cookies and on time.
  app.addHook('onSend', (_req, reply, payload, done) => {
    reply.headers(PROBLEM_HEADERS)
    done(null, payload)
  })

  app.get(FORWARD_AUTH_PATH, async (req: FastifyRequest, reply: FastifyReply) => {
    let original: OriginalRequest
    try {
      original = describe(req)
    } catch (err) {
      reply.logFields = { forwardAuth: { outcome: 'bad_request', reason: (err as Error).message } }
      throw err
    }
    const logged = { method: original.method, url: checker.loggedUrl(original), ingress: original.ingress }
    // The client the ingress names, for a Transaction Token's req_ip: only from a trusted ingress.
    const checked: CheckedRequest = { ...original, clientAddress: () => clientAddress(req.headers, req.socket.remoteAddress, options.isTrustedProxy) }
    let answer
    try {
      answer = await checker.answer(checkContext(req, checked), reply, checked, EXITS[original.ingress])
    } catch (err) {
      reply.logFields = { forwardAuth: { ...logged, outcome: err instanceof GatewayError ? err.code : 'error' } }
      throw err
    }
    reply.logFields = {
      forwardAuth:
        answer.upstream === undefined ? { ...logged, outcome: answer.outcome } : { ...logged, upstream: answer.upstream.name, outcome: answer.outcome },
    }
    return writeAnswer(req, reply, answer)
  })
}

/** The forward-auth dialect: ingress-nginx's auth-url and Traefik's ForwardAuth (and nginx's auth_request, Caddy's forward_auth). */
export const FORWARD_AUTH: CheckDialect = {
  name: 'forward-auth',
  route: () => ({ path: ENDPOINTS.forwardAuth.path, match: 'endpoint' }),
  async register(app, { checker, isTrustedProxy }) {
    await app.register(forwardAuthRoutes, { checker, isTrustedProxy })
  },
}
