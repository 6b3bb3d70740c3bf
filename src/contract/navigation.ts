import type { FastifyRequest } from 'fastify'

// The contract's test for "a browser navigation": a top-level page load, which is sent to sign in
// (proxy guard) or shown an HTML error page (app error handler) rather than answered with JSON.
// One test for both, so a request never gets a redirect from one and JSON from the other.

export function isNavigation(req: FastifyRequest): boolean {
  return isNavigationOf(req.method, req.headers)
}

/**
 * The same test for a request the gateway is asked about (the check endpoints): its method is the
 * original request's, its headers are the client's that the caller copied onto the check.
 */
export function isNavigationOf(method: string, headers: FastifyRequest['headers']): boolean {
  if (method !== 'GET' && method !== 'HEAD') return false
  if (headers['sec-fetch-mode'] === 'navigate') return true
  const accept = headers.accept
  return accept !== undefined && accept.includes('text/html')
}
