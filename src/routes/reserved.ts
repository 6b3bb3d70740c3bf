import type { FastifyInstance, FastifyRequest, RouteOptions } from 'fastify'
import { GatewayError } from '../contract/errors.js'
import { SIGN_IN_PATH, isGatewayPath } from '../contract/endpoints.js'

// Every path under /api/v1/openid belongs to the gateway and is never proxied: a known endpoint
// with another method is a 405 naming the methods its routes accept, anything else a 404. The
// endpoints are recorded as they are registered (onRoute), so a new endpoint needs no entry here,
// and a request path is only ever compared with them as a string: handed to the router as a
// route pattern, `/api/v1/openid/**` or `/api/v1/openid/:x(` made it throw (a 500, and an
// "unsafe regex" in the log).

/** The catch-all routes below: they accept everything, and are not endpoints. */
const CATCH_ALL = new Set([SIGN_IN_PATH, `${SIGN_IN_PATH}/*`])

async function reservedRoutes(app: FastifyInstance): Promise<void> {
  const endpoints = new Map<string, Set<string>>()
  app.addHook('onRoute', (route: RouteOptions) => {
    if (!isGatewayPath(route.url) || CATCH_ALL.has(route.url)) return
    const methods = endpoints.get(route.url) ?? new Set<string>()
    for (const method of Array.isArray(route.method) ? route.method : [route.method]) methods.add(method)
    endpoints.set(route.url, methods)
  })

  const handler = async (req: FastifyRequest): Promise<never> => {
    const q = req.url.indexOf('?')
    const methods = endpoints.get(q === -1 ? req.url : req.url.slice(0, q))
    if (methods !== undefined) {
      const allow = [...methods].join(', ')
      throw new GatewayError('method_not_allowed', `this endpoint accepts ${allow}`, { headers: { allow } })
    }
    throw new GatewayError('not_found', 'no such sign-in endpoint')
  }
  app.all(SIGN_IN_PATH, handler)
  app.all(`${SIGN_IN_PATH}/*`, handler)
}

// Registered on the root instance rather than in a scope of its own (what fastify-plugin does),
// so its onRoute hook sees the endpoints that other plugins register after it.
Object.assign(reservedRoutes, { [Symbol.for('skip-override')]: true })

export { reservedRoutes }
