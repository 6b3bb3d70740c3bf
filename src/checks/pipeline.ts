import type { FastifyBaseLogger } from 'fastify'
import { GatewayError, type ProblemCode } from '../contract/errors.js'
import { loggedUser, type Identity } from '../contract/identity.js'
import type { Answer } from '../access/answer.js'
import { isNavigationOf } from '../contract/navigation.js'
import type { AccessLog } from '../ops/access-log.js'
import { GATEWAY_ROUTE, type GatewayMetrics } from '../ops/metrics.js'
import type { createProblemAnswer, ProblemAnswer, ProblemRequest } from '../pages/error-page.js'
import type { SessionReply, SessionRequest } from '../session/types.js'
import { checkContext, type CheckedRequest } from '../access/checker.js'
import type { DecisionRequest } from '../access/decision.js'

// The one request pipeline of Envoy's check, whichever transport carries it (HTTP at
// envoy.pathPrefix, gRPC on server.extAuthzGrpcPort). Each transport is a thin adapter:
// it reads its request into a CheckCall (the client's headers, the gateway's cookies, the page a
// refusal is written for) and a CheckedRequest, and writes the CheckOutcome back. Between the two,
// every step is here, once, the same for both:
// - the request checked is described by the transport; what it cannot describe is a 400 (RFC 9110
//   15.5.1), logged with its reason, never a decision about a guess;
// - the answer is the Checker's (access/checker.ts Checker.answer, envoy-http.ts createEnvoyDecision), on the check's
//   DecisionRequest (checkContext: the client's cookies, the checked request's target as its URL);
// - cookies a decision sets (a refreshed session) go to the transport's SessionReply: Fastify's
//   reply over HTTP, Set-Cookie lines over gRPC (RFC 6265 4.1: one header line per cookie);
// - a refusal is rendered by pages/error-page.ts's answer: a page for a browser navigation, RFC 9457
//   problem+json otherwise, with the error's own headers (WWW-Authenticate, Retry-After);
// - the outcome, who was decided on (`call.identity`, the request line's `sub`) and the request
//   line's `extAuthz` fields go to the transport's `answer`, which writes and records them.
// Recording: an HTTP check's request line and request metric are the app's, written for every
// request from the reply (ops/request-outcome.ts recordOutcome: `reply.logFields`, `reply.problemCode`,
// `req.identity`); a gRPC call is no Fastify request, so recordGrpcCheck writes the same line
// (`grpc` in place of the request's id, URL and address) and the same metric (route `_gateway`).
// A decision that fails with anything but a GatewayError is a bug and is thrown: the HTTP error
// handler answers it 500, the gRPC service 503 (never a gRPC error, which Envoy's
// failure_mode_allow would let through).

/** What Envoy's check comes to, before a transport writes it: the answer (access/answer.ts) and the request line's fields. */
export interface EnvoyDecision {
  answer: Answer
  /** The request line's `extAuthz` fields: the request checked, the upstream and the outcome. */
  logged: Record<string, unknown>
}

/**
 * The decision of a check. `req` is the request checked (checkContext): its cookies and headers as
 * the client sent them, its target the client's. Throws only what is not a GatewayError (a bug).
 */
export type EnvoyDecide = (req: DecisionRequest, reply: SessionReply, checked: CheckedRequest, upstreamName: string | undefined) => Promise<EnvoyDecision>

/**
 * A check request, whichever transport carried it. A FastifyRequest is one (its cookies read by the
 * onRequest hook, session/cookies.ts readRequestCookies, former cookies expired there); the gRPC
 * check builds one from Envoy's CheckRequest.
 */
export interface CheckCall extends ProblemRequest {
  readonly log: FastifyBaseLogger
  /** Who the decision established (null: nobody), set by the pipeline: the request line's `sub` and an error page's "signed in as". */
  identity: Identity | null
}

/** A check's answer, before a transport writes it. */
export type CheckOutcome =
  /** A pass, or a browser's page load sent to sign in: the answer as it is. */
  | Exclude<Answer, { kind: 'refuse' }>
  /** A refusal, rendered: `code` is the problem's (the metrics' `code`). */
  | { kind: 'refused'; code: ProblemCode; answer: ProblemAnswer }

/** pages/error-page.ts's answer to a refused request (the app's error handler uses the same one). */
export type ProblemAnswerer = ReturnType<typeof createProblemAnswer>

