// What a provider says it supports, against what the gateway is configured to ask of it
// (`openid-gateway check --online`). The same discovery and key loading as the running gateway
// (OidcClient.discover: openid-client through providerFetch, the provider's timeoutMs, TLS and
// allowInsecureHttp), so an answer here is the answer the gateway would get at start. Then the
// client itself (client-probe.ts): its credentials, by a token request with a code that cannot
// exist, and its redirect URI, by a pushed authorization request or the authorization endpoint;
// neither can grant anything.
//
// Security rationale: a wrong issuer, scheme or port, or a client registered with another
// authentication method, otherwise shows only at the first sign-in, on the provider's own error
// page. The verdicts follow the documents that define each member:
// - OpenID Connect Discovery 1.0 section 4.3: the `issuer` of the document must be identical to
//   the issuer it was fetched for (compared as strings, no normalization);
// - Discovery 1.0 section 3: `token_endpoint_auth_methods_supported` defaults to
//   client_secret_basic when omitted; `id_token_signing_alg_values_supported` is required, and
//   RS256 must be in it;
// - RFC 8414 section 2: `code_challenge_methods_supported` omitted means no PKCE (the gateway
//   always sends S256, RFC 7636 4.2);
// - RFC 9126 section 5: `pushed_authorization_request_endpoint`, `require_pushed_authorization_requests`;
// - OpenID Connect RP-Initiated Logout 1.0 section 2.1: `end_session_endpoint`;
// - OpenID Connect Back-Channel Logout 1.0 section 2.1: `backchannel_logout_supported`;
// - Discovery 1.0 section 3: `userinfo_endpoint`, with provider.claimSources.userInfo.

import type { FastifyBaseLogger } from 'fastify'
import type * as oidc from 'openid-client'
import type { GatewayConfig, ProviderConfig } from '../options/types.js'
import { systemClock, type Clock } from '../lib/clock.js'
import { BACKCHANNEL_LOGOUT_PATH, callbackPath } from '../contract/endpoints.js'
import { idTokenSigningAlgs } from './algorithms.js'
import { OidcClient, usesPar } from './client.js'
import { probeCredentials, probeRedirectUri } from './client-probe.js'
import { describe } from './errors.js'
import { profileAlgorithms } from './profile.js'
import type { SupportVerdict } from './support-verdict.js'

export type { SupportVerdict } from './support-verdict.js'

/** A provider's answer to `check --online`. */
export interface ProviderSupport {
  provider: string
  issuer: string
  verdicts: SupportVerdict[]
  ok: boolean
}

const PKCE_METHOD = 'S256'

function listed(value: unknown): string {
  return Array.isArray(value) ? value.join(', ') : 'not advertised'
}

/** Discovery 1.0 4.3: the issuer a document names must be the configured one, character for character. */
export function issuerIdentical(configured: string, advertised: unknown): SupportVerdict {
  if (advertised === configured) return { item: 'issuer', ok: true, said: `the provider names itself ${configured}` }
  return {
    item: 'issuer',
    ok: false,
    said: `the provider names itself ${typeof advertised === 'string' ? advertised : JSON.stringify(advertised)}, not ${configured}: set provider.issuer to exactly its value (OpenID Connect Discovery 1.0 section 4.3)`,
  }
}

/** Discovery 1.0 3: the configured client authentication is among those the token endpoint takes (client_secret_basic when none is listed). */
export function clientAuthMethodSupported(method: ProviderConfig['clientAuthMethod'], advertised: unknown): SupportVerdict {
  const supported = Array.isArray(advertised) ? advertised : ['client_secret_basic']
  const seen = `token_endpoint_auth_methods_supported: ${Array.isArray(advertised) ? advertised.join(', ') : 'not advertised, so client_secret_basic'}`
  if (supported.includes(method)) return { item: 'client authentication', ok: true, said: `${method} (${seen})` }
  return { item: 'client authentication', ok: false, said: `provider.clientAuthMethod ${method} is not supported (${seen})` }
}

/**
 * Discovery 1.0 3: ID tokens are signed with an algorithm the gateway accepts (asymmetric, pinned
 * by provider.idTokenAlgorithms or allowed by the profile) that the provider advertises.
 */
