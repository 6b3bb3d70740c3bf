import type { FastifyInstance } from 'fastify'
import type { Checker } from '../access/checker.js'
import type { AccessLog } from '../ops/access-log.js'
import type { GatewayMetrics } from '../ops/metrics.js'
import type { IdentityAssertions } from '../proxy/identity-assertion.js'
import type { IdentityHeaderUnion } from '../proxy/header-policy.js'
import type { TransactionTokenMinting } from '../proxy/transaction-token.js'
import type { TokenExchanger } from '../proxy/token-exchange.js'
import type { GatewayCookies } from '../session/cookies.js'
import { createEnvoyGrpcCheck, type EnvoyGrpcCheck } from './envoy-grpc-check.js'
import { createExtAuthzDecision, extAuthzRoutes } from './envoy-http.js'
import { forwardAuthRoutes } from './forward-auth.js'
import { createCheckPipeline, type ProblemAnswerer } from './pipeline.js'

// Every check endpoint of one configuration, wired in one place: forward-auth (ingress-nginx,
// Traefik) and Envoy ext_authz over HTTP registered on the app, and Envoy ext_authz over gRPC
// built on the same pipeline for the process's gRPC listener (runtime/envoy-grpc-listener.ts),
// which serves the running configuration's check. Each takes its verdict from the one Checker
// (access/checker.ts); Envoy's two transports share one pipeline (pipeline.ts).

export interface CheckEndpointsOptions {
  checker: Checker
  /** Exchanges the user's token for an upstream's (upstreams[].tokenExchange). */
  exchanger: TokenExchanger
  /** The gateway's cookies: which ones the upstream must not receive, read and expired by the gRPC check. */
  cookies: GatewayCookies
  /** The assertion header and its signer, when keys are configured. */
  assertions: { header: string; signer: IdentityAssertions | undefined }
  /** Every identity header name of the configuration, named for removal on every allow. */
  identityHeaders: IdentityHeaderUnion
  /** Transaction Tokens, when an upstream asks for them (upstreams[].transactionTokens). */
  transactionTokens?: TransactionTokenMinting | undefined
  /** server.trustedProxies' test: forward-auth's Transaction Tokens name the client the ingress names only when it is trusted. */
  isTrustedProxy: (address: string | undefined) => boolean
  /** forwardAuth.extAuthzPath. */
  extAuthzPath: string
  publicUrl: string
  /** The refusal's answer the app's error handler gives (pages/error-page.ts). */
  answerProblem: ProblemAnswerer
  /** Where the gRPC check's metric and request line go (the HTTP checks' through ops/request-outcome.ts, as every request's). */
  metrics: Pick<GatewayMetrics, 'observeRequest'>
  accessLog: AccessLog
}

/** Registers the HTTP check endpoints on `app` and returns the gRPC check of this configuration. */
export async function registerCheckEndpoints(app: FastifyInstance, options: CheckEndpointsOptions): Promise<EnvoyGrpcCheck> {
  const { checker, exchanger, cookies, publicUrl } = options
  await app.register(forwardAuthRoutes, { checker, exchanger, transactionTokens: options.transactionTokens, isTrustedProxy: options.isTrustedProxy })
  const decide = createExtAuthzDecision({
    checker,
    exchanger,
    isGatewayCookie: cookies.isGatewayCookie,
    assertions: options.assertions,
    identityHeaders: options.identityHeaders,
    transactionTokens: options.transactionTokens,
  })
  const pipeline = createCheckPipeline({ decide, answerProblem: options.answerProblem })
  await app.register(extAuthzRoutes, { pipeline, path: options.extAuthzPath, publicUrl })
  return createEnvoyGrpcCheck({
    pipeline,
    publicUrl,
    cookies,
    serializeCookie: (name, value, cookieOptions) => app.serializeCookie(name, value, cookieOptions),
    log: app.log,
    metrics: options.metrics,
    accessLog: options.accessLog,
  })
}