/**
 * One transport's side of the pipeline, built once: how it reads the request checked and writes
 * the outcome. `Source` is what it received, `Call` its check call, `Reply` where cookies go.
 */
export interface CheckTransport<Source, Call extends CheckCall, Reply extends SessionReply, Answer> {
  /** The request checked; a GatewayError thrown is the 400 answered. */
  describe(source: Source): CheckedRequest
  /** The transport's answer for `outcome`; `logged` is the request line's `extAuthz` fields. */
  answer(outcome: CheckOutcome, logged: Record<string, unknown>, call: Call, reply: Reply): Answer
  /**
   * For a transport whose requests do not pass the app's hooks (gRPC): the expiry of former
   * configurations' cookies the request brings, once the request is described.
   */
  expireFormer?: (req: SessionRequest, reply: SessionReply) => void
}

export interface CheckPipelineOptions {
  decide: EnvoyDecide
  answerProblem: ProblemAnswerer
}

export interface CheckPipeline {
  /** Runs one check of `source` over `transport`; `upstreamName`: the upstream whose rules apply (gRPC's context_extensions only). */
  run<Source, Call extends CheckCall, Reply extends SessionReply, Answer>(
    transport: CheckTransport<Source, Call, Reply, Answer>,
    source: Source,
    call: Call,
    reply: Reply,
    upstreamName: string | undefined,
  ): Promise<Answer>
}

export function createCheckPipeline({ decide, answerProblem }: CheckPipelineOptions): CheckPipeline {
  /** A refusal as the error handler renders one: a page for a navigation (the checked request's method and the client's headers), else problem+json. */
  async function refusal(call: CheckCall, problem: GatewayError): Promise<CheckOutcome> {
    return {
      kind: 'refused',
      code: problem.code,
      answer: await answerProblem(call, call.log, problem, problem.status, isNavigationOf(call.method, call.headers)),
    }
  }

  return {
    // One async step per check, as the route's handler was: the transport's answer is written here.
    async run(transport, source, call, reply, upstreamName) {
      let checked: CheckedRequest
      try {
        checked = transport.describe(source)
      } catch (err) {
        if (!(err instanceof GatewayError)) throw err
        return transport.answer(await refusal(call, err), { outcome: err.code, reason: err.message }, call, reply)
      }
      const req = checkContext(call, checked)
      transport.expireFormer?.(req, reply)
      const { answer, logged } = await decide(req, reply, checked, upstreamName)
      // Who was decided on (who a 403 refused), for the request line and the page.
      call.identity = answer.identity
      if (answer.kind === 'refuse') return transport.answer(await refusal(call, answer.error), logged, call, reply)
      // A pass or a sign-in is the answer as it is: nothing more is allocated on the hot path.
      return transport.answer(answer, logged, call, reply)
    },
  }
}

/** The HTTP status of an outcome (the request line's and the metric's). */
export function statusOf(outcome: CheckOutcome): number {
  return outcome.kind === 'pass' ? 200 : outcome.kind === 'sign_in' ? 302 : outcome.answer.status
}

/** Where a gRPC check is recorded: the app's request metrics and request line. */
export interface CheckRecorder {
  metrics: Pick<GatewayMetrics, 'observeRequest'>
  accessLog: AccessLog
}

/** The gRPC method every check line names. */
export const GRPC_CHECK = 'Authorization/Check'

/**
 * A gRPC check's request metric and request line, as ops/request-outcome.ts writes an HTTP check's:
 * route `_gateway` (no route URL: no endpoint outcome), the method checked, the status answered,
 * the problem code, `sub`, and the `extAuthz` fields.
 */
export function recordGrpcCheck(
  recorder: CheckRecorder,
  call: CheckCall,
  status: number,
  seconds: number,
  code: string | undefined,
  logged: Record<string, unknown>,
): void {
  recorder.metrics.observeRequest({ route: GATEWAY_ROUTE, method: call.method, status, seconds, routeUrl: undefined, code })
  recorder.accessLog.write({
    method: call.method,
    grpc: GRPC_CHECK,
    status,
    ms: seconds * 1000,
    sub: call.identity?.claims.sub,
    user: loggedUser(call.identity),
    fields: { extAuthz: logged },
  })
}
