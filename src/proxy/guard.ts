import type { FastifyReply, FastifyRequest } from 'fastify'
import type { UpstreamConfig } from '../config/types.js'
import { GatewayError } from '../errors.js'
import { signInPath } from '../routes/sign-in.js'
import { createAllowPolicy } from './allow.js'
import type { Authenticator, Identity } from './authenticate.js'
import { createPublicPathMatcher } from './public-paths.js'

// The auth guard of one upstream: decides, before anything is proxied, whether the request is
// signed in, may pass, and with which identity. Runs on every proxied request (and on WebSocket
// upgrades), so it opens the session cookie once and calls the provider only to refresh.

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the guard when the request is signed in; identity headers are built from it. */
    identity: Identity | null
  }
}

export interface GuardDeps {
  authenticate: Authenticator
  publicUrl: string
}

/** A top-level browser navigation, which is sent to sign in rather than answered with 401. */
function isNavigation(req: FastifyRequest): boolean {
  if (req.method !== 'GET' && req.method !== 'HEAD') return false
  if (req.headers['sec-fetch-mode'] === 'navigate') return true
  const accept = req.headers.accept
  return accept !== undefined && accept.includes('text/html')
}

function pathOf(url: string): string {
  const q = url.indexOf('?')
  return q === -1 ? url : url.slice(0, q)
}

export function createGuard(upstream: UpstreamConfig, deps: GuardDeps) {
  const isPublic = createPublicPathMatcher(upstream.publicPaths)
  const isAllowed = createAllowPolicy(upstream.allow)
  const { authenticate } = deps

  function refuse(req: FastifyRequest, reply: FastifyReply, expired: boolean): FastifyReply {
    const target = req.url
    if (isNavigation(req)) {
      // An expired sign-in goes through the refresh endpoint, which can read the refresh token
      // (its cookie is not sent here) and falls back to signing in again.
      const location = expired ? `/api/v1/openid/refresh?redirectAfter=${encodeURIComponent(target)}` : signInPath(target)
      return reply.header('cache-control', 'no-store').redirect(location, 302)
    }
    throw new GatewayError('unauthenticated', expired ? 'the sign-in has expired' : 'sign in first', {
      headers: { 'www-authenticate': expired ? 'Bearer error="invalid_token"' : 'Bearer' },
      extensions: { signInUrl: deps.publicUrl + signInPath(target) },
    })
  }

  return async function guard(req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    req.identity = null
    if (upstream.auth === 'none' || isPublic(pathOf(req.url))) return undefined
    if (upstream.allowPreflight && req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined) {
      return undefined
    }
    const identity = await authenticate(req, reply)
    if (identity === undefined || identity === 'expired') {
      return upstream.auth === 'optional' ? undefined : refuse(req, reply, identity === 'expired')
    }
    if (!isAllowed(identity.claims)) throw new GatewayError('forbidden', 'your account is not allowed to use this application')
    req.identity = identity
    return undefined
  }
}
