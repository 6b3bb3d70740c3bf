import { randomBytes, timingSafeEqual } from 'node:crypto'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { GatewayError } from '../errors.js'
import type { Identity } from '../identity.js'
import { isNavigationOf } from '../navigation.js'
import { PROBLEM_HEADERS } from '../ops/hygiene.js'
import { redactUrl } from '../ops/logging.js'
import type { CheckedRequest, Checker, CheckVerdict } from './check.js'
import { forbiddenError, unauthenticatedError } from './guard.js'
import type { IdentityAssertions } from './identity-assertion.js'
import { identityHeaderValues, isHeaderSafeToken, lowerNames, stripCookies } from './identity-headers.js'
import { isHostValue } from './match.js'
import { normalizePath } from './path.js'

// Envoy's ext_authz over HTTP (envoy.extensions.filters.http.ext_authz.v3.HttpService), as Envoy
// Gateway (SecurityPolicy extAuth.http), Istio (envoyExtAuthzHttp) and the Gateway API
// ExternalAuth filter (GEP-1494, protocol HTTP) call it. From Envoy's ext_authz.proto and
// docs/root/configuration/http/http_filters/ext_authz_filter.rst:
// - The check request is the client's request without its body: the client's method, the path
//   `path_prefix` + the client's path and query, the client's Host (:authority). Only Host,
//   Method, Path, Content-Length and Authorization are sent unless the operator allow-lists more
//   (allowed_headers): Cookie, Accept, Sec-Fetch-Mode and X-Forwarded-Proto for this gateway.
//   So the request checked is taken from the request line and Host alone; a client's
//   X-Forwarded-* or X-Original-* (which Envoy passes when allow-listed) changes nothing
//   (oauth2-proxy GHSA-7x63-xv5r-3p2x). X-Forwarded-Proto only picks the scheme of the URL a
//   browser returns to after signing in, which the redirect validation bounds anyway.
// - "On authorization response status HTTP 200 OK, the filter will allow traffic to the
//   upstream"; any other status denies, and Envoy answers the client with that status, the body
//   and (unless allowed_client_headers says otherwise) the headers. Exactly 200 allows here, never
//   202 (oauth2-proxy#2832: Envoy reads its 202 as a denial).
// - On 200, the headers named in allowed_upstream_headers are set on the upstream request
//   (overwriting the client's), `x-envoy-auth-headers-to-remove` names request headers Envoy
//   removes, and allowed_client_headers_on_success are added to the client's response (Set-Cookie
//   of a refreshed session).
// - A 5xx is an error, for which Envoy answers `status_on_error` (403 by default) unless
//   failure_mode_allow: the check fails closed. A provider failure is 503 decision_unavailable.
// A browser navigation without a session gets a 302 to the gateway's redirect endpoint, which
// starts the transaction (its cookie, PKCE, state and nonce, and any pushed authorization
// request) under the sign-in rate limit: a check never calls the provider to start a sign-in.

export interface ExtAuthzOptions {
  checker: Checker
  /** forwardAuth.extAuthzPath: below /api/v1/openid, without a trailing slash. */
  path: string
  publicUrl: string
  /** A cookie the upstream must not receive (a gateway cookie's name or a gateway seal as its value). */
  isGatewayCookie: (name: string, value: string) => boolean
  /** The assertion header and its signer, when keys are configured. */
  assertions: { header: string; signer: IdentityAssertions | undefined }
}

/** The answer of an allow, whichever way it travels (the HTTP headers here, gRPC's OkHttpResponse). */
export interface ExtAuthzAllow {
  /** Headers to set on the upstream request, lower-case names. */
  set: Array<[string, string]>
  /** Request headers the upstream must not receive. */
  remove: string[]
}

/**
 * The gRPC service (server.extAuthzGrpcPort) asks this route through app.inject, so that gRPC and
 * HTTP checks are one code path. Its requests carry this process's random token, which no other
 * caller can know, and only with it is the upstream the caller names (Envoy's
 * context_extensions) read, and the allow answered as JSON for the service to encode.
 */
export const GRPC_CHECK_HEADER = 'x-openid-gateway-grpc-check'
export const GRPC_UPSTREAM_HEADER = 'x-openid-gateway-grpc-upstream'
export const GRPC_CHECK_TOKEN = randomBytes(32).toString('base64url')
const TOKEN_BYTES = Buffer.from(GRPC_CHECK_TOKEN)

function fromGrpcService(req: FastifyRequest): boolean {
  const value = req.headers[GRPC_CHECK_HEADER]
  if (typeof value !== 'string' || value.length !== GRPC_CHECK_TOKEN.length) return false
  return timingSafeEqual(Buffer.from(value), TOKEN_BYTES)
}

/** The header Envoy reads the list of request headers to remove from. */
export const HEADERS_TO_REMOVE = 'x-envoy-auth-headers-to-remove'

/**
 * The identity an allowed request carries to its upstream: the same identity headers, access token
 * and assertion the proxy would set, the client's cookies without the gateway's, and every
 * identity header the gateway did not set named for removal, so that a client's forged copy never
 * reaches the upstream (Envoy overwrites only the headers the answer carries).
 */
