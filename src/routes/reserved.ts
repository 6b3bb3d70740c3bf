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

/** The methods a callback accepts (routes/sign-in.ts), as its Allow header says them. */
const CALLBACK_ALLOW = 'GET, HEAD, POST'

export interface ReservedOptions {
  /**
   * The callback paths outside SIGN_IN_PATH (oidc/providers.ts Providers.ownCallbackPaths): reserved like
   * SIGN_IN_PATH, with the path itself and everything below it; the callback's own methods there
   * are routes/sign-in.ts's.
   */
  ownCallbackPaths?: readonly string[]
}

async function reservedRoutes(app: FastifyInstance, options: ReservedOptions): Promise<void> {
  const own = new Set(options.ownCallbackPaths ?? [])
  const handler = async (req: FastifyRequest): Promise<never> => {
    const q = req.url.indexOf('?')
    const path = q === -1 ? req.url : req.url.slice(0, q)
    const allow = own.has(path) ? CALLBACK_ALLOW : ALLOW.get(path)
    if (allow !== undefined) throw new GatewayError('method_not_allowed', `this endpoint accepts ${allow}`, { headers: { allow } })
    throw new GatewayError('not_found', 'no such sign-in endpoint')
  }
  app.all(SIGN_IN_PATH, handler)
  app.all(`${SIGN_IN_PATH}/*`, handler)
  // The callback's methods at its own path are the sign-in routes'; every other one is refused
  // here, so the proxy's catch-all never hands the path to an upstream.
  const others = app.supportedMethods.filter((m) => !['GET', 'HEAD', 'POST'].includes(m))
  for (const path of own) {
    app.route({ method: others, url: path, handler })
    app.all(`${path}/*`, handler)
  }
}

// Registered on the root instance rather than in a scope of its own (what fastify-plugin does),
// so the root's hooks reach its catch-all routes as they reach the endpoints.
Object.assign(reservedRoutes, { [Symbol.for('skip-override')]: true })

export { reservedRoutes }
