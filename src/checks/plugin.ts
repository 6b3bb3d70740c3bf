import type { FastifyInstance } from 'fastify'
import type { CheckRoute } from '../contract/endpoints.js'
import type { GatewayConfig } from '../options/types.js'
import type { Checker } from '../access/checker.js'
import type { AccessLog } from '../ops/access-log.js'
import type { GatewayMetrics } from '../ops/metrics.js'
import type { TrustCheck } from '../upstream/forwarded.js'
import type { GatewayCookies } from '../session/cookies.js'
import type { CheckDialect } from './dialect.js'
import { CHECK_DIALECTS } from './dialects.js'
import { createEnvoyGrpcCheck, type EnvoyGrpcCheck } from './envoy-grpc-check.js'
import { createEnvoyDecision } from './envoy-http.js'
import { createCheckPipeline, type ProblemAnswerer } from './pipeline.js'

// Every check endpoint of one configuration, wired in one place: each dialect of dialects.ts
// registered on the app at its route, and Envoy ext_authz over gRPC built on Envoy's pipeline for
// the process's gRPC listener (runtime/envoy-grpc-listener.ts), which serves the running
// configuration's check. Each answers from the one Checker (access/checker.ts Checker.answer).

export interface CheckEndpointsOptions {
  checker: Checker
  /** The gateway's cookies, read and expired by the gRPC check. */
  cookies: GatewayCookies
  isTrustedProxy: TrustCheck
  publicUrl: string
  /** The refusal's answer the app's error handler gives (pages/error-page.ts). */
  answerProblem: ProblemAnswerer
  /** Where the gRPC check's metric and request line go (the HTTP checks' through ops/request-outcome.ts, as every request's). */
  metrics: Pick<GatewayMetrics, 'observeRequest'>
  accessLog: AccessLog
  /** The dialects spoken (CHECK_DIALECTS), and their routes in `config`. */
  dialects: readonly CheckDialect[]
  config: Pick<GatewayConfig, 'envoy'>
}

/** Where each dialect is asked in `config`: the targets routed to a check on their raw spelling. */
export function checkRoutes(config: Pick<GatewayConfig, 'envoy'>, dialects: readonly CheckDialect[] = CHECK_DIALECTS): CheckRoute[] {
  return dialects.map((dialect) => dialect.route(config))
}

/** Registers the HTTP check endpoints on `app` and returns the gRPC check of this configuration. */
export async function registerCheckEndpoints(app: FastifyInstance, options: CheckEndpointsOptions): Promise<EnvoyGrpcCheck> {
  const { checker, cookies, publicUrl } = options
  const envoy = createCheckPipeline({ decide: createEnvoyDecision(checker), answerProblem: options.answerProblem })
  const context = { checker, isTrustedProxy: options.isTrustedProxy, publicUrl, envoy }
  for (const dialect of options.dialects) await dialect.register(app, context, dialect.route(options.config))
  return createEnvoyGrpcCheck({
    pipeline: envoy,
    publicUrl,
    cookies,
    serializeCookie: (name, value, cookieOptions) => app.serializeCookie(name, value, cookieOptions),
    log: app.log,
    metrics: options.metrics,
    accessLog: options.accessLog,
  })
}
