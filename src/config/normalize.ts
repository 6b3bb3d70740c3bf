// Derived defaults and canonical forms, applied once the configuration is known to be valid, so
// that no other module has to lowercase a host or strip a trailing slash again.

import { asciiLower } from '../lib/url-chars.js'
import { FAPI2_ALGORITHMS } from '../oidc/profile.js'
import { DEFAULT_PROVIDER, type AllowRules, type ConfigFile, type CookiesConfig, type GatewayConfig, type ProviderConfig, type UpstreamConfig } from './types.js'

export function normalizeConfig(config: ConfigFile): GatewayConfig {
  // checks.ts has made sure that exactly one of the two forms is there.
  const providers = (config.providers ?? (config.provider === undefined ? [] : [{ name: DEFAULT_PROVIDER, ...config.provider }])).map(normalizeProvider)
  const names = providers.map((p) => p.name)
  return {
    // The origin drops the tolerated trailing slash and canonicalizes case and default ports.
    server: { ...config.server, publicUrl: new URL(config.server.publicUrl).origin },
    providers,
    cookies: normalizeCookies(config.cookies),
    session: { ...config.session },
    redirects: { allowedHosts: config.redirects.allowedHosts.map(asciiLower) },
    rateLimit: { signIn: { ...config.rateLimit.signIn } },
    upstreams: config.upstreams.map((upstream) => normalizeUpstream(upstream, names)),
    assertions: { ...config.assertions },
    log: { ...config.log },
  }
}

// The issuer is left exactly as written: it must equal the `iss` the provider puts in tokens.
function normalizeProvider(provider: ProviderConfig): ProviderConfig {
  const audiences = provider.audiences.length > 0 ? provider.audiences : [provider.clientId]
  if (provider.profile !== 'fapi2') return { ...provider, audiences }
  // FAPI 2.0: PAR and sender-constrained tokens are not options, and only its algorithms verify.
  return {
    ...provider,
    audiences,
    pushedAuthorizationRequests: 'required',
    dpop: true,
    bearer: { ...provider.bearer, algorithms: provider.bearer.algorithms.filter((alg) => FAPI2_ALGORITHMS.includes(alg)) },
  }
}

function normalizeCookies(cookies: CookiesConfig): CookiesConfig {
  // Browsers ignore a leading dot in Domain; without it the value compares plainly.
  if (cookies.domain === undefined) return { ...cookies }
  return { ...cookies, domain: asciiLower(cookies.domain.replace(/^\./, '')) }
}

function normalizeUpstream(upstream: ConfigFile['upstreams'][number], providers: readonly string[]): UpstreamConfig {
  const { hosts } = upstream.match
  return {
    ...upstream,
    providers: [...(upstream.providers ?? providers)],
    match: {
      pathPrefix: normalizePathPrefix(upstream.match.pathPrefix),
      ...(hosts === undefined ? {} : { hosts: normalizeHosts(hosts) }),
    },
    allow: normalizeAllow(upstream.allow),
    identityHeaders: { ...upstream.identityHeaders },
  }
}

function normalizeAllow(allow: AllowRules): AllowRules {
  return {
    ...allow,
    ...(allow.emails === undefined ? {} : { emails: allow.emails.map(asciiLower) }),
    ...(allow.emailDomains === undefined ? {} : { emailDomains: allow.emailDomains.map(asciiLower) }),
  }
}

/** `/app/` and `/app` are the same prefix; `/` stays `/`. */
export function normalizePathPrefix(prefix: string): string {
  return prefix.length > 1 && prefix.endsWith('/') ? prefix.slice(0, -1) : prefix
}

/** Lowercased and deduplicated, in the order written. */
export function normalizeHosts(hosts: readonly string[]): string[] {
  return [...new Set(hosts.map(asciiLower))]
}
