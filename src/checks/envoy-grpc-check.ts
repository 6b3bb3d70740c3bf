import { performance } from 'node:perf_hooks'
import type { FastifyBaseLogger } from 'fastify'
import { canonicalHost } from '../access/match.js'
import { PROBLEM_HEADERS } from '../ops/response-headers.js'
import { SetCookieLines, type CookieSerializer, type GatewayCookies } from '../session/cookies.js'
import { checkedOf, schemeOf } from './envoy-http.js'
import type { CheckAnswer, CheckInput } from './envoy-grpc/types.js'
import { recordGrpcCheck, statusOf, type CheckCall, type CheckPipeline, type CheckRecorder, type CheckTransport } from './pipeline.js'

// The gRPC adapter of the check pipeline (pipeline.ts): Envoy's CheckRequest, decoded by
// envoy-grpc/check-input.ts into a CheckInput, becomes a check call, and the pipeline's outcome a
// CheckAnswer that envoy-grpc/check-response.ts encodes. What the app's hooks do for an HTTP check
// is done here for the call, through the same owners: the gateway's cookies read from the
// request's Cookie (session/cookies.ts jar) and former ones expired (expireFormer), the cookies a
// refresh sets collected as Set-Cookie lines (RFC 6265 4.1), the request line and metric
// recorded (recordGrpcCheck). `input.upstream` (Envoy's context_extensions) names the upstream
// whose rules apply; only Envoy's route configuration can set it.

/** The gRPC check the Envoy gRPC listener serves (runtime/envoy-grpc-listener.ts): never rejects for a refusal. */
export type EnvoyGrpcCheck = (input: CheckInput) => Promise<CheckAnswer>

export interface EnvoyGrpcCheckOptions extends CheckRecorder {
  pipeline: CheckPipeline
  publicUrl: string
  cookies: Pick<GatewayCookies, 'jar' | 'expireFormer'>
  /** @fastify/cookie's serializer (app.serializeCookie), as reply.setCookie writes the HTTP check's cookies. */
  serializeCookie: CookieSerializer
  /** The app's logger: a gRPC call has no request logger of its own. */
  log: FastifyBaseLogger
}

const NO_COOKIES: Readonly<Record<string, string | undefined>> = Object.freeze({})

/** A gRPC check call: what the request line needs besides the check (when it started). */
interface GrpcCall extends CheckCall {
  readonly started: number
}

export function createEnvoyGrpcCheck(options: EnvoyGrpcCheckOptions): EnvoyGrpcCheck {
  const { pipeline, cookies, serializeCookie, log } = options
  const defaultScheme = new URL(options.publicUrl).protocol.slice(0, -1)
  const grpc: CheckTransport<CheckInput, GrpcCall, SetCookieLines, CheckAnswer> = {
    /** The request Envoy describes: its method, canonical :authority, path and scheme (there is no router, so the path is checked here). */
    describe: (input) => checkedOf(input.method, canonicalHost(input.host), input.path, schemeOf(input.scheme, defaultScheme)),
    answer(outcome, logged, call, jar) {
      let answer: CheckAnswer
      let code: string | undefined
      switch (outcome.kind) {
        case 'pass':
          answer = { allow: true, upstreamHeaders: outcome.headers.set, removeHeaders: outcome.headers.remove, responseHeaders: setCookieHeaders(jar) }
          break
        case 'sign_in':
          answer = {
            allow: false,
            status: 302,
            headers: [['location', outcome.location], ...Object.entries(PROBLEM_HEADERS), ...setCookieHeaders(jar)],
            body: '',
          }
          break
        case 'refused':
          code = outcome.code
          answer = {
            allow: false,
            status: outcome.answer.status,
            headers: [...Object.entries(outcome.answer.headers), ...setCookieHeaders(jar)],
            body: outcome.answer.body,
          }
          break
      }
      recordGrpcCheck(options, call, statusOf(outcome), (performance.now() - call.started) / 1000, code, logged)
      return answer
    },
    expireFormer: (req, reply) => cookies.expireFormer(req, reply),
  }

  return function check(input) {
    const { headers, method } = input
    const cookieHeader = headers.cookie
    // The page a refusal is written for: the request checked (its target in normal form is the path as sent).
    const call: GrpcCall = {
      started: performance.now(),
      url: input.path,
      host: input.host,
      method,
      headers,
      cookies: cookieHeader === undefined ? NO_COOKIES : cookies.jar(cookieHeader),
      log,
      identity: null,
    }
    return pipeline.run(grpc, input, call, new SetCookieLines(serializeCookie), input.upstream)
  }
}

function setCookieHeaders(jar: SetCookieLines): Array<[string, string]> {
  return jar.lines.map((line) => ['set-cookie', line])
}
