// Derived defaults and canonical forms, applied once the configuration is known to be valid, so
// that no other module has to lowercase a host or strip a trailing slash again.

import { asciiLower } from '../lib/url-chars.js'
import { FAPI2_ALGORITHMS } from '../oidc/profile.js'
import { DEFAULT_ENVOY_PATH_PREFIX } from '../options/schema.js'
import { ANY_PROVIDER, DEFAULT_PROVIDER, type AllowRules, type ConfigFile, type CookiesConfig, type GatewayConfig, type ProviderConfig, type UpstreamConfig } from '../options/types.js'

/** The container image sets it (docker/Dockerfile): the management listener's default address there. */
export const MANAGEMENT_HOST_ENV = 'OPENID_GATEWAY_MANAGEMENT_HOST'

export function normalizeConfig(config: ConfigFile, env: Readonly<Record<string, string | undefined>> = {}): GatewayConfig {
  // cross-key/providers.ts has made sure that exactly one of the two forms is there.
  const providers = (config.providers ?? (config.provider === undefined ? [] : [{ name: DEFAULT_PROVIDER, ...config.provider }])).map(normalizeProvider)
  const names = providers.map((p) => p.name)
  return {
    // The origin drops the tolerated trailing slash and canonicalizes case and default ports.
    server: {
      ...config.server,
      publicUrl: new URL(config.server.publicUrl).origin,
      // /metrics and /config answer anyone who reaches them: this host only, unless said otherwise.
      managementHost: config.server.managementHost ?? (env[MANAGEMENT_HOST_ENV] || '127.0.0.1'),
    },
    providers,
    cookies: normalizeCookies(config.cookies),
    session: { ...config.session },
    redirects: { allowedHosts: config.redirects.allowedHosts.map(asciiLower) },
    rateLimit: { signIn: { ...config.rateLimit.signIn } },
    upstreams: config.upstreams.map((upstream) => normalizeUpstream(upstream, names)),
    assertions: { ...config.assertions },
    websocket: { ...config.websocket },
    forwardAuth: { cache: { ...config.forwardAuth.cache } },
    // cross-key/envoy.ts has refused the file that gives both names.
    envoy: { pathPrefix: config.envoy.pathPrefix ?? config.forwardAuth.extAuthzPath ?? DEFAULT_ENVOY_PATH_PREFIX },
    log: { ...config.log, redactQueryParams: [...config.log.redactQueryParams] },
    telemetry: config.telemetry.tracing === undefined ? {} : { tracing: { ...config.telemetry.tracing } },
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
  const plain = (domain: string): string => asciiLower(domain.replace(/^\./, ''))
  return {
    ...cookies,
    ...(cookies.domain === undefined ? {} : { domain: plain(cookies.domain) }),
    ...(cookies.domains === undefined ? {} : { domains: [...new Set(cookies.domains.map(plain))] }),
  }
}

/**
 * An upstream's providers: as listed; every provider for `['*']`; the first configured (the
 * default) when unset. Accepting every provider is said explicitly, because users of two providers
 * are different people even when their claims look alike.
 */
export function upstreamProviders(listed: readonly string[] | undefined, providers: readonly string[]): string[] {
  if (listed === undefined) return providers.slice(0, 1)
  return listed.includes(ANY_PROVIDER) ? [...providers] : [...listed]
}

/**
 * The providers an upstream's `allow` rules admit, explicit: `['*']` is the upstream's providers;
 * unset, with several of them and a rule on claims, its default provider alone (a group named
 * `admins` at a partner's provider is not the staff's `admins`); unset otherwise, no restriction.
 */
export function allowProviders(allow: AllowRules, accepted: readonly string[]): string[] | undefined {
  if (allow.providers !== undefined) return allow.providers.includes(ANY_PROVIDER) ? [...accepted] : [...allow.providers]
  // Kinds given empty do not restrict (allow.ts), so they do not count as rules here either.
  // An `acr` is named by its provider too (step-up): one provider's `mfa` says nothing of another's.
  const claimRules = [allow.emails, allow.emailDomains, allow.groups, allow.acr].some((kind) => kind !== undefined && kind.length > 0) || Object.keys(allow.claims ?? {}).length > 0
  return accepted.length > 1 && claimRules ? accepted.slice(0, 1) : undefined
}

function normalizeUpstream(upstream: ConfigFile['upstreams'][number], providers: readonly string[]): UpstreamConfig {
  const { hosts } = upstream.match
  const accepted = upstreamProviders(upstream.providers, providers)
  const explicit = (rules: AllowRules): AllowRules => {
    const allow = normalizeAllow(rules)
    const admitted = allowProviders(allow, accepted)
    return admitted === undefined ? allow : { ...allow, providers: admitted }
  }
  return {
    ...upstream,
    providers: accepted,
    match: {
      pathPrefix: normalizePathPrefix(upstream.match.pathPrefix),
      ...(hosts === undefined ? {} : { hosts: normalizeHosts(hosts) }),
    },
    allow: explicit(upstream.allow),
    // Each rule's allow is explicit about providers as the upstream's is.
    rules: upstream.rules.map((rule) => ({ ...rule, ...(rule.path === undefined ? {} : { path: normalizePathPrefix(rule.path) }), allow: explicit(rule.allow) })),
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
