import type { FastifyReply, FastifyRequest } from 'fastify'
import type { UpstreamConfig } from '../options/types.js'
import { PROBLEM_HEADERS } from '../ops/response-headers.js'
import type { AnsweredRequest, Answers, Exit } from '../access/answer.js'
import { isPreflight, verdictOf, type AccessDecisions, type UpstreamAccess } from '../access/decision.js'
import type { TrustCheck } from '../ops/trusted-peers.js'
import { clientAddress } from '../upstream/forwarded.js'
import type { UpstreamHeaders } from '../upstream/credentials.js'

// The auth guard of one upstream (ProxyGuard.admit): the proxy's exit of the access decision,
// before anything is proxied. The decision is access/decision.ts UpstreamAccess.decide and its
// answer access/answer.ts's, as at every check dialect: pass with what the upstream receives, a
// redirect to sign in for a page load, else the contract's 401 (RFC 6750 3.1, RFC 9470 3 for a
// step-up, with RFC 9728 5.1's `resource_metadata`) or 403, thrown for the error handler. Runs on
// every proxied request (and on WebSocket upgrades).

/** The proxy's answers reach the browser, and the gateway forwards the request itself. */
const PROXY_EXIT: Exit = { redirects: true, carrier: 'proxy' }

/** What the guard of an upstream needs: the configuration's access decisions and answers. */
export interface GuardDeps {
  access: AccessDecisions
  answers: Answers
  /** server.trustedProxies' test: whose X-Forwarded-For and -Proto name the client (a Transaction Token's req_ip and transport). */
  isTrustedProxy: TrustCheck
}

function pathOf(url: string): string {
  const q = url.indexOf('?')
  return q === -1 ? url : url.slice(0, q)
}

/**
 * A proxied request as its answer reads it. A class, built per request: what only a Transaction
 * Token asks (the client's scheme and address, as a trusted proxy names them) is worked out on the
 * prototype's getters, when asked.
 */
class ProxiedRequest implements AnsweredRequest {
  readonly method: string
  readonly headers: FastifyRequest['headers']
  readonly scheme: string
  readonly host: string | undefined
  readonly target: string
  readonly path: string
  readonly #req: FastifyRequest
  readonly #isTrusted: TrustCheck

  constructor(req: FastifyRequest, path: string, isTrusted: TrustCheck) {
    this.method = req.method
    this.headers = req.headers
    this.scheme = req.protocol
    this.host = req.headers.host
    this.target = req.url
    this.path = path
    this.#req = req
    this.#isTrusted = isTrusted
  }

  /** The scheme the client used: a trusted peer's X-Forwarded-Proto when it says http(s), else the gateway's own. */
  get transport(): string {
    const req = this.#req
    const said = this.#isTrusted(req.socket.remoteAddress) ? req.headers['x-forwarded-proto'] : undefined
    return said === 'https' || said === 'http' ? said : req.protocol
  }

  clientAddress(): string | undefined {
    return clientAddress(this.#req.headers, this.#req.socket.remoteAddress, this.#isTrusted)
  }
}

export class ProxyGuard {
  readonly #upstream: UpstreamConfig
  readonly #access: UpstreamAccess
  readonly #deps: GuardDeps

  constructor(upstream: UpstreamConfig, deps: GuardDeps) {
    this.#upstream = upstream
    this.#access = deps.access.of(upstream)
    this.#deps = deps
  }

  /**
   * Decides `req` before anything is proxied: the headers the upstream receives to proxy it
   * (`req.identity` set), else null when answered on `reply` (a redirect); a refusal is thrown.
   */
  async admit(req: FastifyRequest, reply: FastifyReply): Promise<UpstreamHeaders | null> {
    req.identity = null
    const upstream = this.#upstream
    const path = pathOf(req.url)
    const decision = await this.#access.decide(req, reply, {
      path,
      method: req.method,
      preflight: isPreflight(req.method, req.headers),
      host: req.headers.host,
    })
    const answer = await this.#deps.answers.answer(verdictOf(upstream, decision, req), new ProxiedRequest(req, path, this.#deps.isTrustedProxy), PROXY_EXIT)
    // Who was established, though refused: the request line names them (ops/access-log.ts).
    req.identity = answer.identity
    switch (answer.kind) {
      case 'pass':
        return answer.headers
      case 'sign_in':
        reply.headers(PROBLEM_HEADERS).redirect(answer.location, 302)
        return null
      case 'refuse':
        throw answer.error
    }
  }
}
