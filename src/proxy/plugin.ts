import httpProxy from '@fastify/http-proxy'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { UpstreamConfig } from '../config/types.js'
import { GatewayError } from '../errors.js'
import { createGuard, type GuardDeps } from './guard.js'
import { createTrustCheck, forwardedValues } from './forwarded.js'
import { GATEWAY_ONLY_HEADERS, createHeaderScrubber, identityHeaderValues, stripCookies } from './identity-headers.js'
import { hostPattern } from './match.js'

// One @fastify/http-proxy registration per upstream. Fastify's router does the matching: each
// upstream owns the routes `<prefix>` and `<prefix>/*`, constrained to its hosts, so the longest
// prefix wins on segment boundaries and requests arrive here already normalized (see rewriteUrl
// in app.ts).

export interface ProxyOptions extends GuardDeps {
  upstreams: UpstreamConfig[]
  trustedProxies: string[]
  isGatewayCookie: (name: string) => boolean
}

type Headers = Record<string, string | string[] | undefined>

export async function proxyPlugin(app: FastifyInstance, options: ProxyOptions): Promise<void> {
  const isTrusted = createTrustCheck(options.trustedProxies)

  for (const upstream of options.upstreams) {
    const names = upstream.identityHeaders
    const scrub = createHeaderScrubber([names.user, names.email, names.groups, names.preferredUsername, ...GATEWAY_ONLY_HEADERS])

    /** The header policy, shared by HTTP requests and WebSocket upgrades. */
    const rewrite = (req: FastifyRequest, headers: Headers): Headers => {
      const forwarded = forwardedValues(req.headers, req.socket.remoteAddress, isTrusted(req.socket.remoteAddress), req.protocol)
      scrub(headers)
      const cookie = headers.cookie
      if (typeof cookie === 'string') {
        const kept = stripCookies(cookie, options.isGatewayCookie)
        if (kept === undefined) delete headers.cookie
        else headers.cookie = kept
      }
      Object.assign(headers, forwarded)
      const identity = req.identity
      if (identity !== null) {
        Object.assign(headers, identityHeaderValues(identity.claims, names))
        if (upstream.forwardAccessToken) headers.authorization = `Bearer ${identity.accessToken}`
      }
      return headers
    }

    const onError = (reply: FastifyReply, { error }: { error: { statusCode?: number } }): void => {
      const timedOut = error.statusCode === 504
      reply.send(
        timedOut
          ? new GatewayError('upstream_timeout', `the upstream ${upstream.name} did not answer in time`)
          : new GatewayError('upstream_unavailable', `the upstream ${upstream.name} is unreachable`),
      )
    }

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
      ...(upstream.match.hosts === undefined ? {} : { constraints: { host: hostPattern(upstream.match.hosts) } }),
      preHandler: createGuard(upstream, options),
      websocket: upstream.websocket,
      // The gateway logs one line per request itself (onResponse in app.ts).
      disableRequestLogging: true,
      wsClientOptions: wsClientOptions as object,
      undici: {
        connections: 128,
        pipelining: 1,
        headersTimeout: upstream.timeoutMs,
        bodyTimeout: upstream.timeoutMs,
      },
      replyOptions: {
        rewriteRequestHeaders: (req, headers) => rewrite(req as FastifyRequest, headers as Headers) as typeof headers,
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
