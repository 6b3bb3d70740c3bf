import httpProxy from '@fastify/http-proxy'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { UpstreamConfig } from '../options/types.js'
import type { UpstreamTracing } from '../ops/request-tracing.js'
import { GatewayError } from '../contract/errors.js'
import { ProxyGuard, type GuardDeps } from './guard.js'
import { forwardedValues, type ForwardedHost } from '../upstream/forwarded.js'
import { createHeaderScrubber, scrubResponseHeaders } from '../upstream/header-policy.js'
import type { UpstreamCredentials, UpstreamHeaders } from '../upstream/credentials.js'
import { hostPattern } from '../access/match.js'
import { upstreamConnector } from './upstream-tls.js'
import { createUpgradePolicy, isUpgradeRequest, type TrustedOriginTest } from './websocket.js'
import type { WebSocketRegistry } from './websocket-registry.js'

// One @fastify/http-proxy registration per upstream. Fastify's router does the matching: each
// upstream owns the routes `<prefix>` and `<prefix>/*`, constrained to its hosts, so the longest
// prefix wins on segment boundaries and requests arrive here already normalized (see rewriteUrl
// in app.ts).

export interface ProxyOptions extends GuardDeps {
  upstreams: UpstreamConfig[]
  /** The X-Forwarded-Host sent for a request's (or a trusted peer's) host: a host the gateway serves. */
  forwardedHost: ForwardedHost
  /** What each upstream receives (upstream/credentials.ts): the headers the guard's answer sets, the client's it strips, the gateway's cookies kept back. */
  credentials: UpstreamCredentials
  /** A name the gateway's cookies have had: an upstream's Set-Cookie may not touch it. */
  isGatewayCookieName: (name: string) => boolean
  /** Open WebSockets, closed when their access ends (websocket-registry.ts). */
  websockets: WebSocketRegistry
  /** Records the grant of an upgrade that passed the access decision (req.identity is set). */
  grantWebSocket: (req: FastifyRequest) => Promise<void>
  /** Whether a page of this origin belongs to the application (WebSocket Origin check). */
  isTrustedOrigin: TrustedOriginTest
  /** With telemetry.tracing: the decision's and the upstream call's spans, and the traceparent sent upstream. */
  tracing?: UpstreamTracing
}

type Headers = Record<string, string | string[] | undefined>

/**
 * The connection pool to each upstream (undici's Agent, one pool per origin), written out rather
 * than left to @fastify/reply-from's and undici's defaults, which it equals; docs/performance.md
 * says why each is what it is.
 * - connections: at most 128 open connections to the upstream; requests beyond wait for one.
 * - pipelining: 1, no HTTP/1.1 pipelining: a slow answer would hold the requests queued behind
 *   it on its connection (head-of-line blocking), and an upstream that mishandles pipelining
 *   would mix up two users' answers.
 * - keepAliveTimeout: an idle connection is kept 4 s when the upstream sends no `Keep-Alive:
 *   timeout=`; with one, its value less keepAliveTimeoutThreshold (2 s), capped at
 *   keepAliveMaxTimeout (10 min). Closing before the upstream does avoids sending a request on a
 *   connection the upstream is closing (Node's servers close idle connections after 5 s).
 */
export const UPSTREAM_POOL = {
  connections: 128,
  pipelining: 1,
  keepAliveTimeout: 4_000,
  keepAliveTimeoutThreshold: 2_000,
  keepAliveMaxTimeout: 600_000,
} as const

/** The client's Content-Type, set aside until the request is forwarded (see bodyAsIs). */
const kContentType = Symbol('openid-gateway.contentType')
type WithContentType = FastifyRequest & { [kContentType]?: string }

/** What the upstream receives for the request (the guard's answer), from the preHandler to the header rewrite. */
const kCredentials = Symbol('openid-gateway.credentials')
type WithCredentials = FastifyRequest & { [kCredentials]?: UpstreamHeaders }

/**
 * Bodies reach the upstream byte for byte with the client's Content-Type, whatever it says: the
 * header is set aside before Fastify's body parsing, which then hands the raw stream to the proxy
 * (its catch-all parser) instead of decoding text and JSON, refusing media types it cannot parse
 * (`text/plain;` was a 500, `foo` a 415) or dropping parameters (`charset=utf-16le`).
 */
function bodyAsIs(req: FastifyRequest, _reply: FastifyReply, done: () => void): void {
  const contentType = req.headers['content-type']
  if (contentType !== undefined) {
    ;(req as WithContentType)[kContentType] = contentType
    delete req.headers['content-type']
  }
  done()
}

