import type { FastifyInstance, FastifyRequest } from 'fastify'
import { GatewayError } from '../contract/errors.js'
import { ENDPOINT_LIST, SIGN_IN_PATH } from '../contract/endpoints.js'

// Every path at and below SIGN_IN_PATH belongs to the gateway and is never proxied: a reserved
// endpoint of contract/endpoints.ts with another method is a 405 naming the methods it accepts,
// anything else a 404. A request path is only ever compared with the table's paths as a string:
// handed to the router as a route pattern, `${SIGN_IN_PATH}/**` or `${SIGN_IN_PATH}/:x(` made it
// throw (a 500, and an "unsafe regex" in the log).

/** The Allow header of each reserved endpoint: its methods, HEAD with GET (the router serves it). */
const ALLOW: ReadonlyMap<string, string> = new Map(
  ENDPOINT_LIST.filter((e) => e.reserved).map((e) => [e.path, e.methods.flatMap((m) => (m === 'GET' ? ['GET', 'HEAD'] : [m])).join(', ')]),
)

async function reservedRoutes(app: FastifyInstance): Promise<void> {
  const handler = async (req: FastifyRequest): Promise<never> => {
    const q = req.url.indexOf('?')
    const allow = ALLOW.get(q === -1 ? req.url : req.url.slice(0, q))
    if (allow !== undefined) throw new GatewayError('method_not_allowed', `this endpoint accepts ${allow}`, { headers: { allow } })
    throw new GatewayError('not_found', 'no such sign-in endpoint')
  }
  app.all(SIGN_IN_PATH, handler)
  app.all(`${SIGN_IN_PATH}/*`, handler)
}

// Registered on the root instance rather than in a scope of its own (what fastify-plugin does),
// so the root's hooks reach its catch-all routes as they reach the endpoints.
Object.assign(reservedRoutes, { [Symbol.for('skip-override')]: true })

export { reservedRoutes }
