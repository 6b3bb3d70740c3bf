// `openid-gateway check --online` asks the provider about the gateway's own client, the two
// settings whose mistakes otherwise show only at the first sign-in: its credentials and its
// redirect URI. Each probe is a request that cannot grant anything, sent with the openid-client
// Configuration sign-ins use (OidcClient.configuration: the same client authentication, fetch,
// timeout and TLS rules), so the provider sees exactly what a sign-in would send it.
//
// - Credentials: a token request (RFC 6749 4.1.3) with a code that cannot exist. The provider
//   authenticates the client before it looks at the grant, and RFC 6749 5.2 names the two
//   answers apart: `invalid_client` ("client authentication failed", 401 when the client used
//   Basic) and `invalid_grant` (the code is invalid: so the client was authenticated).
//   `unauthorized_client` (5.2: the authenticated client may not use this grant; Keycloak 26
//   answers it, with 401, for a wrong secret) is a refusal of the client too. Keycloak
//   (AuthorizationCodeGrantType: "Code not valid"), Ory Hydra (fosite flow_authorize_code_token.go:
//   a code not found is ErrInvalidGrant) and oidc-provider answer invalid_grant once the client
//   is authenticated. Anything else does not tell.
// - Redirect URI: a pushed authorization request (RFC 9126) when the provider has an endpoint for
//   it. 2.1: the provider validates a pushed request as it would an authorization request, the
//   redirect URI included (RFC 6749 3.1.2.3: registered URIs), and 2.3 answers in the token
//   endpoint's error format: Keycloak's ParEndpoint says `invalid_request` "Invalid parameter:
//   redirect_uri", oidc-provider `invalid_redirect_uri`. The request_uri it returns is never used
//   and expires by itself (2.2: expires_in, "typically" 5 to 600 seconds; Keycloak's ParConfig:
//   60 s).
//   Without PAR, or when the provider refuses the pushed request's client authentication (which
//   the credentials' verdict reports; Keycloak's AbstractParEndpoint answers 401 invalid_request
//   "Authentication failed."), the authorization endpoint, which takes no credential, is asked
//   with prompt=none and no cookie. RFC 6749 4.1.2.1 has the provider send every error back to a
//   valid redirect URI and never to an invalid one (OpenID Connect Core 3.1.2.6: login_required
//   when nobody is signed in), so a redirect back to the URI says it is registered, and a 4xx (or
//   a redirect elsewhere with an error, Ory Hydra's error page) that names the redirect URI says it
//   is not. Anything else (a login page, a refusal that names nothing) does not tell.

import type { FastifyBaseLogger } from 'fastify'
import * as oidc from 'openid-client'
import type { ProviderConfig } from '../options/types.js'
import { namesRedirectUri, providerKeyPath, refusesRedirectUri, requestedScopes } from './client.js'
import { describe, grantProblem, isProviderFault } from './errors.js'
import { MAX_PROVIDER_BODY_BYTES, ProviderFaultError, ProviderUnreachableError, readLimited } from './fetch.js'
import type { SupportVerdict } from './support-verdict.js'

/** What a probe needs of a discovered provider. */
export interface ProbeTarget {
  config: ProviderConfig
  /** OidcClient.configuration: what sign-ins authenticate with. */
  configuration: oidc.Configuration
  /** The redirect URI sign-ins send (OidcClient.redirectUri). */
  redirectUri: string
  log?: Pick<FastifyBaseLogger, 'debug'>
}

export const CREDENTIALS_ITEM = 'client credentials'
export const REDIRECT_URI_ITEM = 'redirect URI'

/** The provider's own words, cut to this length in a verdict line. */
const WORDS_CHARS = 300

/** The keys that make up the client's authentication, in words for a verdict. */
function credentialKeys(config: ProviderConfig): string {
  const key = (k: keyof ProviderConfig): string => providerKeyPath(config, k)
  if (config.clientAuthMethod === 'private_key_jwt') {
    return `${key('clientId')} and ${key('clientKey')} (its public key must be the one registered at the provider: openid-gateway jwks prints it; Ory Hydra also needs ${key('clientAssertionAudience')}: token_endpoint)`
  }
  return `${key('clientId')} and ${key('clientSecret')}, and that the provider registered the client for ${config.clientAuthMethod} (${key('clientAuthMethod')})`
}

/** The provider's error and description, as a verdict quotes them. */
function said(error: unknown, description: unknown): string {
  const cut = typeof description === 'string' && description.length > WORDS_CHARS ? `${description.slice(0, WORDS_CHARS)}…` : description
  const words = typeof cut === 'string' && cut !== '' ? `: ${cut}` : ''
  return `${typeof error === 'string' ? error : 'no OAuth error'}${words}`
}

/** `undefined` when the call got an answer; else the failure in words (unreachable, 5xx, not OAuth). */
function fault(err: unknown): string | undefined {
  if (!isProviderFault(err)) return undefined
  // openid-client wraps providerFetch's errors ("something went wrong"): theirs say what happened.
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (e instanceof ProviderFaultError || e instanceof ProviderUnreachableError) return e.message
  }
  return err instanceof Error ? err.message : String(err)
}

