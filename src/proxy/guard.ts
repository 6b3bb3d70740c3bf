import type { FastifyReply, FastifyRequest } from 'fastify'
import type { UpstreamConfig } from '../options/types.js'
import { refreshPath, signInPath } from '../contract/endpoints.js'
import { PROBLEM_HEADERS } from '../ops/response-headers.js'
import { isNavigation } from '../contract/navigation.js'
import type { BearerChallengeParams } from '../access/bearer-challenge.js'
import { challengeScope, resourceMetadataUrl } from '../access/resource-metadata.js'
import {
  offersSignIn,
  forbiddenError,
  isPreflight,
  logForbidden,
  logStepUp,
  signInLocation,
  stepUpError,
  unauthenticatedError,
  type AccessDecisions,
  type SignInOrigin,
  type UpstreamAccess,
} from '../access/decision.js'

// The auth guard of one upstream (ProxyGuard.admit): the proxy's answer to the access decision
// (access/decision.ts UpstreamAccess.decide), before anything is proxied: pass with the identity,
// a redirect to sign in for a page load, else the contract's 401 (RFC 6750 3.1, RFC 9470 3 for a
// step-up, with RFC 9728 5.1's `resource_metadata`) or 403. Runs on every proxied request (and
// on WebSocket upgrades).

/** What the guard of an upstream needs: the configuration's access decisions, and where browsers sign in. */
export interface GuardDeps extends SignInOrigin {
  access: AccessDecisions
}

function pathOf(url: string): string {
  const q = url.indexOf('?')
  return q === -1 ? url : url.slice(0, q)
}

export class ProxyGuard {
  readonly #upstream: UpstreamConfig
  readonly #access: UpstreamAccess
  readonly #deps: GuardDeps
  readonly #publicHost: string
  /**
   * Without match.hosts the metadata document's URL is on the public origin whatever the
   * request's host: worked out once, not on every 401.
   */
  readonly #fixedChallenge: BearerChallengeParams | undefined
  /**
   * `tokenAudience: resource`: no session signs in, so a page load is answered with the 401 too (a
   * sign-in redirect would come back to the same 401 for ever).
   */
  readonly #bearerOnly: boolean

  constructor(upstream: UpstreamConfig, deps: GuardDeps) {
    this.#upstream = upstream
    this.#access = deps.access.of(upstream)
    this.#deps = deps
    this.#publicHost = new URL(deps.publicUrl).host
    this.#fixedChallenge = upstream.match.hosts === undefined ? this.#challengeAt(undefined) : undefined
    this.#bearerOnly = !offersSignIn(upstream)
  }

  /** Decides `req` before anything is proxied: undefined to proxy it (`req.identity` set), else the reply sent. */
  async admit(req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    req.identity = null
    const upstream = this.#upstream
    const decision = await this.#access.decide(req, reply, { path: pathOf(req.url), preflight: isPreflight(req.method, req.headers), host: req.headers.host })
    switch (decision.outcome) {
      case 'pass':
        req.identity = decision.identity
        return undefined
      case 'unauthenticated':
        return this.#refuse(req, reply, decision.expired, decision.refreshable)
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
        if (!decision.bearer && isNavigation(req)) return reply.headers(PROBLEM_HEADERS).redirect(this.#navigateTo(req, false), 302)
        throw stepUpError(decision.requirement, this.#deps.publicUrl + signInPath(req.url), this.#challengeOf(req))
    }
  }

  // On the public host the path alone (the browser stays on its origin); on another host (match.hosts)
  // the public origin's endpoint, with the page's absolute URL to come back to.
  #navigateTo(req: FastifyRequest, refreshable: boolean): string {
    const target = req.url
    const host = req.headers.host
    if (host === undefined || host === this.#publicHost) return refreshable ? refreshPath(target) : signInPath(target)
    return signInLocation(this.#deps, { scheme: req.protocol, host, target }, refreshable)
  }

  #refuse(req: FastifyRequest, reply: FastifyReply, expired: boolean, refreshable: boolean): FastifyReply {
    const target = req.url
    if (!this.#bearerOnly && isNavigation(req)) {
      // With cookies.credentialsPath: /api/v1/openid the refresh token is not sent here; the
      // refresh endpoint can read it, and falls back to signing in again.
      return reply.headers(PROBLEM_HEADERS).redirect(this.#navigateTo(req, refreshable), 302)
    }
    throw unauthenticatedError(expired, this.#deps.publicUrl + signInPath(target), this.#challengeOf(req))
  }

  // RFC 9728 5.1: where this upstream's metadata is, when it publishes some (and the scopes to ask for, challengeScope).
  #challengeAt(host: string | undefined): BearerChallengeParams {
    const url = resourceMetadataUrl(this.#upstream, this.#deps.publicUrl, host)
    return url === undefined ? {} : { resource_metadata: url, scope: challengeScope(this.#upstream) }
  }

  #challengeOf(req: FastifyRequest): BearerChallengeParams {
    return this.#fixedChallenge ?? this.#challengeAt(req.headers.host)
  }
}
