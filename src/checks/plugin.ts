import type { FastifyInstance } from 'fastify'
import type { CheckRoute } from '../contract/endpoints.js'
import type { GatewayConfig } from '../options/types.js'
import type { Checker } from '../access/checker.js'
import type { AccessLog } from '../ops/access-log.js'
import type { GatewayMetrics } from '../ops/metrics.js'
import type { TrustCheck } from '../ops/trusted-peers.js'
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
  /** The dialects spoken, each with its route in this configuration (routedDialects). */
  dialects: readonly RoutedDialect[]
}

/** A dialect and where it is asked in one configuration. */
export interface RoutedDialect {
  readonly dialect: CheckDialect
  readonly route: CheckRoute
}

/** Where each dialect is asked in `config`: the router routes these targets to their check on their raw spelling. */
export function routedDialects(config: Pick<GatewayConfig, 'envoy'>, dialects: readonly CheckDialect[] = CHECK_DIALECTS): RoutedDialect[] {
  return dialects.map((dialect) => ({ dialect, route: dialect.route(config) }))
}

/** Registers the HTTP check endpoints on `app` and returns the gRPC check of this configuration. */
export async function registerCheckEndpoints(app: FastifyInstance, options: CheckEndpointsOptions): Promise<EnvoyGrpcCheck> {
  const { checker, cookies, publicUrl } = options
  const envoy = createCheckPipeline({ decide: createEnvoyDecision(checker), answerProblem: options.answerProblem })
  const context = { checker, isTrustedProxy: options.isTrustedProxy, publicUrl, envoy }
  for (const { dialect, route } of options.dialects) await dialect.register(app, context, route)
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