/**
 * RFC 6749 5.2: the provider refused the client itself: invalid_client or unauthorized_client (as
 * errors.ts classifies a grant's error), or any error with HTTP 401, which 5.2 keeps for a failed
 * client authentication (Keycloak's PAR endpoint, AbstractParEndpoint.authorizeClient, answers
 * such a failure with 401 invalid_request "Authentication failed.").
 */
function refusesClient(err: unknown): boolean {
  return grantProblem(err, 'code_invalid', 'provider_unavailable', 'check').code === 'provider_rejected_client' || describe(err).status === 401
}

/**
 * The verdict on the client's credentials from the token endpoint's answer to a made-up code:
 * `err` is what openid-client threw, `undefined` when it issued tokens (which no provider should).
 */
export function credentialsVerdict(config: ProviderConfig, err: unknown): SupportVerdict {
  const item = CREDENTIALS_ITEM
  if (err === undefined) {
    return { item, ok: true, cannotTell: true, said: 'cannot tell: the token endpoint accepted a made-up code, which it should have refused' }
  }
  const failed = fault(err)
  if (failed !== undefined) return { item, ok: true, cannotTell: true, said: `cannot tell: ${failed}` }
  const { error, error_description: description, status } = describe(err)
  const http = typeof status === 'number' ? `, HTTP ${status}` : ''
  if (refusesClient(err)) {
    return {
      item,
      ok: false,
      said: `the token endpoint refused the client (${said(error, description)}${http}): sign-ins would fail at the callback. Check ${credentialKeys(config)}${error === 'unauthorized_client' ? ', and that the client may use the authorization code grant' : ''}`,
    }
  }
  if (error === 'invalid_grant') {
    return {
      item,
      ok: true,
      said: `the token endpoint authenticated the client (${config.clientAuthMethod}) and refused only the made-up code (invalid_grant)`,
    }
  }
  return {
    item,
    ok: true,
    cannotTell: true,
    said: `cannot tell: the token endpoint answered a made-up code with ${said(error, description)}${http}, neither invalid_client (wrong credentials) nor invalid_grant (right ones)`,
  }
}

/** The parameters of a sign-in's authorization request that a probe sends (fresh values, kept nowhere). */
async function authorizationParameters(target: ProbeTarget): Promise<Record<string, string>> {
  return {
    redirect_uri: target.redirectUri,
    scope: requestedScopes(target.config).join(' '),
    state: oidc.randomState(),
    nonce: oidc.randomNonce(),
    code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
    code_challenge_method: 'S256',
  }
}

/** With provider.dpop, sign-ins send DPoP proofs to the token and PAR endpoints: so do the probes, with a key of their own. */
async function dpopOptions(target: ProbeTarget): Promise<{ DPoP: oidc.DPoPHandle } | undefined> {
  if (!target.config.dpop) return undefined
  return { DPoP: oidc.getDPoPHandle(target.configuration, await oidc.randomDPoPKeyPair('ES256')) }
}

/** RFC 6749 4.1.3 with a code that cannot exist, authenticated as the code grant of a sign-in. */
export async function probeCredentials(target: ProbeTarget): Promise<SupportVerdict> {
  const parameters = {
    // Recognizable in the provider's logs; random, so it can match no code.
    code: `openid-gateway-check-${oidc.randomState()}`,
    redirect_uri: target.redirectUri,
    code_verifier: oidc.randomPKCECodeVerifier(),
  }
  try {
    await oidc.genericGrantRequest(target.configuration, 'authorization_code', parameters, await dpopOptions(target))
    return credentialsVerdict(target.config, undefined)
  } catch (err) {
    target.log?.debug({ probe: 'credentials', ...describe(err) }, 'check --online: the token endpoint answered the made-up code')
    return credentialsVerdict(target.config, err)
  }
}

/** The verdict on the redirect URI from a pushed authorization request: `err` as openid-client threw it, `undefined` when it was accepted. */
export function parVerdict(config: ProviderConfig, redirectUri: string, err: unknown): SupportVerdict {
  const item = REDIRECT_URI_ITEM
  if (err === undefined) {
    return {
      item,
      ok: true,
      said: `${redirectUri} is registered: the provider accepted a pushed authorization request for it (its request_uri is never used and expires by itself)`,
    }
  }
  const failed = fault(err)
  if (failed !== undefined) return { item, ok: true, cannotTell: true, said: `cannot tell: ${failed}` }
  const described = describe(err)
  const { error, error_description: description } = described
  if (refusesRedirectUri(described)) {
    return {
      item,
      ok: false,
      said: `the provider refused ${redirectUri} in a pushed authorization request (${said(error, description)}): register it, exactly so, as a redirect URI of client ${config.clientId}`,
    }
  }
  return {
    item,
    ok: true,
    cannotTell: true,
    said: `cannot tell: the provider refused the pushed authorization request for another reason (${said(error, description)})`,
  }
}

