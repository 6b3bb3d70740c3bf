import diagnostics from 'node:diagnostics_channel'
import type { FastifyInstance } from 'fastify'
import t from 'tap'
import { stringify } from 'yaml'
import { parseConfig } from '#src/config/load'
import { ENDPOINT_LIST, isGatewayPath, SIGN_IN_PATH } from '#src/contract/endpoints'
import { buildStandaloneApp } from '#src/runtime/process-state'
import { freePort } from '../fixtures/stack.ts'

// The endpoints table (contract/endpoints.ts) is what the metrics, the rate limit and the
// reserved paths' 405s read: an endpoint registered without a row, or a row no route serves,
// would be missed by all of them.

/** The routes each Fastify instance created while `build` runs registers (onRoute), with their methods. */
async function routesRegistered<T>(build: () => Promise<T>): Promise<{ built: T; routes: Map<string, string[]> }> {
  const routes = new Map<string, string[]>()
  // Published as an instance is created, before any plugin runs (Fastify's Hooks reference,
  // Diagnostics Channel Hooks): the hook sees every route the app registers.
  const onInit = (message: unknown): void => {
    ;(message as { fastify: FastifyInstance }).fastify.addHook('onRoute', (route) => {
      const methods = routes.get(route.url) ?? []
      routes.set(route.url, [...methods, ...(Array.isArray(route.method) ? route.method : [route.method])].sort())
    })
  }
  const channel = diagnostics.channel('fastify.initialization')
  channel.subscribe(onInit)
  try {
    return { built: await build(), routes }
  } finally {
    channel.unsubscribe(onInit)
  }
}

t.test('the routes at and below SIGN_IN_PATH are exactly the reserved rows of the endpoints table', async (t) => {
  const port = await freePort()
  const config = parseConfig(
    stringify({
      server: { host: '127.0.0.1', port, publicUrl: `http://127.0.0.1:${port}` },
      // Never reached: the routes are registered whether or not the provider's metadata loads.
      provider: { issuer: `http://127.0.0.1:${await freePort()}`, clientId: 'c', clientSecret: 's', allowInsecureHttp: true },
      cookies: { secrets: ['x'.repeat(32)], secure: false },
      upstreams: [{ name: 'app', target: 'http://127.0.0.1:1' }],
      log: { level: 'silent' },
    }),
    {},
  )
  const { built: app, routes: registered } = await routesRegistered(() => buildStandaloneApp(config))
  t.teardown(() => app.close())

  // Not endpoints: the reserved paths' catch-alls (routes/reserved.ts) and the ext_authz prefix,
  // which the configuration chooses (config/cross-key-rules.ts keeps it off the endpoints' segments).
  const notEndpoints = new Set([SIGN_IN_PATH, `${SIGN_IN_PATH}/*`, `${config.envoy.pathPrefix}/*`])
  const served = [...registered].filter(([path]) => isGatewayPath(path) && !notEndpoints.has(path)).sort(([a], [b]) => a.localeCompare(b))
  const table = ENDPOINT_LIST.filter((e) => e.reserved)
    .map((e): [string, string[]] => [e.path, e.methods.flatMap((m) => (m === 'GET' ? ['GET', 'HEAD'] : [m])).sort()])
    .sort(([a], [b]) => a.localeCompare(b))
  t.strictSame(served, table)
  for (const path of notEndpoints) t.ok(registered.has(path), `${path} is registered`)
})

t.test('a row is reserved exactly when its path is at or below SIGN_IN_PATH', async (t) => {
  for (const e of ENDPOINT_LIST) t.equal(e.reserved, isGatewayPath(e.path), e.path)
})
