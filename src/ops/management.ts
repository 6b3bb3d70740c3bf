import Fastify, { type FastifyInstance } from 'fastify'

// The management listener: probes and metrics on a port of their own (server.managementPort),
// never routed through the public port, so the Service or ingress that exposes the gateway does
// not expose them. Kubernetes probes and Prometheus reach it on the pod's address.

/** One readiness condition; `ready` never throws (a failure is `false`). */
export interface ReadinessCheck {
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
  checks: readonly ReadinessCheck[]
  /** True once shutdown has begun: /readyz answers 503 at once, so traffic stops first. */
  draining(): boolean
  /** The running configuration's file hash and load time (GET /config); changes with each reload. */
  config?: () => { hash: string; loadedAt: string }
}

const NO_STORE = { 'cache-control': 'no-store' }

export async function buildManagement(options: ManagementOptions): Promise<FastifyInstance> {
  const app = Fastify({ logger: false })

  // Alive: the event loop answers. Nothing it depends on may make it fail, or Kubernetes would
  // restart a gateway that is merely waiting for its provider.
  app.get('/healthz', async (_req, reply) => reply.headers(NO_STORE).send({ status: 'ok' }))

  app.get('/readyz', async (_req, reply) => {
    if (options.draining()) return reply.code(503).headers(NO_STORE).send({ status: 'draining' })
    const results = await Promise.all(options.checks.map(async (check) => [check.name, await check.ready()] as const))
    const failing = results.filter(([, ok]) => !ok).map(([name]) => name)
    const details = Object.fromEntries(
      options.checks.flatMap((check) => (check.detail === undefined ? [] : [[check.name, check.detail()] as const])).filter(([, d]) => d !== undefined),
    )
    const extra = Object.keys(details).length === 0 ? {} : { details }
    return reply
      .code(failing.length === 0 ? 200 : 503)
      .headers(NO_STORE)
      .send(failing.length === 0 ? { status: 'ready', ...extra } : { status: 'not_ready', failing, ...extra })
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
