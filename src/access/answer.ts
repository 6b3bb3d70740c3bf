// The answer to an access verdict, the one rendering every exit writes out: the proxy's guard,
// forward-auth, Envoy's checks over HTTP and gRPC, and any check dialect added beside them. As
// Pomerium's evaluator returns its verdict with the headers to set and remove and one renderer
// writes it, a verdict here becomes one of three answers, shaped by what the exit can do:
// - `pass`, with what the upstream receives (upstream/credentials.ts), put where the exit carries
//   it: on the upstream request (the proxy), in the answer for an edge that applies it (Envoy:
//   headers to set and to remove), or in X-Auth-Request-* for an ingress that copies them;
// - `sign_in`, a 302 to the redirect endpoint, only for a browser's page load (navigation.ts), only
//   where the exit's answer reaches the browser (not ingress-nginx's auth-url, which sends the
//   browser to auth-signin itself) and only where a sign-in can help (decision.ts offersSignIn; a
//   step-up of a Bearer token cannot be upgraded by signing in);
// - `refuse`, with the problem: the contract's 401 (RFC 6750 3.1, with RFC 9728 5.1's
//   `resource_metadata` where the upstream publishes metadata), RFC 9470 3's step-up 401, the
//   `allow` rules' 403, or the GatewayError a check or a credential raised (a refused token
//   exchange is a 403, its provider down a 502), never a pass.
// It reads no Fastify request, so every exit, gRPC included, answers alike.

import { GatewayError } from '../contract/errors.js'
import type { Identity } from '../contract/identity.js'
import { refreshPath, signInPath } from '../contract/endpoints.js'
import { isNavigationOf } from '../contract/navigation.js'
import type { UpstreamConfig } from '../options/types.js'
import type { CredentialRequest, UpstreamCredentials, UpstreamHeaders } from '../upstream/credentials.js'
import type { BearerChallengeParams } from '../contract/bearer-challenge.js'
import { forbiddenError, offersSignIn, signInLocation, stepUpError, unauthenticatedError, type SignInOrigin, type Verdict } from './decision.js'
import { challengeScope, resourceMetadataUrl } from './resource-metadata.js'

/** What an exit can do with an answer. */
export interface Exit {
  /** Whether its answer reaches the browser, so that a page load can be sent to sign in with a 302. */
  readonly redirects: boolean
  /**
   * Where the credentials go: `proxy`, the gateway forwards the request itself (it strips the
   * client's copies by pattern, upstream/credentials.ts strippedNames); `edge`, an edge applies the
   * answer's headers to set and to remove (Envoy); `ingress`, an ingress copies X-Auth-Request-*
   * from the answer (forward-auth).
   */
  readonly carrier: 'proxy' | 'edge' | 'ingress'
}

/** The request an answer is for, as the exit established it. */
export interface AnsweredRequest extends CredentialRequest {
  /** The client's headers (a page load is told by them; an edge's removals are named as received). */
  headers: Readonly<Record<string, string | string[] | undefined>>
  /** The scheme a browser comes back on after signing in. */
  scheme: string
  /** The host the client asked, canonical; undefined only for a proxied request without Host. */
  host: string | undefined
  /** The target as the client asked it: path and query. */
  target: string
}

/** An answer; `outcome` is the verdict's outcome or a refusal's problem code, for the request line. */
export type Answer =
  | { kind: 'pass'; outcome: 'pass'; upstream: UpstreamConfig; identity: Identity | null; headers: UpstreamHeaders }
  | { kind: 'sign_in'; outcome: string; upstream: UpstreamConfig; identity: Identity | null; location: string }
  | { kind: 'refuse'; outcome: string; upstream: UpstreamConfig | undefined; identity: Identity | null; error: GatewayError }

/** A refusal by a GatewayError thrown before or after the verdict. */
export function refusal(error: GatewayError, upstream?: UpstreamConfig, identity: Identity | null = null): Extract<Answer, { kind: 'refuse' }> {
  return { kind: 'refuse', outcome: error.code, upstream, identity, error }
}

/** A credential that could not be had (a GatewayError) refuses the pass; anything else is a bug, thrown. */
function refusedPass(err: unknown, upstream: UpstreamConfig, identity: Identity | null): Answer {
  if (!(err instanceof GatewayError)) throw err
  return refusal(err, upstream, identity)
}

/** The proxy strips the client's copies itself, and an ingress removes what it copies: no names to remove. */
function withoutRemovals(set: Array<[string, string]>): UpstreamHeaders {
  return { set, remove: [] }
}

const NO_HEADERS: UpstreamHeaders = Object.freeze({
  set: Object.freeze([]) as unknown as Array<[string, string]>,
  remove: Object.freeze([]) as unknown as string[],
})

export interface AnswersOptions extends SignInOrigin {
  credentials: UpstreamCredentials
}

/** The answers of one configuration: the sign-in URLs, the Bearer challenges and the credentials of each upstream. */
export class Answers {
  readonly #origin: SignInOrigin
  readonly #publicHost: string
  readonly #credentials: UpstreamCredentials
  /** The challenge of an upstream without match.hosts does not depend on the request's host: worked out once. */
  readonly #fixedChallenges = new WeakMap<UpstreamConfig, BearerChallengeParams>()

