import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { GatewayError } from '../contract/errors.js'
import type { Identity } from '../contract/identity.js'
import { isNavigationOf } from '../contract/navigation.js'
import { PROBLEM_HEADERS } from '../ops/response-headers.js'
import { checkedTarget, type CheckedRequest, type Checker, type CheckVerdict } from '../access/checker.js'
import { forbiddenError, offersSignIn, stepUpError, unauthenticatedError } from '../access/decision.js'
import type { IdentityAssertions } from '../proxy/identity-assertion.js'
import type { TokenExchanger } from '../proxy/token-exchange.js'
import { TXN_TOKEN_HEADER, type TransactionTokenMinting } from '../proxy/transaction-token.js'
import {
  REQUEST_OVERRIDE_HEADER_NAMES,
  claimHeadersOf,
  identityHeaderValues,
  identityHeadersToRemove,
  isHeaderSafeToken,
  stripCookies,
  type IdentityHeaderUnion,
} from '../proxy/header-policy.js'
import { isHostValue } from '../access/match.js'
import type { CheckOutcome, CheckPipeline, CheckTransport, ExtAuthzAllow, ExtAuthzDecide } from './pipeline.js'

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
//
// The gRPC service (server.extAuthzGrpcPort) asks the same decision through the same pipeline
// (pipeline.ts), without an HTTP request: envoy-grpc-check.ts is its adapter, as extAuthzRoutes
// here is the HTTP one.

export interface ExtAuthzOptions {
  checker: Checker
  /** A cookie the upstream must not receive (a gateway cookie's name or a gateway seal as its value). */
  isGatewayCookie: (name: string, value: string) => boolean
  /** The assertion header and its signer, when keys are configured. */
  assertions: { header: string; signer: IdentityAssertions | undefined }
  /** Exchanges the user's token for an upstream's (upstreams[].tokenExchange). */
  exchanger: TokenExchanger
  /** Every identity header name of the configuration, named for removal on every allow. */
  identityHeaders: IdentityHeaderUnion
  /** The minter of Transaction Tokens and each upstream's policy, when an upstream asks for them. */
  transactionTokens?: TransactionTokenMinting | undefined
}

/** The header Envoy reads the list of request headers to remove from. */
export const HEADERS_TO_REMOVE = 'x-envoy-auth-headers-to-remove'

/**
 * The identity an allowed request carries to its upstream: the same identity headers, access token
 * and assertion the proxy would set, the client's cookies without the gateway's, and every other
 * identity header of the configuration named for removal, whichever upstream uses it and in every
 * spelling the check received (header-policy.ts identityHeadersToRemove), so that a client's forged
 * copy never reaches the upstream (Envoy overwrites only the headers the answer carries). The
 * request-target and method overrides the proxy strips are named for removal too: the upstream must
 * serve the path and method that were checked, not the ones an X-Original-URL or
 * X-HTTP-Method-Override names. `received` is the request's headers as the check sees them.
 */
