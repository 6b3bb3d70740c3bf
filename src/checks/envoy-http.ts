import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { GatewayError } from '../contract/errors.js'
import { PROBLEM_HEADERS } from '../ops/response-headers.js'
import { checkedTarget, type CheckedRequest, type Checker } from '../access/checker.js'
import type { Exit } from '../access/answer.js'
import { isHostValue } from '../access/match.js'
import type { CheckOutcome, CheckPipeline, CheckTransport, EnvoyDecide } from './pipeline.js'
import type { CheckDialect } from './dialect.js'

// Envoy's ext_authz over HTTP (envoy.extensions.filters.http.ext_authz.v3.HttpService), as Envoy
// Gateway (SecurityPolicy extAuth.http), Istio (envoyExtAuthzHttp) and the Gateway API
// ExternalAuth filter (GEP-1494, protocol HTTP) call it. From envoyproxy/envoy ext_authz.proto and
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
//
// The gRPC service (server.extAuthzGrpcPort) asks the same decision through the same pipeline
// (pipeline.ts), without an HTTP request: envoy-grpc-check.ts is its adapter, as envoyHttpRoutes
// here is the HTTP one. Both answer as ENVOY_EXIT: a page load can be sent to sign in (Envoy hands
// a denial to the client as it is), and an allow carries the headers Envoy sets on the upstream
// request and the names it removes (access/answer.ts, upstream/credentials.ts).

/** The header Envoy reads the list of request headers to remove from. */
export const HEADERS_TO_REMOVE = 'x-envoy-auth-headers-to-remove'

/** What Envoy can do with an answer, over HTTP and gRPC alike. */
export const ENVOY_EXIT: Exit = { redirects: true, carrier: 'edge' }

/** The scheme the browser used: X-Forwarded-Proto (HTTP) or `scheme` (gRPC) when it says http(s), else the public URL's. */
export function schemeOf(said: unknown, defaultScheme: string): string {
  return said === 'https' || said === 'http' ? said : defaultScheme
}

/**
 * The request checked: the client's method, Host (never X-Forwarded-Host; already canonical:
 * the app's rewriteUrl made it so over HTTP, the gRPC check does) and request target.
 */
export function checkedOf(method: string, host: string | undefined, rawTarget: string, scheme: string): CheckedRequest {
  const target = checkedTarget(rawTarget, 'the path checked')
  if (host === undefined || !isHostValue(host)) throw new GatewayError('bad_request', "the check must carry the request's Host")
  return { method, host, scheme, target }
}

/**
 * The request Envoy asks about over HTTP: this request's method and Host, and its path after the
 * prefix, read from the request line as it arrived (the app routes a check on its raw target, and
 * a target out of normal form never reaches here over HTTP; the gRPC check has no router).
 */
function checkedRequest(req: FastifyRequest, prefix: string, defaultScheme: string): CheckedRequest {
  const raw = req.originalUrl
  if (!raw.startsWith(`${prefix}/`)) throw new GatewayError('bad_request', `the check's path must be ${prefix} followed by the request's path`)
  return checkedOf(req.method, req.headers.host, raw.slice(prefix.length), schemeOf(req.headers['x-forwarded-proto'], defaultScheme))
}

/** The 5xx of a check is Envoy's error case: one code, which says it could not be decided. */
function unavailable(err: GatewayError): GatewayError {
  if (err.status < 500 || err.code === 'session_store_unavailable' || err.code === 'not_ready') return err
  return new GatewayError('decision_unavailable', 'the request cannot be checked now: the provider is not answering', { extensions: { cause: err.code } })
}

/** Envoy's decision over both transports: the Checker's answer at ENVOY_EXIT, a 5xx refusal said as Envoy's error case. */
export function createEnvoyDecision(checker: Checker): EnvoyDecide {
  return async function decide(req, reply, checked, upstreamName) {
    const answer = await checker.answer(req, reply, checked, ENVOY_EXIT, upstreamName)
    const logged: Record<string, unknown> = { method: checked.method, url: checker.loggedUrl(checked) }
    if (answer.upstream !== undefined) logged.upstream = answer.upstream.name
    logged.outcome = answer.outcome
    return { answer: answer.kind === 'refuse' ? { ...answer, error: unavailable(answer.error) } : answer, logged }
  }
}

export interface EnvoyHttpRouteOptions {
  pipeline: CheckPipeline
  /** envoy.pathPrefix: below /api/v1/openid, without a trailing slash. */
  path: string
  publicUrl: string
}

export async function envoyHttpRoutes(app: FastifyInstance, options: EnvoyHttpRouteOptions): Promise<void> {
  const { pipeline, path: prefix } = options
  const defaultScheme = new URL(options.publicUrl).protocol.slice(0, -1)
  // The pipeline's HTTP adapter: the request is the check call (its cookies read and former ones
  // expired by session/cookies.ts readRequestCookies), the reply takes the cookies a refresh sets, and
  // ops/request-outcome.ts records the request line and metric from `logFields`, `problemCode` and `identity`.
  const http: CheckTransport<FastifyRequest, FastifyRequest, FastifyReply, FastifyReply> = {
    describe: (req) => checkedRequest(req, prefix, defaultScheme),
    answer: answerHttp,
  }

  // Envoy sends no body (Content-Length 0) unless with_request_body is configured; whatever comes
  // is not read, whatever its Content-Type (a POST's `application/json` with no body would
  // otherwise be a 400 from the JSON parser, and the client's media type is not ours to refuse).
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined))

  app.all(`${prefix}/*`, (req: FastifyRequest, reply: FastifyReply) => pipeline.run(http, req, req, reply, undefined))
}

/** Envoy's HTTP answer: exactly 200 allows, with the headers to set and to remove. */
function answerHttp(outcome: CheckOutcome, logged: Record<string, unknown>, _req: FastifyRequest, reply: FastifyReply): FastifyReply {
  reply.logFields = { extAuthz: logged }
  // Never cacheable: the answer depends on the caller's cookies and on time. A refusal's
  // rendering carries the same (problem+json, or a page with its own CSP).
  switch (outcome.kind) {
    case 'sign_in':
      return reply.headers(PROBLEM_HEADERS).redirect(outcome.location, 302)
    case 'refused':
      reply.problemCode = outcome.code
      return reply.code(outcome.answer.status).headers(outcome.answer.headers).send(outcome.answer.body)
    case 'pass':
      reply.headers(PROBLEM_HEADERS)
      for (const [name, value] of outcome.headers.set) reply.header(name, value)
      if (outcome.headers.remove.length > 0) reply.header(HEADERS_TO_REMOVE, outcome.headers.remove.join(','))
      return reply.code(200).send()
  }
}

/** Envoy's ext_authz over HTTP: below its path prefix, the request checked. */
export const ENVOY_HTTP: CheckDialect = {
  name: 'envoy-http',
  route: (config) => ({ path: config.envoy.pathPrefix, match: 'prefix' }),
  async register(app, { envoy, publicUrl }, route) {
    await app.register(envoyHttpRoutes, { pipeline: envoy, path: route.path, publicUrl })
  },
}
