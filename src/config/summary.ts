// The startup summary: once, at start, one log line per provider with what must be registered at
// the provider and what the gateway will do. A wrong redirect URI otherwise shows only on the
// provider's own error page, which never says which URI it was sent.
//
// Security rationale: the line is built from a fixed list of fields, never from the configuration
// as a whole, so no secret can slip in: no client secret or key, no cookie secret, no Redis
// password or URL credentials (only the store's kind and addresses), and no userinfo in an
// upstream's target. The redirect URI is the one OidcClient sends (contract/endpoints.ts
// redirectUri): RFC 6749 3.1.2 and OpenID Connect Core 3.1.2.1 compare it as a string.

import { BACKCHANNEL_LOGOUT_PATH, callbackPath, redirectUri } from '../contract/endpoints.js'
import type { GatewayConfig, SessionConfig } from '../options/types.js'
import { requestedScopes } from '../oidc/client.js'
import { sessionCookieName } from '../session/cookies.js'

export interface StartupSummaryLine {
  fields: Record<string, unknown>
  msg: string
}

export const STARTUP_SUMMARY_MESSAGE = 'startup summary: register the redirect URI at the provider as shown'

/** A URL without its user name and password: what a log may say of an address. */
export function withoutUserinfo(value: string): string {
  if (!URL.canParse(value)) return '(not a URL)'
  const url = new URL(value)
  url.username = ''
  url.password = ''
  return url.href
}

/** The session store: its kind, and for Redis its topology and addresses, never a credential. */
function sessionStore(session: SessionConfig): Record<string, unknown> {
  if (session.store !== 'redis') return { kind: session.store }
  const { redis } = session
  if (redis.sentinels !== undefined) return { kind: 'redis', topology: 'sentinel', primary: redis.sentinels.name, nodes: redis.sentinels.nodes, tls: redis.sentinels.tls }
  if (redis.cluster !== undefined) return { kind: 'redis', topology: 'cluster', nodes: redis.cluster.nodes, tls: redis.tls }
  if (session.redisUrl === undefined || !URL.canParse(session.redisUrl)) return { kind: 'redis', topology: 'single' }
  const url = new URL(session.redisUrl)
  return { kind: 'redis', topology: 'single', address: `${url.protocol}//${url.host}` }
}

/** One line per provider: the redirect URI(s) to register, how the client authenticates, the scopes; the cookies, store and upstreams. */
export function startupSummary(config: GatewayConfig): StartupSummaryLine[] {
  const several = config.providers.length > 1
  const { cookies } = config
  const shared = {
    cookie: {
      name: sessionCookieName(cookies),
      domain: cookies.domain ?? null,
      ...(cookies.domains === undefined ? {} : { domains: cookies.domains }),
      secure: cookies.secure, sameSite: cookies.sameSite },
    sessionStore: sessionStore(config.session),
    upstreams: config.upstreams.map((u) => ({
      name: u.name,
      match: { pathPrefix: u.match.pathPrefix, ...(u.match.hosts === undefined ? {} : { hosts: u.match.hosts }) },
      target: withoutUserinfo(u.target),
      auth: u.auth,
      providers: u.providers,
    })),
  }
  return config.providers.map((provider) => ({
    msg: STARTUP_SUMMARY_MESSAGE,
    fields: {
      provider: provider.name,
      issuer: provider.issuer,
      clientId: provider.clientId,
      redirectUris: [redirectUri(config.server.publicUrl, callbackPath(provider.name, several, provider.redirectPath))],
      clientAuthMethod: provider.clientAuthMethod,
      scopes: requestedScopes(provider),
      responseMode: provider.responseMode,
      backchannelLogoutUri: config.server.publicUrl + BACKCHANNEL_LOGOUT_PATH,
      ...(provider.postLogoutRedirectUri === undefined ? {} : { postLogoutRedirectUri: provider.postLogoutRedirectUri }),
      ...shared,
    },
  }))
}