export async function proxyPlugin(app: FastifyInstance, options: ProxyOptions): Promise<void> {
  const { isTrustedProxy } = options
  app.addHook('onRequest', bodyAsIs)

  for (const upstream of options.upstreams) {
    const writer = options.credentials.of(upstream)
    const passHost = upstream.passHostHeader
    // Every upstream strips every identity name of the configuration, not only its own, the
    // client's Authorization where the gateway owns it, and what only the gateway sets.
    const scrub = createHeaderScrubber(writer.strippedNames)

    /** The header policy, shared by HTTP requests and WebSocket upgrades. */
    const rewrite = (req: FastifyRequest, headers: Headers): Headers => {
      const forwarded = forwardedValues(req.headers, req.socket.remoteAddress, isTrustedProxy(req.socket.remoteAddress), req.protocol, options.forwardedHost)
      // The client's headers less the hop-by-hop ones and these, copied in one pass; then the
      // gateway's, added one by one (Object.assign into a fresh object costs more).
      const out = scrub(headers)
      const contentType = (req as WithContentType)[kContentType]
      if (contentType !== undefined) out['content-type'] = contentType
      const cookie = writer.cookie(out.cookie)
      if (cookie === null) delete out.cookie
      else if (cookie !== undefined) out.cookie = cookie
      out['x-forwarded-for'] = forwarded['x-forwarded-for']
      out['x-forwarded-proto'] = forwarded['x-forwarded-proto']
      out['x-forwarded-host'] = forwarded['x-forwarded-host']
      // reply-from has set Host to the target's (its index.js, before rewriteRequestHeaders); the
      // WebSocket client sets it from the target URL when the headers carry none. Passing the
      // host overrides both, with the served host, never the client's own (forwarded.ts).
      if (passHost) out.host = forwarded['x-forwarded-host']
      // The client's copies went with the scrub (the identity header union names them): only the gateway's are sent.
      const credentials = (req as WithCredentials)[kCredentials]
      if (credentials !== undefined) for (const [name, value] of credentials.set) out[name] = value
      return out
    }

    const onError = (reply: FastifyReply, { error }: { error: { statusCode?: number; code?: string } }): void => {
      // A connection that could not be opened in connectTimeoutMs is an unreachable upstream
      // (502), though reply-from reports it as 504 like an upstream that took too long to answer.
      const timedOut = error.statusCode === 504 && error.code !== 'UND_ERR_CONNECT_TIMEOUT'
      tracing?.failed(reply.request, timedOut ? 'timeout' : (error.code ?? 'unreachable'))
      reply.send(
        timedOut
          ? new GatewayError('upstream_timeout', `the upstream ${upstream.name} did not answer in time`)
          : new GatewayError('upstream_unavailable', `the upstream ${upstream.name} is unreachable`),
      )
    }

    const { tracing } = options
    const untracedGuard = new ProxyGuard(upstream, options)
    const guard =
      tracing === undefined
        ? (req: FastifyRequest, reply: FastifyReply) => untracedGuard.admit(req, reply)
        : (req: FastifyRequest, reply: FastifyReply) => tracing.decide(req, upstream.name, () => untracedGuard.admit(req, reply))
    const enforceUpgradePolicy = createUpgradePolicy({
      upstream: upstream.name,
      websocket: upstream.websocket,
      isTrustedOrigin: options.isTrustedOrigin,
    })

    const prefix = upstream.match.pathPrefix
    // The WebSocket client options accept rewriteRequestHeaders at runtime, but the plugin's
    // type declarations omit it (see notes/stack.md), hence the typed constant.
    const wsClientOptions = {
      rewriteRequestHeaders: (headers: Headers, req: FastifyRequest) => rewrite(req, { ...headers, ...pick(req.headers) }),
    }
    await app.register(httpProxy, {
      upstream: upstream.target,
      prefix,
      // The upstream sees the same (normalized) path the gateway matched and authorized.
      rewritePrefix: prefix,
      config: { upstream: upstream.name },
      ...(upstream.match.hosts === undefined ? {} : { constraints: { host: hostPattern(upstream.match.hosts) } }),
      // @fastify/http-proxy types preHandler as a callback hook; Fastify awaits an async hook's
      // promise (its Hooks reference), which is how a refusal thrown here becomes the answer.
      // eslint-disable-next-line @typescript-eslint/no-misused-promises
      preHandler: async (req: FastifyRequest, reply: FastifyReply) => {
        enforceUpgradePolicy(req.headers)
        // The credentials are the guard's answer: a refused exchange (403) or a provider down
        // (502) is thrown before anything reaches the upstream. Signed here, where waiting is
        // possible: the header rewrite that sends them is synchronous.
        const admitted = await guard(req, reply)
        // Answered already (a redirect to sign in): nothing is proxied.
        if (admitted === null) return reply
        ;(req as WithCredentials)[kCredentials] = admitted
        if (upstream.websocket && isUpgradeRequest(req.headers)) await options.grantWebSocket(req)
        return undefined
      },
      websocket: upstream.websocket,
      // Each socket it accepts is tracked under its upgrade's grant, and closed when that ends.
      // (The types allow wsServerOptions only with a literal `websocket: true`.)
      ...({ wsServerOptions: { WebSocket: options.websockets.WebSocket } } as object),
      // The gateway logs one line per request itself (onResponse in app.ts).
      disableRequestLogging: true,
      wsClientOptions: wsClientOptions as object,
      undici: {
        ...UPSTREAM_POOL,
        headersTimeout: upstream.timeoutMs,
        bodyTimeout: upstream.timeoutMs,
        // @fastify/reply-from passes rejectUnauthorized: false unless told otherwise (a connector
        // of our own ignores it): an https upstream's certificate is verified against Node's CA
        // store (NODE_EXTRA_CA_CERTS adds a private CA) for the target's host name, whatever Host
        // is sent (upstream-tls.ts), or identity headers and tokens would go to whoever answers.
        connect: upstreamConnector(upstream.target, upstream.connectTimeoutMs),
      },
      replyOptions: {
        rewriteRequestHeaders:
          tracing === undefined
            ? (req, headers) => rewrite(req as FastifyRequest, headers as Headers) as typeof headers
            : (req, headers) => {
                const rewritten = rewrite(req as FastifyRequest, headers)
                tracing.forward(req as FastifyRequest, rewritten, upstream.target)
                return rewritten
              },
        rewriteHeaders: (headers) => scrubResponseHeaders(headers as Headers, options.isGatewayCookieName) as typeof headers,
        onError: onError as never,
      },
    })
  }
}

/** The WebSocket client forwards no client headers by default; these few are passed on. */
function pick(headers: Headers): Headers {
  const out: Headers = {}
  for (const name of ['cookie', 'authorization', 'user-agent', 'origin', 'accept-language']) {
    if (headers[name] !== undefined) out[name] = headers[name]
  }
  return out
}
