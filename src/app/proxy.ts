import type { FastifyInstance } from 'fastify'
import { ASSERTION_JWKS_PATH } from '../contract/endpoints.js'
import type { GatewayConfig } from '../options/types.js'
import { createServedHostTest } from '../access/match.js'
import { upstreamTracing } from '../ops/request-tracing.js'
import { proxyPlugin } from '../proxy/plugin.js'
import { resourceMetadataRoutes } from '../proxy/resource-metadata-route.js'
import { createForwardedHost } from '../upstream/forwarded.js'
import type { AccessFeature } from './access.js'
import type { SessionsFeature } from './sessions.js'
import type { ProcessState } from './state.js'

// The proxy feature of one configuration: every upstream behind its guard (proxy/plugin.ts), the
// RFC 9728 documents of upstreams that publish them, and the public keys of identity assertions.

export async function registerProxy(
  app: FastifyInstance,
  config: GatewayConfig,
  state: ProcessState,
  sessions: SessionsFeature,
  access: AccessFeature,
): Promise<void> {
  const { publicUrl } = config.server
  const { signer, validateRedirectAfter } = access
  if (signer !== undefined) {
    // Outside the gateway's reserved paths, where verifiers look for it: it shadows an upstream's own file there.
    app.get(ASSERTION_JWKS_PATH, (_req, reply) => {
      reply.header('cache-control', 'public, max-age=300').send(signer.jwks)
    })
  }
  await app.register(resourceMetadataRoutes, { upstreams: config.upstreams, providers: config.providers, publicUrl })
  const publicOrigin = new URL(publicUrl)
  // The hosts the gateway serves: a request's own is passed on as X-Forwarded-Host, any other is the public host.
  const isServed = createServedHostTest(config.upstreams, (host) => validateRedirectAfter(`${publicOrigin.protocol}//${host}/`) !== null)
  const { websockets, tracing } = state
  await app.register(proxyPlugin, {
    upstreams: config.upstreams,
    isTrustedProxy: access.isTrustedProxy,
    forwardedHost: createForwardedHost(isServed, publicOrigin.host),
    credentials: access.credentials,
    isGatewayCookieName: sessions.cookies.isGatewayCookieName,
    // The pages that may open WebSockets: the public origin, the allowed hosts over https.
    isTrustedOrigin: access.isTrustedOrigin,
    access: access.access,
    answers: access.answers,
    websockets,
    grantWebSocket: async (req) => websockets.grant(await access.socketAccess.grant(req)),
    ...(tracing === undefined ? {} : { tracing: upstreamTracing(tracing) }),
  })
}
