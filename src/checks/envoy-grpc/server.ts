import {
  Server,
  ServerCredentials,
  status as GrpcStatus,
  type sendUnaryData,
  type ServerUnaryCall,
  type ServerWritableStream,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js'
import type { FastifyBaseLogger } from 'fastify'
import { GatewayError, type ProblemCode } from '../../contract/errors.js'
import { PROBLEM_HEADERS } from '../../ops/response-headers.js'
import { checkInputOf } from './check-input.js'
import { checkResponse, type CheckResponse } from './check-response.js'
import { AUTHORIZATION_SERVICE, loadEnvoyGrpcServices, serverAuthorizationService } from './protos.js'
import type { CheckAnswer, CheckInput } from './types.js'

// Envoy's external authorization over gRPC: `envoy.service.auth.v3.Authorization/Check`
// (envoy/service/auth/v3/external_auth.proto; the filter: envoy docs
// configuration/http/http_filters/ext_authz_filter.rst) and `grpc.health.v1.Health`
// (grpc/grpc-proto grpc/health/v1/health.proto, semantics in grpc/grpc doc/health-checking.md)
// on one cleartext HTTP/2 port, for Envoy's cluster health checks. Both ask the caller's functions
// at each call and decide nothing here: `check` decides a request, `ready` says whether the gateway
// can decide now (grpc/grpc doc/health-checking.md: the status the server has when it is asked).
//
// Every Check is answered with a CheckResponse, never with a gRPC error: Envoy treats a failed
// call as an error and, with failure_mode_allow, lets the request through. A request the service
// cannot describe is refused 400 (INVALID_ARGUMENT), a `check` that fails 503 (UNAVAILABLE):
// closed either way, whatever Envoy's configuration.
//
// The port has no TLS and no client authentication: whoever reaches it can ask what the gateway
// would decide for any credentials it holds, and learn nothing it could not learn from the public
// port. It is meant for the pod network (server.host), next to Envoy.
//
// Request headers hold cookies and tokens: nothing here logs them, and the path is logged with
// its secret query parameters redacted.

export interface EnvoyGrpcServerOptions {
  host: string
  /** 0 picks a free port; the returned `port` is the one bound. */
  port: number
  /** The gateway's decision; a rejection is answered 503. */
  check: (input: CheckInput) => Promise<CheckAnswer>
  /**
   * Whether the gateway can decide (provider metadata, keys, session store): the health status,
   * asked at each health Check and at each look of a Watch; a rejection is NOT_SERVING.
   */
  ready: () => Promise<boolean> | boolean
  log: Pick<FastifyBaseLogger, 'info' | 'warn' | 'error'>
  /** How long close() waits for calls under way before cutting them, in milliseconds. */
  closeTimeoutMs?: number
}

export interface EnvoyGrpcServer {
  port: number
  close(): Promise<void>
}

/** The services health.proto's Check and Watch know: "" is the server as a whole. */
const HEALTH_SERVICES = new Set(['', AUTHORIZATION_SERVICE])

/** grpc.health.v1.HealthCheckResponse.ServingStatus. */
const ServingStatus = { SERVING: 1, NOT_SERVING: 2, SERVICE_UNKNOWN: 3 } as const
type ServingStatus = (typeof ServingStatus)[keyof typeof ServingStatus]

/**
 * How often a Watch asks ready(): readiness is asked, never told, so a Watch polls, and sends a
 * change at most this long after it happened (health.proto says when to send, not how to notice).
 */
const WATCH_INTERVAL_MS = 1000

/** The service's own refusals, rendered like the gateway's: RFC 9457 problem+json. */
function problemAnswer(code: ProblemCode, status: number, detail: string): CheckAnswer {
  const problem = { ...new GatewayError(code, detail).toProblem(), status }
  return {
    allow: false,
    status,
    headers: [...Object.entries(PROBLEM_HEADERS), ['content-type', 'application/problem+json']],
    body: JSON.stringify(problem),
  }
}

function bindAddress(host: string, port: number): string {
  // grpc-js parses host:port; an IPv6 literal needs its brackets.
  return `${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`
}

export async function startEnvoyGrpcServer(options: EnvoyGrpcServerOptions): Promise<EnvoyGrpcServer> {
  const { check, ready, log } = options
  const services = loadEnvoyGrpcServices()
  // Channelz (gRPC's introspection service) is not served here; its per-call bookkeeping is not kept.
  const server = new Server({ 'grpc.enable_channelz': 0 })
  /** Open Watch calls and what stops each one's polling. */
  const watches = new Map<ServerWritableStream<unknown, { status: ServingStatus }>, () => void>()

  /** What Check answers; never rejects. */
  async function decide(request: unknown): Promise<CheckResponse> {
    const input = checkInputOf(request)
    if (typeof input === 'string') {
      log.warn({ reason: input }, 'ext_authz check request refused')
      return checkResponse(problemAnswer('bad_request', 400, `the check request has ${input}`))
    }
    try {
      return checkResponse(await check(input))
    } catch (err) {
      // The decision failed (provider or store down, or a bug): fail closed. Method, host and
      // path say which request; its headers stay out of the log. The path goes in `url`, which
      // the gateway's logger redacts with log.redactQueryParams (ops/logging.ts).
      log.error({ err, method: input.method, host: input.host, url: input.path, upstream: input.upstream }, 'ext_authz check failed')
      return checkResponse(problemAnswer('internal_error', 503, 'the gateway could not decide; the log has details'))
    }
  }

  /** The status of `service` now; never rejects (a ready() that throws or rejects is not ready). */
  async function servingStatus(service: string): Promise<ServingStatus> {
    if (!HEALTH_SERVICES.has(service)) return ServingStatus.SERVICE_UNKNOWN
    try {
      return (await ready()) ? ServingStatus.SERVING : ServingStatus.NOT_SERVING
    } catch (err) {
      log.error({ err }, 'ext_authz readiness failed')
      return ServingStatus.NOT_SERVING
    }
  }

  function serviceOf(request: unknown): string {
    const service = typeof request === 'object' && request !== null ? (request as { service?: unknown }).service : undefined
    return typeof service === 'string' ? service : ''
  }

  const authorization: UntypedServiceImplementation = {
    Check(call: ServerUnaryCall<unknown, CheckResponse>, callback: sendUnaryData<CheckResponse>) {
      void decide(call.request).then(
        (response) => callback(null, response),
        // decide() does not reject; should it ever, the call still ends, as an error.
        (err: unknown) => {
          log.error({ err }, 'ext_authz check answer failed')
          callback({ code: GrpcStatus.INTERNAL, details: 'internal error' })
        },
      )
    },
  }

  const health: UntypedServiceImplementation = {
    Check(call: ServerUnaryCall<unknown, { status: ServingStatus }>, callback: sendUnaryData<{ status: ServingStatus }>) {
      // Asked now, not remembered: right after /readyz changes, so does this answer.
      void servingStatus(serviceOf(call.request)).then((status) => {
        if (status === ServingStatus.SERVICE_UNKNOWN) callback({ code: GrpcStatus.NOT_FOUND, details: 'unknown service' })
        else callback(null, { status })
      })
    },
    Watch(call: ServerWritableStream<unknown, { status: ServingStatus }>) {
      // The current status at once, then each change; an unknown service is SERVICE_UNKNOWN and
      // the call stays open (health.proto), until the client cancels or the server closes. One
      // look at a time: a slow ready() delays the next look rather than piling looks up.
      const service = serviceOf(call.request)
      let last: ServingStatus | undefined
      let stopped = false
      let timer: NodeJS.Timeout | undefined
      const look = async (): Promise<void> => {
        const now = await servingStatus(service)
        if (stopped) return
        if (now !== last) {
          last = now
          call.write({ status: now })
        }
        timer = setTimeout(() => void look(), WATCH_INTERVAL_MS)
      }
      const stop = (): void => {
        stopped = true
        clearTimeout(timer)
        watches.delete(call)
      }
      watches.set(call, stop)
      call.on('cancelled', stop)
      call.on('close', stop)
      call.on('error', stop)
      void look()
    },
  }

  server.addService(serverAuthorizationService(services.authorization), authorization)
  server.addService(services.health, health)

  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(bindAddress(options.host, options.port), ServerCredentials.createInsecure(), (err, bound) => {
      if (err === null) resolve(bound)
      else reject(err)
    })
  })
  log.info({ host: options.host, port }, 'ext_authz gRPC service listening')

  let closing: Promise<void> | undefined
  return {
    port,
    close() {
      closing ??= new Promise<void>((resolve) => {
        // Watches never end by themselves, and tryShutdown waits for every call.
        for (const [call, stop] of watches) {
          stop()
          call.end()
        }
        const timer = setTimeout(() => {
          server.forceShutdown()
          resolve()
        }, options.closeTimeoutMs ?? 5000)
        server.tryShutdown(() => {
          clearTimeout(timer)
          resolve()
        })
      })
      return closing
    },
  }
}
