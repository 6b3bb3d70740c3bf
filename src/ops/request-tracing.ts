import type { Context, Span, TextMapGetter, TextMapPropagator, TextMapSetter } from '@opentelemetry/api'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { GatewayError } from '../contract/errors.js'
import { otelApi, otelCore } from '../lib/otel.js'
import { failSpan, inSpan } from '../lib/spans.js'
import type { Tracing } from './tracing.js'
import { createTrustCheck } from './trusted-peers.js'

// The spans of a request (telemetry.tracing), by the OpenTelemetry HTTP semantic conventions:
// - a server span per request, `{method} {http.route}`, the root of the gateway's work; a
//   `traceparent` (W3C Trace Context) is continued only from a trusted peer
//   (telemetry.tracing.trustIncoming), else the request starts a trace of its own: the trace
//   context is no security decision, but an untrusted client must neither choose sampling for the
//   whole fleet nor graft its requests onto another's trace;
// - `access decision` below it (authentication and allow rules: session reads, refreshes);
// - the upstream call, a client span whose `traceparent` the upstream receives (a client's own
//   `traceparent` and `tracestate` never reach it: they are replaced).
// The span is the active one from onRequest on (AsyncLocalStorage carries it through the hooks,
// a body read later and the handler), so provider calls and Redis commands nest below it. Attributes hold no query string, header value, cookie or token.

interface RequestTrace {
  readonly span: Span
  readonly context: Context
  upstream?: Span
  /** Why the upstream call failed, when it could not be reached or did not answer in time. */
  upstreamError?: string
}

const kTrace = Symbol('openid-gateway.trace')
type Traced = FastifyRequest & { [kTrace]?: RequestTrace }

/** W3C Trace Context; made with the first traced app (lib/otel.ts: loaded only with tracing on). */
let w3c: TextMapPropagator | undefined
const propagator = (): TextMapPropagator => (w3c ??= new (otelCore().W3CTraceContextPropagator)())

const headerGetter: TextMapGetter<FastifyRequest['headers']> = {
  keys: (headers) => Object.keys(headers),
  get: (headers, key) => headers[key],
}

type Headers = Record<string, string | string[] | undefined>
const headerSetter: TextMapSetter<Headers> = {
  set: (headers, key, value) => {
    headers[key] = value
  },
}

export interface RequestTracingOptions {
  tracing: Tracing
  /** server.trustedProxies: with telemetry.tracing.trustIncoming `proxies`, whose traceparent is followed. */
  trustedProxies: readonly string[]
}

/** Adds the hooks of the server span; first, so that the whole request runs under it. */
export function traceRequests(app: FastifyInstance, options: RequestTracingOptions): void {
  const { tracer, config } = options.tracing
  const { context, ROOT_CONTEXT, SpanKind, trace } = otelApi()
  const extract = propagator()
  const trusted = config.trustIncoming === 'always' ? () => true : config.trustIncoming === 'never' ? () => false : createTrustCheck(options.trustedProxies)
  app.addHook('onRequest', (req, _reply, done) => {
    const parent = trusted(req.socket.remoteAddress) ? extract.extract(ROOT_CONTEXT, req.headers, headerGetter) : ROOT_CONTEXT
    const q = req.url.indexOf('?')
    const userAgent = req.headers['user-agent']
    const span = tracer.startSpan(
      req.method,
      {
        kind: SpanKind.SERVER,
        attributes: {
          'http.request.method': req.method,
          'url.path': q === -1 ? req.url : req.url.slice(0, q),
          'url.scheme': req.protocol,
          'server.address': req.hostname,
          ...(req.port === null ? {} : { 'server.port': req.port }),
          'client.address': req.ip,
          ...(req.socket.remoteAddress === undefined ? {} : { 'network.peer.address': req.socket.remoteAddress }),
          'network.protocol.version': req.raw.httpVersion,
          ...(userAgent === undefined ? {} : { 'user_agent.original': userAgent }),
        },
      },
      parent,
    )
    const active = trace.setSpan(parent, span)
    ;(req as Traced)[kTrace] = { span, context: active }
    context.with(active, done)
  })
  app.addHook('onResponse', (req, reply, done) => {
    const traced = (req as Traced)[kTrace]
    if (traced !== undefined) end(traced, req, reply)
    done()
  })
}

