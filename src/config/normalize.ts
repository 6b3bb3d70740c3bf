// Derived defaults and canonical forms, applied once the configuration is known to be valid, so
// that no other module has to lowercase a host or strip a trailing slash again.

import { asciiLower } from '../lib/url-chars.js'
import { FAPI2_ALGORITHMS } from '../oidc/profile.js'
import type { AllowRules, CookiesConfig, GatewayConfig, ProviderConfig, UpstreamConfig } from './types.js'

export function normalizeConfig(config: GatewayConfig): GatewayConfig {
  return {
    // The origin drops the tolerated trailing slash and canonicalizes case and default ports.
    server: { ...config.server, publicUrl: new URL(config.server.publicUrl).origin },
    provider: normalizeProvider(config.provider),
    cookies: normalizeCookies(config.cookies),
    session: { ...config.session },
    redirects: { allowedHosts: config.redirects.allowedHosts.map(asciiLower) },
    rateLimit: { signIn: { ...config.rateLimit.signIn } },
    upstreams: config.upstreams.map(normalizeUpstream),
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

function normalizeUpstream(upstream: UpstreamConfig): UpstreamConfig {
  const { hosts } = upstream.match
  return {
    ...upstream,
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
