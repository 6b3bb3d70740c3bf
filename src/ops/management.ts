import Fastify, { type FastifyInstance } from 'fastify'

// The management listener: probes and metrics on a port of their own (server.managementPort),
// never routed through the public port, so the Service or ingress that exposes the gateway does
// not expose them. Kubernetes probes and Prometheus reach it on the pod's address.

/**
 * One readiness condition (a probe of what the gateway depends on); `ready` never throws (a
 * failure is `false`).
 */
export interface ReadinessProbe {
  name: string
  ready(): Promise<boolean> | boolean
  /** What /readyz shows of it besides pass or fail (the Shared Signals streams' status). */
  detail?(): unknown
}

/** A prom-client registry: the app's own, or the primary's aggregate of its workers' (server.workers). */
export interface MetricsSource {
  contentType: string
  metrics(): Promise<string>
}

export interface ManagementOptions {
  metrics: MetricsSource
  probes: readonly ReadinessProbe[]
  /** True once shutdown has begun: /readyz answers 503 at once, so traffic stops first. */
  draining(): boolean
  /** The running configuration's file hash and load time (GET /config); changes with each reload. */
  config?: () => { hash: string; loadedAt: string }
}

/** Whether the gateway can decide requests now, and if not why: what /readyz answers. */
export type Readiness =
  | { status: 'draining' }
  | { status: 'ready'; details?: Record<string, unknown> }
  | { status: 'not_ready'; failing: string[]; details?: Record<string, unknown> }

/**
 * The gateway's readiness at the moment of the call: draining, or every probe asked now. The one
 * verdict of /readyz, of a worker's answer to its primary (cli.ts) and of the Envoy gRPC health
 * service (runtime/envoy-grpc-listener.ts), so that they cannot disagree.
 */
export async function readiness(probes: readonly ReadinessProbe[], draining: boolean): Promise<Readiness> {
  if (draining) return { status: 'draining' }
  const results = await Promise.all(probes.map(async (probe) => [probe.name, await probe.ready()] as const))
  const failing = results.filter(([, ok]) => !ok).map(([name]) => name)
  const details = Object.fromEntries(
    probes.flatMap((probe) => (probe.detail === undefined ? [] : [[probe.name, probe.detail()] as const])).filter(([, d]) => d !== undefined),
  )
  const extra = Object.keys(details).length === 0 ? {} : { details }
  return failing.length === 0 ? { status: 'ready', ...extra } : { status: 'not_ready', failing, ...extra }
}

const NO_STORE = { 'cache-control': 'no-store' }

export async function buildManagement(options: ManagementOptions): Promise<FastifyInstance> {
  const app = Fastify({ logger: false })

  // Alive: the event loop answers. Nothing it depends on may make it fail, or Kubernetes would
  // restart a gateway that is merely waiting for its provider.
  app.get('/healthz', async (_req, reply) => reply.headers(NO_STORE).send({ status: 'ok' }))

  app.get('/readyz', async (_req, reply) => {
    const answer = await readiness(options.probes, options.draining())
    return reply
      .code(answer.status === 'ready' ? 200 : 503)
      .headers(NO_STORE)
      .send(answer)
  })

  // Which configuration runs, to tell whether a reload took: compare with `sha256sum` of the file.
  const { config } = options
  if (config !== undefined) app.get('/config', async (_req, reply) => reply.headers(NO_STORE).send(config()))

  app.get('/metrics', async (_req, reply) => {
    const body = await options.metrics.metrics()
    return reply.headers(NO_STORE).type(options.metrics.contentType).send(body)
  })

  return app
}