export async function allowHeaders(
  verdict: Extract<CheckVerdict, { outcome: 'pass' }>,
  received: Readonly<Record<string, string | string[] | undefined>>,
  options: Pick<ExtAuthzOptions, 'isGatewayCookie' | 'assertions' | 'exchanger' | 'identityHeaders' | 'transactionTokens'>,
  checked?: CheckedRequest,
): Promise<ExtAuthzAllow> {
  const { upstream, identity } = verdict
  const set: Array<[string, string]> = []
  if (identity !== null) {
    const values = identityHeaderValues(identity.claims, upstream.identityHeaders, identity.issuer, identity.mapping, claimHeadersOf(upstream.claimHeaders))
    for (const [name, value] of Object.entries(values)) set.push([name, value])
    await addCredentials(set, upstream, identity, options)
    // Set, so Envoy overwrites the client's copy (allowed_upstream_headers must list it); on an
    // allow without one, the identity header union names it for removal below. Envoy's check
    // does not see the client's address (its HTTP check gets only allow-listed headers, and the
    // gRPC adapter reads no peer), so rctx carries no req_ip here.
    const txn = options.transactionTokens
    const policy = txn?.policyOf(upstream.name)
    if (txn !== undefined && policy !== undefined && checked !== undefined) {
      set.push([TXN_TOKEN_HEADER, await txn.minter.mint(policy, { identity, method: checked.method, path: checked.target.path, transport: checked.scheme })])
    }
  }
  const setNames = new Set<string>()
  for (const [name] of set) setNames.add(name)
  const remove = identityHeadersToRemove(options.identityHeaders, received, setNames)
  // As on the proxy: an upstream that takes Authorization as the gateway's token never gets the
  // client's own (an `alg: none` JWT on a public path would otherwise pass for one).
  if ((upstream.forwardAccessToken || upstream.tokenExchange !== undefined) && !setNames.has('authorization')) remove.push('authorization')
  remove.push(...REQUEST_OVERRIDE_HEADER_NAMES)
  const cookieHeader = received.cookie
  if (typeof cookieHeader === 'string') {
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
  { assertions, exchanger }: Pick<ExtAuthzOptions, 'assertions' | 'exchanger'>,
): Promise<void> {
  if (upstream.forwardAccessToken && isHeaderSafeToken(identity.accessToken)) set.push(['authorization', `Bearer ${identity.accessToken}`])
  // RFC 8693: the upstream's own token, set by Envoy over the client's Authorization.
  if (upstream.tokenExchange !== undefined) set.push(['authorization', `Bearer ${await exchanger.token(upstream, identity)}`])
  if (upstream.identityAssertion && assertions.signer !== undefined) {
    set.push([assertions.header.toLowerCase(), await assertions.signer.assertion(identity, upstream.name, claimHeadersOf(upstream.claimHeaders))])
  }
}

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

export function createExtAuthzDecision(options: ExtAuthzOptions): ExtAuthzDecide {
  const { checker } = options
  return async function decide(req, reply, checked, upstreamName) {
    const logged: Record<string, unknown> = {
      method: checked.method,
      url: checker.loggedUrl(checked),
    }
    let verdict: CheckVerdict
    try {
      verdict = await checker.check(req, reply, checked, upstreamName)
    } catch (err) {
      if (!(err instanceof GatewayError)) throw err
      logged.outcome = err.code
      return { result: { kind: 'refused', error: unavailable(err) }, logged }
    }
    logged.upstream = verdict.upstream.name
    logged.outcome = verdict.outcome
    switch (verdict.outcome) {
      case 'unauthenticated':
        if (offersSignIn(verdict.upstream) && isNavigationOf(checked.method, req.headers))
          return { result: { kind: 'sign_in', location: checker.signInUrl(checked, verdict.refreshable) }, logged }
        return {
          result: {
            kind: 'refused',
            error: unauthenticatedError(verdict.expired, checker.signInUrl(checked, false), checker.challenge(verdict.upstream, checked)),
          },
          logged,
        }
      case 'forbidden':
        return { result: { kind: 'refused', error: forbiddenError(verdict.rulePath), identity: verdict.identity }, logged }
      case 'step_up':
        if (!verdict.bearer && isNavigationOf(checked.method, req.headers))
          return { result: { kind: 'sign_in', location: checker.signInUrl(checked, false) }, logged }
        return {
          result: {
            kind: 'refused',
            error: stepUpError(verdict.requirement, checker.signInUrl(checked, false), checker.challenge(verdict.upstream, checked)),
            identity: verdict.identity,
          },
          logged,
        }
      case 'pass': {
        let allow: ExtAuthzAllow
        try {
          allow = await allowHeaders(verdict, req.headers, options, checked)
        } catch (err) {
          // A refused token exchange (403) or a provider down during it (an error: Envoy fails closed).
          if (!(err instanceof GatewayError)) throw err
          logged.outcome = err.code
          return { result: { kind: 'refused', error: unavailable(err), identity: verdict.identity }, logged }
        }
        return { result: { kind: 'allow', identity: verdict.identity, allow }, logged }
      }
    }
  }
}

export interface ExtAuthzRouteOptions {
  pipeline: CheckPipeline
  /** forwardAuth.extAuthzPath: below /api/v1/openid, without a trailing slash. */
  path: string
  publicUrl: string
}

export async function extAuthzRoutes(app: FastifyInstance, options: ExtAuthzRouteOptions): Promise<void> {
  const { pipeline, path: prefix } = options
  const defaultScheme = new URL(options.publicUrl).protocol.slice(0, -1)
  // The pipeline's HTTP adapter: the request is the check call (its cookies read and former ones
  // expired by proxy/before-routing.ts), the reply takes the cookies a refresh sets, and
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
    case 'allow':
      reply.headers(PROBLEM_HEADERS)
      for (const [name, value] of outcome.allow.set) reply.header(name, value)
      if (outcome.allow.remove.length > 0) reply.header(HEADERS_TO_REMOVE, outcome.allow.remove.join(','))
      return reply.code(200).send()
  }
}