function end({ span, upstream, upstreamError }: RequestTrace, req: FastifyRequest, reply: FastifyReply): void {
  const status = reply.statusCode
  if (upstream !== undefined) {
    // The upstream's status is the reply's, unless it never answered (then the gateway's 502 or 504 is not its).
    if (upstreamError !== undefined) failSpan(upstream, upstreamError)
    else {
      upstream.setAttribute('http.response.status_code', status)
      // HTTP client spans fail from 400 on.
      if (status >= 400) failSpan(upstream, String(status))
    }
    upstream.end()
  }
  // Fastify builds routeOptions afresh at each read: read once.
  const { url: route, config } = req.routeOptions
  if (route !== undefined) {
    span.setAttribute('http.route', route)
    span.updateName(`${req.method} ${route}`)
  }
  const name = config.upstream
  if (name !== undefined) span.setAttribute('openid_gateway.upstream', name)
  span.setAttribute('http.response.status_code', status)
  // A server span fails only on a 5xx: a 4xx is the client's.
  if (status >= 500) failSpan(span, String(status))
  span.end()
}

/** The request line's trace fields (ops/access-log.ts), when the request is traced. */
export function traceFields(req: FastifyRequest): { traceId: string; spanId: string } | undefined {
  const traced = (req as Traced)[kTrace]
  if (traced === undefined) return undefined
  const { traceId, spanId } = traced.span.spanContext()
  return { traceId, spanId }
}

/** What the proxy (proxy/plugin.ts) traces of a request bound for an upstream. */
export interface UpstreamTracing {
  /**
   * Runs the access decision in its span; its answer is returned as is: null when the guard
   * answered itself (a redirect to sign in), else what the upstream receives (a pass).
   */
  decide<T>(req: FastifyRequest, upstream: string, decide: () => Promise<T | null>): Promise<T | null>
  /** Starts the upstream call's span and sets the `traceparent` the upstream receives. */
  forward(req: FastifyRequest, headers: Headers, target: string): void
  /** The upstream could not be reached or did not answer in time. */
  failed(req: FastifyRequest, type: string): void
}

export function upstreamTracing(tracing: Tracing): UpstreamTracing {
  const { tracer } = tracing
  const { SpanKind, trace } = otelApi()
  const inject = propagator()
  return {
    decide(req, upstream, decide) {
      const traced = (req as Traced)[kTrace]
      if (traced === undefined) return decide()
      return inSpan(
        tracer,
        'access decision',
        { attributes: { 'openid_gateway.upstream': upstream } },
        async (span) => {
          const answered = await decide()
          span.setAttribute('openid_gateway.decision', answered === null ? 'redirect' : 'pass')
          return answered
        },
        traced.context,
        // A refusal (401, 403) is the decision's answer; a 5xx (a store or provider down) its failure.
        (span, err) => {
          const refused = err instanceof GatewayError && err.status < 500
          span.setAttribute('openid_gateway.decision', refused ? 'refuse' : 'fail')
          if (err instanceof GatewayError) span.setAttribute('openid_gateway.problem', err.code)
          return !refused
        },
      )
    },
    forward(req, headers, target) {
      delete headers.traceparent
      delete headers.tracestate
      const traced = (req as Traced)[kTrace]
      if (traced === undefined) return
      const url = new URL(target)
      const q = req.url.indexOf('?')
      const span = tracer.startSpan(
        req.method,
        {
          kind: SpanKind.CLIENT,
          attributes: {
            'http.request.method': req.method,
            'server.address': url.hostname,
            'server.port': Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
            'url.full': url.origin + (q === -1 ? req.url : req.url.slice(0, q)),
          },
        },
        traced.context,
      )
      traced.upstream = span
      inject.inject(trace.setSpan(traced.context, span), headers, headerSetter)
    },
    failed(req, type) {
      const traced = (req as Traced)[kTrace]
      if (traced !== undefined) traced.upstreamError = type
    },
  }
}
