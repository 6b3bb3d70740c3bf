import type { FastifyBaseLogger } from 'fastify'
import type { EnvoyGrpcCheck } from '../checks/envoy-grpc-check.js'
import { startEnvoyGrpcServer, type EnvoyGrpcServer } from '../checks/envoy-grpc/server.js'
import { readiness, type ReadinessProbe } from '../ops/management.js'

// The process's Envoy gRPC listener (server.extAuthzGrpcPort), across reloads: one gRPC server for
// the process's life that asks the running app at each call. A Check is the running app's
// envoyGrpcCheck (checks/envoy-grpc-check.ts, the Envoy HTTP route's pipeline without an HTTP
// request), so a reload applies to gRPC checks at once. A health Check is /readyz's verdict
// (ops/management.ts readiness) over the running app's probes, asked when the call arrives, so
// that Envoy's health checker and the management listener never disagree: grpc/grpc
// doc/health-checking.md has the server answer its status as it is, "" being the server as a
// whole, and grpc-proto health.proto asks Check to be side-effect free (the probes only look) and
// lets the client declare a server unhealthy that does not answer within its deadline, as a
// /readyz that does not answer is.

/** What the listener asks at each call: the gateway as it runs now (runtime/live.ts LiveGateway). */
export interface RunningGateway {
  /** The app serving new requests; a reload replaces it. */
  readonly app: {
    readonly envoyGrpcCheck: EnvoyGrpcCheck
    readonly management: { readonly probes: readonly ReadinessProbe[] }
  }
}

export interface EnvoyGrpcListenerOptions {
  host: string
  port: number
  gateway: RunningGateway
  /** True while the process drains: the health service then says NOT_SERVING, as /readyz answers 503. */
  draining?: () => boolean
  log: Pick<FastifyBaseLogger, 'info' | 'warn' | 'error'>
}

export async function startEnvoyGrpcListener(options: EnvoyGrpcListenerOptions): Promise<EnvoyGrpcServer> {
  const { gateway, draining = () => false } = options
  return startEnvoyGrpcServer({
    host: options.host,
    port: options.port,
    check: (input) => gateway.app.envoyGrpcCheck(input),
    ready: async () => (await readiness(gateway.app.management.probes, draining())).status === 'ready',
    log: options.log,
  })
}