export function idTokenAlgorithmsSupported(config: Pick<ProviderConfig, 'idTokenAlgorithms' | 'profile'>, advertised: unknown): SupportVerdict {
  const allowed = profileAlgorithms(config)
  const accepted = idTokenSigningAlgs(advertised, config.idTokenAlgorithms).filter((alg) => allowed === undefined || allowed.includes(alg))
  const seen = `id_token_signing_alg_values_supported: ${listed(advertised)}`
  const common = Array.isArray(advertised) ? accepted.filter((alg) => advertised.includes(alg)) : accepted
  if (common.length > 0) return { item: 'ID token signing', ok: true, said: `${common.join(', ')} (${seen})` }
  const wanted =
    config.idTokenAlgorithms !== undefined
      ? `provider.idTokenAlgorithms ${config.idTokenAlgorithms.join(', ')}`
      : `an asymmetric algorithm${allowed === undefined ? '' : ` of ${allowed.join(', ')}`}`
  return { item: 'ID token signing', ok: false, said: `the gateway needs ${wanted}, which the provider does not advertise (${seen})` }
}

/**
 * RFC 8414 2 and RFC 7636 4.2: the gateway always sends an S256 code challenge. A provider that
 * lists other methods only refuses it; one that lists none says it ignores PKCE, which FAPI 2.0
 * (5.3.2.2) forbids and which otherwise leaves the nonce alone binding the code to the browser.
 */
export function pkceS256Supported(advertised: unknown, profile: ProviderConfig['profile']): SupportVerdict {
  const seen = `code_challenge_methods_supported: ${listed(advertised)}`
  if (Array.isArray(advertised) && advertised.includes(PKCE_METHOD)) return { item: 'PKCE', ok: true, said: `${PKCE_METHOD} (${seen})` }
  if (Array.isArray(advertised)) return { item: 'PKCE', ok: false, said: `the gateway sends ${PKCE_METHOD}, which the provider does not list (${seen})` }
  if (profile === 'fapi2') return { item: 'PKCE', ok: false, said: `provider.profile fapi2 needs ${PKCE_METHOD} (${seen})` }
  return { item: 'PKCE', ok: true, said: `${PKCE_METHOD} is sent; the provider does not say it checks it (${seen})` }
}

/** RFC 9126 5: provider.pushedAuthorizationRequests and what the provider offers or requires (the rule sign-ins use). */
export function parAgreed(setting: ProviderConfig['pushedAuthorizationRequests'], server: oidc.ServerMetadata): SupportVerdict {
  const seen = `pushed_authorization_request_endpoint: ${server.pushed_authorization_request_endpoint ?? 'not advertised'}, require_pushed_authorization_requests: ${String(server.require_pushed_authorization_requests ?? false)}`
  try {
    const pushed = usesPar(setting, server)
    return {
      item: 'PAR',
      ok: true,
      said: `${pushed ? 'authorization requests are pushed' : 'not used'} (provider.pushedAuthorizationRequests: ${setting}; ${seen})`,
    }
  } catch (err) {
    return { item: 'PAR', ok: false, said: `${err instanceof Error ? err.message : String(err)} (${seen})` }
  }
}

/**
 * RP-Initiated Logout 1.0 2.1: with provider.postLogoutRedirectUri the operator expects sign-out
 * at the provider, which needs its end_session_endpoint; without it, sign-out is at the gateway
 * alone when the provider has none.
 */
export function endSessionAvailable(postLogoutRedirectUri: string | undefined, endpoint: unknown): SupportVerdict {
  if (typeof endpoint === 'string') return { item: 'end-session', ok: true, said: `sign-out continues at ${endpoint}` }
  if (postLogoutRedirectUri !== undefined) {
    return {
      item: 'end-session',
      ok: false,
      said: 'provider.postLogoutRedirectUri is set, but the provider advertises no end_session_endpoint: sign-out ends the session at the gateway only',
    }
  }
  return { item: 'end-session', ok: true, said: 'no end_session_endpoint: sign-out ends the session at the gateway only' }
}

/**
 * Back-Channel Logout 1.0 2.1: informative. The gateway always serves its back-channel logout
 * endpoint; whether the provider calls it depends on the client's registration there.
 */
export function backchannelLogoutNoted(supported: unknown, backchannelUri: string): SupportVerdict {
  if (supported === true) return { item: 'back-channel logout', ok: true, said: `supported: register ${backchannelUri} as the client's backchannel_logout_uri` }
  return {
    item: 'back-channel logout',
    ok: true,
    said: 'not advertised (backchannel_logout_supported): sessions end at the provider only when they expire or sign out at the gateway',
  }
}

