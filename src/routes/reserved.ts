import type { FastifyInstance } from 'fastify'
import { GatewayError } from '../errors.js'

// Every path under /api/v1/openid belongs to the gateway and is never proxied: a known endpoint
// with another method is a 405 naming the allowed ones, anything else a 404.

const ALLOWED: Record<string, string> = {
  '/api/v1/openid/redirect': 'GET, HEAD',
  '/api/v1/openid/callback': 'GET, HEAD',
  '/api/v1/openid/refresh': 'GET, HEAD',
  '/api/v1/openid/logout': 'DELETE',
  '/api/v1/openid/auth': 'GET, HEAD',
}

export async function reservedRoutes(app: FastifyInstance): Promise<void> {
  const handler = async (req: { url: string }): Promise<never> => {
    const q = req.url.indexOf('?')
    const path = q === -1 ? req.url : req.url.slice(0, q)
    const allow = ALLOWED[path]
    if (allow !== undefined) {
      throw new GatewayError('method_not_allowed', `this endpoint accepts ${allow}`, { headers: { allow } })
    }
    throw new GatewayError('not_found', 'no such sign-in endpoint')
  }
  app.all('/api/v1/openid', handler)
  app.all('/api/v1/openid/*', handler)
}