export async function allowHeaders(
  verdict: Extract<CheckVerdict, { outcome: 'pass' }>,
  cookieHeader: string | undefined,
  options: Pick<ExtAuthzOptions, 'isGatewayCookie' | 'assertions'>,
): Promise<ExtAuthzAllow> {
  const { upstream, identity } = verdict
  const set: Array<[string, string]> = []
  const names: string[] = Object.values(lowerNames(upstream.identityHeaders))
  if (identity !== null) {
    for (const [name, value] of Object.entries(identityHeaderValues(identity.claims, upstream.identityHeaders, identity.issuer))) set.push([name, value])
    await addCredentials(set, upstream, identity, options.assertions)
  }
  const { header, signer } = options.assertions
  if (signer !== undefined) names.push(header.toLowerCase())
  // As on the proxy: an upstream that takes Authorization as the gateway's token never gets the
  // client's own (an `alg: none` JWT on a public path would otherwise pass for one).
  if (upstream.forwardAccessToken) names.push('authorization')
  const remove = names.filter((name) => !set.some(([setName]) => setName === name))
  if (cookieHeader !== undefined) {
    const kept = stripCookies(cookieHeader, options.isGatewayCookie)
    if (kept === undefined) remove.push('cookie')
    else if (kept !== cookieHeader) set.push(['cookie', kept])
  }
  return { set, remove }
}

async function addCredentials(
  set: Array<[string, string]>,
  upstream: Extract<CheckVerdict, { outcome: 'pass' }>['upstream'],
  identity: Identity,
  assertions: ExtAuthzOptions['assertions'],
): Promise<void> {
  if (upstream.forwardAccessToken && isHeaderSafeToken(identity.accessToken)) set.push(['authorization', `Bearer ${identity.accessToken}`])
  if (upstream.identityAssertion && assertions.signer !== undefined) {
    set.push([assertions.header.toLowerCase(), await assertions.signer.assertion(identity.claims, upstream.name, identity.issuer)])
  }
}

/**
 * The request Envoy asks about: this request's method and Host, and its path after the prefix,
 * read from the request line as it arrived (the router saw it normalized: a `..` in the client's
 * path must not climb out of the prefix before it is read).
 */
function checkedRequest(req: FastifyRequest, prefix: string, defaultScheme: string): CheckedRequest {
  const raw = req.originalUrl
  if (!raw.startsWith(`${prefix}/`)) throw new GatewayError('bad_request', `the check's path must be ${prefix} followed by the request's path`)
  const target = normalizePath(raw.slice(prefix.length))
  if (target === null) throw new GatewayError('bad_request', 'the path checked is not a valid request path')
  // Canonicalised by the app's rewriteUrl; read as sent, never X-Forwarded-Host.
  const host = req.headers.host
  if (host === undefined || !isHostValue(host)) throw new GatewayError('bad_request', 'the check must carry the request\'s Host')
  const proto = req.headers['x-forwarded-proto']
  const scheme = proto === 'https' || proto === 'http' ? proto : defaultScheme
  return { method: req.method, host, scheme, target }
}

/** The 5xx of a check is Envoy's error case: one code, which says it could not be decided. */
function unavailable(err: unknown): unknown {
  if (!(err instanceof GatewayError) || err.status < 500 || err.code === 'session_store_unavailable' || err.code === 'not_ready') return err
  return new GatewayError('decision_unavailable', 'the request cannot be checked now: the provider is not answering', { extensions: { cause: err.code } })
}

export async function extAuthzRoutes(app: FastifyInstance, options: ExtAuthzOptions): Promise<void> {
  const { checker, path: prefix } = options
  const defaultScheme = new URL(options.publicUrl).protocol.slice(0, -1)

  // Envoy sends no body (Content-Length 0) unless with_request_body is configured; whatever comes
  // is not read, whatever its Content-Type (a POST's `application/json` with no body would
  // otherwise be a 400 from the JSON parser, and the client's media type is not ours to refuse).
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined))
  // Never cacheable: the answer depends on the caller's cookies and on time.
  app.addHook('onSend', (_req, reply, payload, done) => {
    reply.headers(PROBLEM_HEADERS)
    done(null, payload)
  })

  app.all(`${prefix}/*`, async (req: FastifyRequest, reply: FastifyReply) => {
    let checked: CheckedRequest
    try {
      checked = checkedRequest(req, prefix, defaultScheme)
    } catch (err) {
      reply.logFields = { extAuthz: { outcome: 'bad_request', reason: (err as Error).message } }
      throw err
    }
    const logged = { method: checked.method, url: redactUrl(`${checked.scheme}://${checked.host}${checked.target.path}${checked.target.search}`) }
    const viaGrpc = fromGrpcService(req)
    const named = viaGrpc ? req.headers[GRPC_UPSTREAM_HEADER] : undefined
    let verdict: CheckVerdict
    try {
      verdict = await checker.check(req, reply, checked, typeof named === 'string' ? named : undefined)
    } catch (err) {
      reply.logFields = { extAuthz: { ...logged, outcome: err instanceof GatewayError ? err.code : 'error' } }
      throw unavailable(err)
    }
    reply.logFields = { extAuthz: { ...logged, upstream: verdict.upstream.name, outcome: verdict.outcome } }
    switch (verdict.outcome) {
      case 'unauthenticated':
        if (isNavigationOf(checked.method, req.headers)) return reply.redirect(checker.signInUrl(checked, verdict.refreshable), 302)
        throw unauthenticatedError(verdict.expired, checker.signInUrl(checked, false))
      case 'forbidden':
        throw forbiddenError()
      case 'pass': {
        req.identity = verdict.identity
        const allow = await allowHeaders(verdict, req.headers.cookie, options)
        if (viaGrpc) return reply.code(200).send(allow)
        for (const [name, value] of allow.set) reply.header(name, value)
        if (allow.remove.length > 0) reply.header(HEADERS_TO_REMOVE, allow.remove.join(','))
        return reply.code(200).send()
      }
    }
  })
}
