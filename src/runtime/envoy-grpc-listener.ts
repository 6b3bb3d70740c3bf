import type { FastifyBaseLogger } from 'fastify'
import type { EnvoyGrpcCheck } from '../checks/envoy-grpc-check.js'
import { startEnvoyGrpcServer, type EnvoyGrpcServer } from '../checks/envoy-grpc/server.js'
import type { ReadinessProbe } from '../ops/management.js'

// The process's Envoy gRPC listener (server.extAuthzGrpcPort), across reloads: one gRPC server for
// the process's life, whose every Check is the check of the configuration running at that moment
// (checks/envoy-grpc-check.ts, the Envoy HTTP route's pipeline without an HTTP request), looked up
// per call, so a reload applies to gRPC checks at once. Its health service reports the gateway's
// readiness.

export interface EnvoyGrpcListenerOptions {
  host: string
  port: number
  /** The running configuration's gRPC check, looked up per call (a reload swaps it). */
  check: () => EnvoyGrpcCheck
  /** The gateway's readiness probes (those of /readyz). */
  probes: () => readonly ReadinessProbe[]
  /** True while the process drains: the health service then says NOT_SERVING. */
  draining?: () => boolean
  log: Pick<FastifyBaseLogger, 'info' | 'warn' | 'error'>
}

/**
 * Starts the listener. Its health service reports the gateway's readiness, looked at once a second
 * (the checks are asynchronous, a health answer is not).
 */
export async function startEnvoyGrpcListener(options: EnvoyGrpcListenerOptions): Promise<EnvoyGrpcServer> {
  const draining = options.draining ?? (() => false)
  let ready = false
  const look = async (): Promise<void> => {
    ready = !draining() && (await Promise.all(options.probes().map(async (probe) => probe.ready()))).every(Boolean)
  }
  await look()
  setInterval(() => void look(), 1000).unref()
  return startEnvoyGrpcServer({
    host: options.host,
    port: options.port,
    check: (input) => options.check()(input),
    ready: () => ready && !draining(),
    log: options.log,
  })
}