/** What the authorization endpoint answered a probe: its status, where it redirected (absolute), and (for a 4xx) its body. */
export interface AuthorizationAnswer {
  status: number
  location: string | undefined
  body: string
}

/** Whether `location` is `redirectUri` with a query of its own (the response's parameters). */
function backTo(location: string, redirectUri: string): boolean {
  try {
    const at = new URL(location)
    const uri = new URL(redirectUri)
    return at.origin === uri.origin && at.pathname === uri.pathname
  } catch {
    return false
  }
}

/** The verdict on the redirect URI from the authorization endpoint's answer to a prompt=none request without cookies. */
export function authorizationVerdict(config: ProviderConfig, redirectUri: string, answer: AuthorizationAnswer): SupportVerdict {
  const item = REDIRECT_URI_ITEM
  const redirected = answer.status >= 300 && answer.status < 400 && answer.location !== undefined
  if (redirected && backTo(answer.location ?? '', redirectUri)) {
    const error = new URL(answer.location ?? '').searchParams.get('error')
    return {
      item,
      ok: true,
      said: `${redirectUri} is registered: the authorization endpoint sent a sign-in request with prompt=none back to it${error === null ? '' : ` (error=${error})`}`,
    }
  }
  // A redirect elsewhere (Ory Hydra's error page) names the problem in its error parameters only.
  const query = redirected ? new URL(answer.location ?? '').searchParams : undefined
  const words = query === undefined ? '' : ['error', 'error_description', 'error_hint'].map((name) => query.get(name) ?? '').join(' ')
  const named =
    query !== undefined ? query.get('error') !== null && namesRedirectUri(words) : answer.status >= 400 && answer.status < 500 && namesRedirectUri(answer.body)
  if (named) {
    const quoted = query === undefined ? '' : `, ${said(query.get('error'), query.get('error_hint') ?? query.get('error_description'))}`
    return {
      item,
      ok: false,
      said: `the authorization endpoint refused ${redirectUri} (HTTP ${answer.status}${quoted}) and did not send the sign-in back to it: register it, exactly so, as a redirect URI of client ${config.clientId}`,
    }
  }
  return {
    item,
    ok: true,
    cannotTell: true,
    said: `cannot tell: the authorization endpoint answered a sign-in request with prompt=none with HTTP ${answer.status}${redirected ? ' elsewhere' : ''}, not naming the redirect URI; make sure ${redirectUri} is registered`,
  }
}

/** The redirect URI, by a pushed authorization request when the provider has the endpoint, else by its authorization endpoint. */
export async function probeRedirectUri(target: ProbeTarget): Promise<SupportVerdict> {
  const { configuration, config, redirectUri } = target
  const server = configuration.serverMetadata()
  const parameters = await authorizationParameters(target)
  if (server.pushed_authorization_request_endpoint !== undefined) {
    // Sign-ins with form_post push it too; the provider checks it with the rest.
    if (config.responseMode === 'form_post') parameters.response_mode = 'form_post'
    try {
      await oidc.buildAuthorizationUrlWithPAR(configuration, parameters, await dpopOptions(target))
      return parVerdict(config, redirectUri, undefined)
    } catch (err) {
      target.log?.debug({ probe: 'par', ...describe(err) }, 'check --online: the pushed authorization request was refused')
      // A pushed request is authenticated: with credentials the provider refuses (the credentials'
      // verdict says so), the authorization endpoint, which takes none, is asked instead.
      if (!refusesClient(err)) return parVerdict(config, redirectUri, err)
    }
  }
  return probeAuthorizationEndpoint(target, parameters)
}

/** The redirect URI by the authorization endpoint's answer to a prompt=none request without cookies. */
async function probeAuthorizationEndpoint(target: ProbeTarget, parameters: Record<string, string>): Promise<SupportVerdict> {
  const { configuration, config, redirectUri } = target
  if (configuration.serverMetadata().authorization_endpoint === undefined) {
    return {
      item: REDIRECT_URI_ITEM,
      ok: true,
      cannotTell: true,
      said: `cannot tell: the provider advertises no authorization endpoint; make sure ${redirectUri} is registered`,
    }
  }
  // No response_mode: the answer comes back as a redirect, whatever the gateway's sign-ins use.
  const { response_mode: _mode, ...query } = parameters
  const url = oidc.buildAuthorizationUrl(configuration, { ...query, prompt: 'none' })
  try {
    const res = await fetch(url, { redirect: 'manual', signal: AbortSignal.timeout(config.timeoutMs) })
    const status = res.status
    // A refusal page larger than any provider's is read as naming nothing.
    const body = status >= 400 && status < 500 ? await readLimited(res, MAX_PROVIDER_BODY_BYTES).catch(() => '') : (await res.body?.cancel(), '')
    const location = res.headers.get('location')
    return authorizationVerdict(config, redirectUri, { status, location: location === null ? undefined : new URL(location, url).href, body })
  } catch (err) {
    return {
      item: REDIRECT_URI_ITEM,
      ok: true,
      cannotTell: true,
      said: `cannot tell: ${new ProviderUnreachableError(url.href, err).message}; make sure ${redirectUri} is registered`,
    }
  }
}
