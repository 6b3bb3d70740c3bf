import type { FastifyInstance, FastifyRequest, HTTPMethods } from 'fastify'
import { GatewayError } from '../errors.js'
import { SIGN_IN_PATH } from '../paths.js'

// Every path under /api/v1/openid belongs to the gateway and is never proxied: a known endpoint
// with another method is a 405 naming the methods its routes accept, anything else a 404. The
// allowed methods are read from the router, so a new endpoint needs no entry here.

const METHODS: HTTPMethods[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']
/** The catch-all routes below: they accept everything, and are not endpoints. */
const CATCH_ALL = new Set([SIGN_IN_PATH, `${SIGN_IN_PATH}/*`])

export async function reservedRoutes(app: FastifyInstance): Promise<void> {
  const handler = async (req: FastifyRequest): Promise<never> => {
    const q = req.url.indexOf('?')
    const path = q === -1 ? req.url : req.url.slice(0, q)
    const allowed = CATCH_ALL.has(path) ? [] : METHODS.filter((method) => app.hasRoute({ url: path, method }))
    if (allowed.length > 0) {
      const allow = allowed.join(', ')
      throw new GatewayError('method_not_allowed', `this endpoint accepts ${allow}`, { headers: { allow } })
    }
    throw new GatewayError('not_found', 'no such sign-in endpoint')
  }
  app.all(SIGN_IN_PATH, handler)
  app.all(`${SIGN_IN_PATH}/*`, handler)
}