/** The verdicts on a discovered provider's metadata, against its configuration. */
export function supportVerdicts(config: ProviderConfig, server: oidc.ServerMetadata, backchannelUri: string): SupportVerdict[] {
  return [
    issuerIdentical(config.issuer, server.issuer),
    clientAuthMethodSupported(config.clientAuthMethod, server.token_endpoint_auth_methods_supported),
    idTokenAlgorithmsSupported(config, server.id_token_signing_alg_values_supported),
    pkceS256Supported(server.code_challenge_methods_supported, config.profile),
    parAgreed(config.pushedAuthorizationRequests, server),
    endSessionAvailable(config.postLogoutRedirectUri, server.end_session_endpoint),
    backchannelLogoutNoted(server.backchannel_logout_supported, backchannelUri),
    ...(config.claimSources?.userInfo === true ? [userInfoAvailable(server.userinfo_endpoint)] : []),
  ]
}

/** Discovery 1.0 3: `userinfo_endpoint`, which provider.claimSources.userInfo calls at every sign-in and refresh. */
export function userInfoAvailable(endpoint: unknown): SupportVerdict {
  if (typeof endpoint === 'string') return { item: 'UserInfo', ok: true, said: `claimSources.userInfo calls ${endpoint}` }
  return { item: 'UserInfo', ok: false, said: 'claimSources.userInfo is on but the provider advertises no userinfo_endpoint: every sign-in would fail (502)' }
}

/** What a failed discovery says, in one verdict: the issuer when the document names another, else the call that failed. */
export function discoveryFailure(config: ProviderConfig, err: unknown): SupportVerdict {
  const described = describe(err)
  if (described.check === 'issuer') return issuerIdentical(config.issuer, described.advertisedIssuer)
  const message = (described.err as { message?: string } | undefined)?.message ?? String(err)
  const details = [
    typeof described.status === 'number' ? `HTTP ${described.status}` : undefined,
    typeof described.error === 'string' ? `error ${described.error}` : undefined,
  ].filter((part) => part !== undefined)
  return { item: 'discovery', ok: false, said: `${message}${details.length === 0 ? '' : ` (${details.join(', ')})`}` }
}

export interface OnlineCheckOptions {
  publicUrl: string
  /** The provider's callback path (contract/endpoints.ts callbackPath). */
  callbackPath: string
  /** Where the provider would post logout tokens (the gateway's back-channel logout endpoint, absolute). */
  backchannelUri: string
  /** Takes the warnings discovery logs (silent is fine: the verdicts say the same). */
  log: FastifyBaseLogger
  clock: Clock
}

/** Discovers `config`'s provider as the gateway would, loads its JWKS, and compares. */
export async function checkProviderSupport(config: ProviderConfig, options: OnlineCheckOptions): Promise<ProviderSupport> {
  const client = new OidcClient(config, options.publicUrl, options.callbackPath, options.log, options.clock)
  let verdicts: SupportVerdict[]
  try {
    await client.discover()
    const server = client.advertised
    if (server === undefined) throw new Error('discovery kept no metadata')
    const keys = client.keys.exported()?.jwks.keys.length ?? 0
    const { configuration } = client
    if (configuration === undefined) throw new Error('discovery kept no configuration')
    const target = { config, configuration, redirectUri: client.redirectUri, log: options.log }
    verdicts = [
      ...supportVerdicts(config, server, options.backchannelUri),
      { item: 'JWKS', ok: keys > 0, said: `${keys} key${keys === 1 ? '' : 's'} from ${client.keys.uri ?? '?'}` },
      // The client itself, in turn: the redirect URI's probe authenticates again.
      await probeCredentials(target),
      await probeRedirectUri(target),
    ]
  } catch (err) {
    verdicts = [discoveryFailure(config, err)]
  } finally {
    client.stop()
  }
  return { provider: config.name, issuer: config.issuer, verdicts, ok: verdicts.every((v) => v.ok) }
}

/** `check --online`: every provider of `config`, all at once, as the gateway that runs `config` would ask them. */
export function checkProviders(config: GatewayConfig, log: FastifyBaseLogger, clock: Clock = systemClock): Promise<ProviderSupport[]> {
  const several = config.providers.length > 1
  return Promise.all(
    config.providers.map((provider) =>
      checkProviderSupport(provider, {
        publicUrl: config.server.publicUrl,
        callbackPath: callbackPath(provider.name, several, provider.redirectPath),
        backchannelUri: config.server.publicUrl + BACKCHANNEL_LOGOUT_PATH,
        log,
        clock,
      }),
    ),
  )
}
