import type { FastifyReply, FastifyRequest } from 'fastify'
import type { UpstreamConfig } from '../options/types.js'
import { refreshPath, signInPath } from '../contract/endpoints.js'
import { PROBLEM_HEADERS } from '../ops/response-headers.js'
import { isNavigation } from '../contract/navigation.js'
import type { BearerChallengeParams } from '../access/bearer-challenge.js'
import { resourceMetadataUrl } from '../access/resource-metadata.js'
import {
  createAccessDecision,
  forbiddenError,
  isPreflight,
  logForbidden,
  logStepUp,
  signInLocation,
  stepUpError,
  unauthenticatedError,
  type GuardDeps,
} from '../access/decision.js'

// The auth guard of one upstream: the proxy's answer to the access decision (decision.ts), before
// anything is proxied: pass with the identity, a redirect to sign in for a page load, else the
// contract's 401 or 403. Runs on every proxied request (and on WebSocket upgrades).

function pathOf(url: string): string {
  const q = url.indexOf('?')
  return q === -1 ? url : url.slice(0, q)
}

export function createGuard(upstream: UpstreamConfig, deps: GuardDeps) {
  const decide = createAccessDecision(upstream, deps.authenticate, deps.stepUp)
  const publicHost = new URL(deps.publicUrl).host

  // On the public host the path alone (the browser stays on its origin); on another host (match.hosts)
  // the public origin's endpoint, with the page's absolute URL to come back to.
  function navigateTo(req: FastifyRequest, refreshable: boolean): string {
    const target = req.url
    const host = req.headers.host
    if (host === undefined || host === publicHost) return refreshable ? refreshPath(target) : signInPath(target)
    return signInLocation(deps, { scheme: req.protocol, host, target }, refreshable)
  }

  function refuse(req: FastifyRequest, reply: FastifyReply, expired: boolean, refreshable: boolean): FastifyReply {
    const target = req.url
    if (isNavigation(req)) {
      // With cookies.credentialsPath: /api/v1/openid the refresh token is not sent here; the
      // refresh endpoint can read it, and falls back to signing in again.
      return reply.headers(PROBLEM_HEADERS).redirect(navigateTo(req, refreshable), 302)
    }
    throw unauthenticatedError(expired, deps.publicUrl + signInPath(target), challengeOf(req))
  }

  // RFC 9728 5.1: where this upstream's metadata is, when it publishes some.
  const challengeAt = (host: string | undefined): BearerChallengeParams => {
    const url = resourceMetadataUrl(upstream, deps.publicUrl, host)
    return url === undefined ? {} : { resource_metadata: url }
  }
  // Without match.hosts the document's URL is on the public origin whatever the request's host:
  // worked out once, not on every 401.
  const fixedChallenge = upstream.match.hosts === undefined ? challengeAt(undefined) : undefined
  const challengeOf = (req: FastifyRequest): BearerChallengeParams => fixedChallenge ?? challengeAt(req.headers.host)

  return async function guard(req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    req.identity = null
    const decision = await decide(req, reply, { path: pathOf(req.url), preflight: isPreflight(req.method, req.headers) })
    switch (decision.outcome) {
      case 'pass':
        req.identity = decision.identity
        return undefined
      case 'unauthenticated':
        return refuse(req, reply, decision.expired, decision.refreshable)
      case 'forbidden':
        // Established, though refused: the request line names who was refused (ops/access-log.ts).
        req.identity = decision.identity
        logForbidden(req, upstream, decision)
        throw forbiddenError(decision.rulePath)
      case 'step_up':
        req.identity = decision.identity
        logStepUp(req, upstream, decision)
        // A page load signs in again: the redirect endpoint asks for what the target's rule needs
        // and the callback upgrades this session. A Bearer token cannot be upgraded that way.
        if (!decision.bearer && isNavigation(req)) return reply.headers(PROBLEM_HEADERS).redirect(navigateTo(req, false), 302)
        throw stepUpError(decision.requirement, deps.publicUrl + signInPath(req.url), challengeOf(req))
    }
  }
}
