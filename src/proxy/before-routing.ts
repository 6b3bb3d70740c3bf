import type { IncomingMessage } from 'node:http'
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { GatewayError } from '../contract/errors.js'
import type { CheckRoute } from '../contract/endpoints.js'
import type { UpstreamConfig } from '../options/types.js'
import { createRoutingAmbiguityCheck } from '../access/ambiguity.js'
import { isCheckRoute } from '../access/checker.js'
import { canonicalHost, repeatsHost } from '../access/match.js'
import { isInNormalForm, normalizePath } from '../access/path.js'

// What every request goes through before the router picks a route: one spelling of its target.
// Every decision after it (the router's host constraints, public
// paths, allow rules, the path and X-Forwarded-Host the upstream sees) reads that one spelling,
// so `/public/../admin` or `/%61dmin` cannot reach a protected route unchecked (RFC 3986 6.2.2
// syntax-based normalization, access/path.ts), and a request the gateway cannot read for certain
// is refused (400) rather than routed by a guess:
// - a second Host line (RFC 9110 7.2: a request has one Host; two readers may take different ones);
// - a path that does not normalize;
// - a check endpoint's target that is not already in normal form (access/checker.ts isCheckRoute:
//   normalized first, `<Envoy's prefix>/../redirect` would reach the sign-in endpoint, whose 200
//   Envoy takes for an allow);
// - a path that reads as another route in another case or without trailing dots or spaces
//   (access/ambiguity.ts).

/** Marks a raw request whose target was refused before routing, with the reason (answered 400 by `refuseUnreadable`). */
const kRefusedTarget = Symbol('openid-gateway.refusedTarget')

type MarkedRequest = IncomingMessage & { [kRefusedTarget]?: string }

/** The two halves of reading a request's target, both built from the check routes and the upstreams. */
export interface RequestTarget {
  /**
   * Fastify's `rewriteUrl`: the canonical Host and the normalized path every route sees. A target
   * that cannot be read for certain is routed to `/` and marked; `refuseUnreadable` answers it 400.
   * A check endpoint is recognized on the raw target and never rewritten.
   */
  readonly rewriteUrl: (raw: IncomingMessage) => string
  /**
   * The first `onRequest` hook after the server span's: the refusal of a target `rewriteUrl`
   * marked or that reads as another route. It takes a callback: an async hook costs a promise and a
   * microtask per request for work that never waits.
   */
  readonly refuseUnreadable: (req: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void
}

export function requestTarget(checkRoutes: readonly CheckRoute[], upstreams: readonly UpstreamConfig[]): RequestTarget {
  const isAmbiguous = createRoutingAmbiguityCheck(upstreams)
  return {
    rewriteUrl: (raw) => {
      // One spelling of the host too: the router's host constraints, the guard and the
      // X-Forwarded-Host the gateway sets all read this header.
      const host = raw.headers.host
      if (host !== undefined) raw.headers.host = canonicalHost(host)
      const url = raw.url ?? '/'
      const normalized = normalizePath(url)
      const refused = repeatsHost(raw.rawHeaders)
        ? 'the request has more than one Host header'
        : normalized === null
          ? 'the request path is malformed'
          : isCheckRoute(url, checkRoutes) && !isInNormalForm(url, normalized)
            ? "a check's request path must be in normal form"
            : undefined
      if (normalized === null || refused !== undefined) {
        ;(raw as MarkedRequest)[kRefusedTarget] = refused
        return '/'
      }
      return normalized.path + normalized.search
    },
    refuseUnreadable: (req, _reply, done) => {
      const refused = (req.raw as MarkedRequest)[kRefusedTarget]
      if (refused !== undefined) return done(new GatewayError('bad_request', refused))
      const q = req.url.indexOf('?')
      if (isAmbiguous(req.headers.host ?? '', q === -1 ? req.url : req.url.slice(0, q), req.method)) {
        return done(new GatewayError('bad_request', 'the request path reads as another route in another case or without trailing dots or spaces'))
      }
      done()
    },
  }
}
