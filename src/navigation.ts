import type { FastifyRequest } from 'fastify'

// The contract's test for "a browser navigation": a top-level page load, which is sent to sign in
// (proxy guard) or shown an HTML error page (app error handler) rather than answered with JSON.
// One test for both, so a request never gets a redirect from one and JSON from the other.

export function isNavigation(req: FastifyRequest): boolean {
  if (req.method !== 'GET' && req.method !== 'HEAD') return false
  if (req.headers['sec-fetch-mode'] === 'navigate') return true
  const accept = req.headers.accept
  return accept !== undefined && accept.includes('text/html')
}