  constructor(options: AnswersOptions) {
    this.#origin = { publicUrl: options.publicUrl, validateRedirectAfter: options.validateRedirectAfter }
    this.#publicHost = new URL(options.publicUrl).host
    this.#credentials = options.credentials
  }

  /**
   * The answer to `verdict` on `request` at `exit`: at once unless a credential must be asked for
   * or signed (a promise then). Throws only what is not a GatewayError (a bug).
   */
  answer(verdict: Verdict, request: AnsweredRequest, exit: Exit): Answer | Promise<Answer> {
    const { upstream } = verdict
    switch (verdict.outcome) {
      case 'pass':
        return this.#pass(upstream, verdict.identity, request, exit)
      case 'unauthenticated':
        // With cookies.credentialsPath the refresh token is not sent here; the refresh endpoint can
        // read it, and falls back to signing in again.
        if (exit.redirects && offersSignIn(upstream) && isNavigationOf(request.method, request.headers))
          return { kind: 'sign_in', outcome: verdict.outcome, upstream, identity: null, location: this.#signInRedirect(request, exit, verdict.refreshable) }
        return this.#refuse(verdict, unauthenticatedError(verdict.expired, this.#signInUrl(request, exit), this.#challenge(upstream, request.host)), null)
      case 'forbidden':
        return this.#refuse(verdict, forbiddenError(verdict.rulePath), verdict.identity)
      case 'step_up':
        // A page load signs in again: the redirect endpoint asks for what the target's rule needs
        // and the callback upgrades this session. A Bearer token cannot be upgraded that way.
        if (exit.redirects && !verdict.bearer && isNavigationOf(request.method, request.headers))
          return { kind: 'sign_in', outcome: verdict.outcome, upstream, identity: verdict.identity, location: this.#signInRedirect(request, exit, false) }
        return this.#refuse(
          verdict,
          stepUpError(verdict.requirement, this.#signInUrl(request, exit), this.#challenge(upstream, request.host)),
          verdict.identity,
        )
    }
  }

  /** A pass with what the upstream receives; a credential refused (an exchange: 403, 502) is the refusal. */
  #pass(upstream: UpstreamConfig, identity: Identity | null, request: AnsweredRequest, exit: Exit): Answer | Promise<Answer> {
    let headers: UpstreamHeaders | Promise<UpstreamHeaders>
    try {
      headers = this.#headers(upstream, identity, request, exit)
    } catch (err) {
      return refusedPass(err, upstream, identity)
    }
    // Only a credential asked for or signed waits: the rest answers without a promise or closure.
    if (!(headers instanceof Promise)) return { kind: 'pass', outcome: 'pass', upstream, identity, headers }
    return headers.then(
      (set): Answer => ({ kind: 'pass', outcome: 'pass', upstream, identity, headers: set }),
      (err: unknown) => refusedPass(err, upstream, identity),
    )
  }

  #refuse(verdict: Verdict, error: GatewayError, identity: Identity | null): Answer {
    return { kind: 'refuse', outcome: verdict.outcome, upstream: verdict.upstream, identity, error }
  }

  #headers(upstream: UpstreamConfig, identity: Identity | null, request: AnsweredRequest, exit: Exit): UpstreamHeaders | Promise<UpstreamHeaders> {
    const writer = this.#credentials.of(upstream)
    if (exit.carrier === 'edge') return writer.headers(identity, request, request.headers)
    if (identity === null) return NO_HEADERS
    const set = writer.set(identity, request, exit.carrier === 'proxy' ? 'upstream' : 'auth-request')
    return set instanceof Promise ? set.then(withoutRemovals) : withoutRemovals(set)
  }

  /**
   * Where a page load is sent to sign in (or, `refreshable`, to renew its session). Through the
   * proxy on the public host the path alone: the browser stays on its origin. Elsewhere the public
   * origin's endpoint, with the page's absolute URL to come back to when the redirect endpoint
   * would accept it (signInLocation).
   */
  #signInRedirect(request: AnsweredRequest, exit: Exit, refreshable: boolean): string {
    const { host, target } = request
    if (exit.carrier === 'proxy' && (host === undefined || host === this.#publicHost)) return refreshable ? refreshPath(target) : signInPath(target)
    return signInLocation(this.#origin, { scheme: request.scheme, host: host ?? this.#publicHost, target }, refreshable)
  }

  /** The `signInUrl` of a 401: where a program sends its user to sign in. */
  #signInUrl(request: AnsweredRequest, exit: Exit): string {
    if (exit.carrier === 'proxy') return this.#origin.publicUrl + signInPath(request.target)
    return signInLocation(this.#origin, { scheme: request.scheme, host: request.host ?? this.#publicHost, target: request.target }, false)
  }

  /** RFC 9728 5.1: where the upstream's metadata is, when it publishes some, and the scopes to ask for. */
  #challenge(upstream: UpstreamConfig, host: string | undefined): BearerChallengeParams {
    const fixed = upstream.match.hosts === undefined
    if (fixed) {
      const known = this.#fixedChallenges.get(upstream)
      if (known !== undefined) return known
    }
    const url = resourceMetadataUrl(upstream, this.#origin.publicUrl, host)
    const challenge: BearerChallengeParams = url === undefined ? {} : { resource_metadata: url, scope: challengeScope(upstream) }
    if (fixed) this.#fixedChallenges.set(upstream, challenge)
    return challenge
  }
}
