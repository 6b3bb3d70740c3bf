import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { CheckRoute } from '../contract/endpoints.js'
import type { GatewayConfig } from '../options/types.js'
import type { Answer } from '../access/answer.js'
import type { Checker } from '../access/checker.js'
import type { TrustCheck } from '../ops/trusted-peers.js'
import type { CheckPipeline } from './pipeline.js'

// What a check dialect is: the way one kind of edge asks the gateway "may this request through,
// and as whom?" (ingress-nginx's auth-url and Traefik's ForwardAuth at forward-auth, Envoy's
// ext_authz over HTTP). A dialect reads its edge's description of the request into a
// CheckedRequest, asks the Checker for the answer at its Exit (access/answer.ts: can its answer
// reach the browser, where do the credentials go), and writes the answer the way its edge reads
// it. Everything else (the upstream, the decision and its cache, the sign-in URL, the problem,
// the credentials) is the Checker's, so a new dialect is one file and one line in dialects.ts.

/** What every dialect is given. */
export interface CheckDialectContext {
  /** The check endpoints' one decision and its answers. */
  checker: Checker
  /** server.trustedProxies' test: whose X-Forwarded-For names the client. */
  isTrustedProxy: TrustCheck
  publicUrl: string
  /** Envoy's pipeline, shared by its HTTP route and the gRPC check. */
  envoy: CheckPipeline
}

export interface CheckDialect {
  /** Its name, in logs and docs. */
  readonly name: string
  /** Where it is asked: an endpoint of contract/endpoints.ts, or a configured prefix. Routed on the raw target (access/checker.ts isCheckRoute). */
  route(config: Pick<GatewayConfig, 'envoy'>): CheckRoute
  /** Registers its route at `route` on the app (an encapsulated plugin). */
  register(app: FastifyInstance, context: CheckDialectContext, route: CheckRoute): Promise<void>
}

/**
 * An answer written the plain HTTP way an ingress reads it: 200 with the credentials as response
 * headers, a 302 to sign in, or the refusal thrown for the app's error handler (a page for a
 * browser's page load, problem+json otherwise). `req.identity` is who was decided on (the request
 * line's `sub`).
 */
export function writeAnswer(req: FastifyRequest, reply: FastifyReply, answer: Answer): FastifyReply {
  req.identity = answer.identity
  switch (answer.kind) {
    case 'pass':
      for (const [name, value] of answer.headers.set) reply.header(name, value)
      return reply.code(200).send()
    case 'sign_in':
      return reply.redirect(answer.location, 302)
    case 'refuse':
      throw answer.error
  }
}
