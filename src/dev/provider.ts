// A development OpenID provider (oidc-provider 9) for `npm run demo` and the integration tests.
// It behaves like a strict real-world IdP: PKCE required, refresh tokens only through
// offline_access + consent, revocation and RP-initiated logout enabled. Its clients are first-party,
// as a company's gateway is at its own IdP: what they ask for is granted without a consent screen,
// except prompt=consent (which offline_access needs, OpenID Connect Core 1.0 section 11), which
// always shows it. Never use it in production:
// accounts are invented from whatever username is typed, and all state lives in memory.

import { randomBytes, randomUUID } from 'node:crypto'
import { createServer, type IncomingMessage } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import { parse as parseQuery } from 'node:querystring'
import * as jose from 'jose'
import { listen } from './listen.js'
import type Provider from 'oidc-provider'
import type { Account, ClientMetadata, Configuration, interactionPolicy as providerInteractionPolicy, KoaContextWithOIDC } from 'oidc-provider'

export interface DevClient {
  clientId: string
  /** Required unless the client authenticates with private_key_jwt. */
  clientSecret?: string
  redirectUris: string[]
  postLogoutRedirectUris?: string[]
  /** Default `client_secret_basic`. oidc-provider accepts basic and post interchangeably anyway. */
  tokenEndpointAuthMethod?: 'client_secret_basic' | 'client_secret_post' | 'private_key_jwt'
  /** The client's public keys (private_key_jwt). */
  jwks?: { keys: jose.JWK[] }
  /** RFC 9126 4: authorization requests of this client must be pushed. */
  requirePushedAuthorizationRequests?: boolean
  /** RFC 9449 5.2: this client's access tokens must be DPoP-bound. */
  dpopBoundAccessTokens?: boolean
  /** OpenID Connect Back-Channel Logout: the provider POSTs a logout token here on end-session. */
  backchannelLogoutUri?: string
}

export interface DevProviderOptions {
  host?: string
  /** 0 (default) picks an ephemeral port. */
  port?: number
  /**
   * Serve https with this key and certificate (PEM): the issuer is then `https://HOST:PORT`, which a
   * gateway accepts without `provider.allowInsecureHttp` (it must trust the certificate, e.g.
   * through NODE_EXTRA_CA_CERTS). Default plain http.
   */
  tls?: { key: string | Buffer; cert: string | Buffer }
  clients: DevClient[]
  /**
   * Claims every account has besides devAccountClaims, by name, from its username: nested objects
   * as Keycloak's `realm_access`, URL-named ones as Auth0's. They go in the ID token with the
   * `profile` scope.
   */
  extraClaims?: Record<string, (username: string) => unknown>
  /** Default 3600. */
  accessTokenTtlSeconds?: number
  /**
   * Lifetime of the access tokens a refresh grant issues; defaults to `accessTokenTtlSeconds`.
   * A test that lets the sign-in's token expire in real time sets it long, so that the refreshed
   * token cannot expire too while the test's requests are still arriving on a loaded machine.
   */
  refreshedAccessTokenTtlSeconds?: number
  /** Default 14 days. */
  refreshTokenTtlSeconds?: number
  /** ID token lifetime; defaults to the access token's. */
  idTokenTtlSeconds?: number
  /**
   * `true`: rotate on every use; `false`: never; unset: oidc-provider's default, which rotates
   * a confidential client's refresh token only after 70% of its lifetime has passed.
   */
  rotateRefreshTokens?: boolean
  /**
   * `offline_access` (default, like most real IdPs): a refresh token is issued only when the
   * request asks for `offline_access` with `prompt=consent`. `always`: whenever the client may use
   * the refresh_token grant; such tokens then end with the provider session.
   */
  refreshTokenPolicy?: 'offline_access' | 'always'
  /** Hide oidc-provider's console notices (dev keys, in-memory adapter, Node version). Default true. */
  quiet?: boolean
  /**
   * The algorithm ID tokens are signed with (the clients' id_token_signed_response_alg). Default
   * RS256. PS256 signs with the RSA key, whose JWK then names no `alg`, so the provider advertises
   * RS256 and PS256 alike; ES256 adds a P-256 key next to the RSA one.
   */
  idTokenSigningAlg?: 'RS256' | 'PS256' | 'ES256'
  /**
   * The client authentication methods the token endpoint takes and advertises
   * (token_endpoint_auth_methods_supported); default oidc-provider's, which include all three of the gateway's.
   */
  clientAuthMethods?: Array<'client_secret_basic' | 'client_secret_post' | 'private_key_jwt' | 'client_secret_jwt' | 'none'>
  /** RFC 9126: off (no PAR endpoint), on (default) or required of every client. */
  pushedAuthorizationRequests?: 'off' | 'on' | 'required'
  /** RFC 9449 8: every DPoP proof must carry a nonce the provider issued (DPoP-Nonce). */
  dpopNonces?: boolean
  /**
   * FAPI 2.0 Security Profile: PAR, PKCE S256, sender-constrained (DPoP) tokens, iss in the
   * authorization response, private_key_jwt; implies idTokenSigningAlg PS256 unless ES256 is set.
   */
  fapi2?: boolean
  /**
   * RFC 9207: oidc-provider always puts `iss` in its authorization responses and advertises it.
   * `false` plays a provider that predates RFC 9207 (many do): neither is sent. Default true.
   */
  issParameter?: boolean
  /**
   * Authentication context classes (OpenID Connect Core 2 `acr`), weakest first, for step-up:
   * oidc-provider's `acrValues`. A plain login grants the first (amr `pwd`); ticking the login
   * form's "second factor" box (field `mfa=1`) grants the last (amr `pwd`, `otp`). A request whose
   * `acr_values` the provider session does not meet asks for the login again (an interaction
   * policy check, as Keycloak's step-up does). Unset: no `acr` in any token, no box.
   */
  acrValues?: string[]
  /**
   * With `acrValues`: a provider that ignores `acr_values` (it is a voluntary claim request): the
   * login is never asked for again because of it, and the existing session's acr comes back.
   */
  ignoreAcrValues?: boolean
  /**
   * RFC 8693 token exchange, which oidc-provider does not have: a grant handler registered for
   * it (see tokenExchangeGrant). Off by default; on, every client may use the grant.
   */
  tokenExchange?: DevTokenExchange
  /**
   * OpenID Connect Core 5.4: scope-requested claims only from UserInfo, the ID token keeping
   * `sub` and the claims it defines (oidc-provider's conformIdTokenClaims). Default false: they
   * are in the ID token too.
   */
  conformIdTokenClaims?: boolean
  /**
   * The account's claims instead of devAccountClaims; may carry Core 5.6.2's `_claim_names` and
   * `_claim_sources`, which oidc-provider passes on for the claims the scopes grant.
   */
  accountClaims?: (sub: string) => { sub: string; [claim: string]: unknown }
  /**
   * OAuth for MCP clients: open dynamic client registration (RFC 7591, oidc-provider's
   * `features.registration`, no initial access token) and resource indicators (RFC 8707): a
   * `resource` that `accepts` is issued a JWT access token (RFC 9068, `typ: at+jwt`) whose `aud`
   * is that resource, with `scopes` (also accepted in registrations). Any other resource is
   * refused with invalid_target. Unset: no registration, and no resource is accepted.
   */
  resourceServers?: DevResourceServers
}

/** The development provider's resource servers (DevProviderOptions.resourceServers). */
export interface DevResourceServers {
  /** Whether a resource indicator names one of them (asked at every authorization and token request). */
  accepts: (resource: string) => boolean
  /** The scopes their tokens may carry. */
  scopes: string[]
}

/** The development provider's RFC 8693 token exchange. */
export interface DevTokenExchange {
  /** The audiences and resources it issues tokens for; any other is refused with invalid_target. */
  audiences: string[]
  /** Lifetime of an exchanged token, in seconds (its `expires_in`). Default 300. */
  expiresInSeconds?: number
}

/** What one token exchange asked for (DevProvider.tokenExchanges). */
export interface DevTokenExchangeRequest {
  clientId: string
  audience: string | undefined
  scope: string | undefined
  resource: string | undefined
  /** Whether the subject token was found valid. */
  subjectValid: boolean
}

export interface SignJwtOptions {
  /** A number is seconds from now (negative for an expired token); a string is a jose timespan such as `'5m'` or `'-1h'`. */
  expiresIn?: string | number
  /** Overrides the `kid` header (e.g. an unknown kid). */
  kid?: string
  /**
   * RS256 (default). RS384, RS512, PS256, PS384, PS512 also sign with the provider's RSA key, but
   * the served JWK says `alg: RS256` (none with idTokenSigningAlg PS256), so verifiers that honour it refuse those tokens. `none` produces an unsecured JWT; HS256/HS384/HS512 are keyed with the provider's public key in
   * SPKI PEM form (the classic algorithm-confusion attack). Both must be refused by verifiers.
   * ES256 signs with the P-256 key, which exists with idTokenSigningAlg ES256.
   */
  alg?: string
  /** `typ` header, e.g. `logout+jwt` or `at+jwt`. */
  typ?: string
}

export interface DevProvider {
  /** `http://HOST:PORT` (`https://` with `tls`), no trailing slash. */
  issuer: string
  port: number
  /** The oidc-provider instance, for tests that need its events or models. */
  provider: Provider
  /** The private JWKS the provider signs with. */
  jwks: { keys: jose.JWK[] }
  /**
   * Signs `claims` with the provider's own signing key (so it verifies against the served JWKS).
   * Defaults `iss` to the issuer, `iat` to now and `exp` to five minutes from now; a claim given
   * as `undefined` is left out of the token.
   */
  signJwt(claims: Record<string, unknown>, options?: SignJwtOptions): Promise<string>
  /**
   * Resolves when the provider has delivered its next back-channel logout token (the client's
   * URI answered 2xx: oidc-provider's `backchannel.success`); rejects with the provider's error
   * when it could not (`backchannel.error`, which is the only place oidc-provider reports a failed
   * delivery: the end-session page looks the same). Ask before the logout that sends it.
   */
  nextBackchannelLogout(): Promise<void>
  /** Every token exchange asked of it, in order (with tokenExchange). */
  tokenExchanges: DevTokenExchangeRequest[]
  /** From now on, requests are read and never answered: a provider that hangs (until close). */
  stopAnswering(): void
  close(): Promise<void>
}

/**
 * The provider's cookie names (oidc-provider's defaults, written out so the demo can tell them
 * from the gateway's: browsers send them to the gateway on the same host too, RFC 6265 8.5). Each
 * comes with a `.sig` companion, its signature with the provider's cookie keys.
 */
const COOKIE_NAMES = { session: '_session', interaction: '_interaction', resume: '_interaction_resume' }
const COOKIE_NAME_SET: ReadonlySet<string> = new Set(Object.values(COOKIE_NAMES).flatMap((name) => [name, `${name}.sig`]))

/** Whether a cookie name is one the development provider sets. */
export function isDevProviderCookieName(name: string): boolean {
  return COOKIE_NAME_SET.has(name)
}

const KNOWN_GROUPS: Record<string, string[]> = {
  alice: ['admins', 'staff'],
  bob: ['staff'],
  // As a user of a large directory: a session too large for one cookie (chunked).
  dana: Array.from({ length: 150 }, (_, i) => `team-${String(i).padStart(3, '0')}-platform-engineering`),
}

/** The invented account behind any username: alice, bob and dana have groups, everybody else none. */
export function devAccountClaims(username: string): { sub: string; [claim: string]: unknown } {
  return {
    sub: username,
    email: `${username}@example.com`,
    email_verified: true,
    name: username.charAt(0).toUpperCase() + username.slice(1),
    preferred_username: username,
    groups: KNOWN_GROUPS[username] ?? [],
  }
}

const RSA_ALGS = new Set(['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512'])
const HMAC_ALGS = new Set(['HS256', 'HS384', 'HS512'])

let consoleFiltered = false

// oidc-provider talks through console.warn/console.info with an "oidc-provider " prefix (possibly
// wrapped in ANSI colour codes). Only those lines are dropped; everything else passes through.
function filterProviderNotices(): void {
  if (consoleFiltered) return
  consoleFiltered = true
  const isNotice = (args: unknown[]): boolean => typeof args[0] === 'string' && args[0].replace(/\x1b\[[0-9;]*m/g, '').startsWith('oidc-provider ')
  const { warn, info } = console
  console.warn = (...args: unknown[]) => {
    if (!isNotice(args)) warn.apply(console, args)
  }
  console.info = (...args: unknown[]) => {
    if (!isNotice(args)) info.apply(console, args)
  }
}

function formatHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host
}

export async function startDevProvider(options: DevProviderOptions): Promise<DevProvider> {
  const host = options.host ?? '127.0.0.1'
  const quiet = options.quiet ?? true
  const accessTtl = options.accessTokenTtlSeconds ?? 3600
  const refreshedAccessTtl = options.refreshedAccessTokenTtlSeconds ?? accessTtl
  const refreshTtl = options.refreshTokenTtlSeconds ?? 14 * 24 * 3600
  const idTokenTtl = options.idTokenTtlSeconds ?? accessTtl

  if (quiet) filterProviderNotices()
  // Imported lazily so the filter above is in place before the module prints its runtime warning.
  const { default: ProviderClass, interactionPolicy, errors: providerErrors } = await import('oidc-provider')

  const kid = `dev-${randomUUID().slice(0, 8)}`
  const { privateKey, publicKey } = await jose.generateKeyPair('RS256', { extractable: true })
  const privateJwk: jose.JWK = { ...(await jose.exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' }
  const publicPem = await jose.exportSPKI(publicKey)

  // The issuer must carry the real port, so the socket is bound before the Provider exists.
  const server = options.tls === undefined ? createServer() : createHttpsServer({ key: options.tls.key, cert: options.tls.cert })
  const port = await listen(server, options.port ?? 0, host)
  const issuer = `${options.tls === undefined ? 'http' : 'https'}://${formatHost(host)}:${port}`

  const idTokenAlg = options.idTokenSigningAlg ?? (options.fapi2 === true ? 'PS256' : 'RS256')
  const signingKeys: jose.JWK[] = [structuredClone(privateJwk)]
  if (idTokenAlg === 'PS256') delete signingKeys[0]?.alg
  // signJwt signs ES256 with this key too.
  let ecKey: jose.CryptoKey | undefined
  if (idTokenAlg === 'ES256') {
    const ec = await jose.generateKeyPair('ES256', { extractable: true })
    ecKey = ec.privateKey
    signingKeys.push({ ...(await jose.exportJWK(ec.privateKey)), kid: `${kid}-ec`, alg: 'ES256', use: 'sig' })
  }

  const clients: ClientMetadata[] = options.clients.map((c) => ({
    client_id: c.clientId,
    ...(c.clientSecret === undefined ? {} : { client_secret: c.clientSecret }),
    ...(c.jwks === undefined ? {} : { jwks: c.jwks }),
    ...(c.requirePushedAuthorizationRequests === undefined ? {} : { require_pushed_authorization_requests: c.requirePushedAuthorizationRequests }),
    ...(c.dpopBoundAccessTokens === undefined ? {} : { dpop_bound_access_tokens: c.dpopBoundAccessTokens }),
    redirect_uris: c.redirectUris,
    post_logout_redirect_uris: c.postLogoutRedirectUris ?? [],
    grant_types: ['authorization_code', 'refresh_token', ...(options.tokenExchange === undefined ? [] : [TOKEN_EXCHANGE_GRANT])],
    response_types: ['code'],
    token_endpoint_auth_method: c.tokenEndpointAuthMethod ?? 'client_secret_basic',
    id_token_signed_response_alg: idTokenAlg,
    ...(c.backchannelLogoutUri === undefined ? {} : { backchannel_logout_uri: c.backchannelLogoutUri, backchannel_logout_session_required: true }),
  }))

  const configuration: Configuration = {
    clients,
    // oidc-provider mutates the keys it is given; hand it a copy.
    jwks: { keys: signingKeys },
    cookies: { keys: [randomBytes(32).toString('base64url')], names: { ...COOKIE_NAMES } },
    claims: {
      // Standalone claims of oidc-provider's defaults, which a `claims` object replaces: acr when
      // requested (acr_values), auth_time when max_age asks for it (OpenID Connect Core 3.1.2.1).
      acr: null,
      auth_time: null,
      amr: null,
      // With acrValues, every ID token says how the user authenticated, as Keycloak's do.
      openid: options.acrValues === undefined ? ['sub'] : ['sub', 'acr', 'amr'],
      email: ['email', 'email_verified'],
      profile: ['name', 'preferred_username', ...Object.keys(options.extraClaims ?? {})],
      groups: ['groups'],
    },
    scopes: ['openid', 'offline_access', 'email', 'profile', 'groups', ...(options.resourceServers?.scopes ?? [])],
    // The gateway takes identity from the ID token, so scope-requested claims must appear there.
    conformIdTokenClaims: options.conformIdTokenClaims ?? false,
    loadExistingGrant: grantFirstParty,
    findAccount: (_ctx: KoaContextWithOIDC, sub: string): Account => ({
      accountId: sub,
      claims: () => ({
        ...(options.accountClaims ?? devAccountClaims)(sub),
        ...Object.fromEntries(Object.entries(options.extraClaims ?? {}).map(([name, of]) => [name, of(sub)])),
      }),
    }),
    pkce: { required: () => true },
    ...(options.clientAuthMethods === undefined ? {} : { clientAuthMethods: options.clientAuthMethods }),
    ...(options.acrValues === undefined
      ? {}
      : { acrValues: options.acrValues, ...(options.ignoreAcrValues === true ? {} : { interactions: { policy: stepUpPolicy(interactionPolicy) } }) }),
    features: {
      devInteractions: { enabled: true },
      revocation: { enabled: true },
      // RFC 7662, for the gateway's provider.bearer.introspection. A client may introspect only
      // tokens issued to itself (the default would let any confidential client see every token).
      introspection: { enabled: true, allowedPolicy: (_ctx, client, token) => token.clientId === client.clientId },
      rpInitiatedLogout: { enabled: true },
      backchannelLogout: { enabled: true },
      pushedAuthorizationRequests: {
        enabled: options.pushedAuthorizationRequests !== 'off',
        requirePushedAuthorizationRequests: options.pushedAuthorizationRequests === 'required',
      },
      dPoP: {
        enabled: true,
        ...(options.dpopNonces === true ? { nonceSecret: randomBytes(32), requireNonce: () => true } : {}),
      },
      ...(options.fapi2 === true ? { fapi: { enabled: true, profile: '2.0' } } : {}),
      ...(options.resourceServers === undefined ? {} : resourceServerFeatures(options.resourceServers, providerErrors.InvalidTarget)),
    },
    ...(options.rotateRefreshTokens === undefined ? {} : { rotateRefreshToken: options.rotateRefreshTokens }),
    ...(options.refreshTokenPolicy === 'always'
      ? { issueRefreshToken: (_ctx: KoaContextWithOIDC, client: { grantTypeAllowed(type: string): boolean }) => client.grantTypeAllowed('refresh_token') }
      : {}),
    // Every ttl is spelled out: the defaults print a notice each the first time they are used.
    ttl: {
      AccessToken:
        options.refreshedAccessTokenTtlSeconds === undefined
          ? accessTtl
          : (ctx: KoaContextWithOIDC) => (ctx.oidc.params?.grant_type === 'refresh_token' ? refreshedAccessTtl : accessTtl),
      AuthorizationCode: 60,
      IdToken: idTokenTtl,
      RefreshToken: refreshTtl,
      Interaction: 3600,
      Session: Math.max(refreshTtl, 14 * 24 * 3600),
      Grant: Math.max(refreshTtl, 14 * 24 * 3600),
      ClientCredentials: 600,
      DeviceCode: 600,
      BackchannelAuthenticationRequest: 600,
      PreAuthorizedCode: 600,
    },
    // The default fetch refuses loopback addresses (SSRF protection), but back-channel logout
    // tokens go to a gateway on 127.0.0.1 here.
    fetch: (input, init) => {
      const plain: RequestInit & { dispatcher?: unknown } = { ...init }
      delete plain.dispatcher
      return globalThis.fetch(input, plain)
    },
  }

  let provider: Provider
  try {
    provider = new ProviderClass(issuer, configuration)
  } catch (err) {
    server.close()
    throw err
  }
  if (options.issParameter === false) provider.use(withoutIssParameter)
  const tokenExchanges: DevTokenExchangeRequest[] = []
  if (options.tokenExchange !== undefined) {
    const exchange = options.tokenExchange
    provider.registerGrantType(
      TOKEN_EXCHANGE_GRANT,
      (ctx: KoaContextWithOIDC) => tokenExchangeGrant(ctx, { issuer, publicKey, privateKey, kid, exchange, log: tokenExchanges }),
      ['subject_token', 'subject_token_type', 'requested_token_type', 'audience', 'scope', 'resource', 'actor_token', 'actor_token_type'],
    )
  }
  if (options.acrValues !== undefined) provider.use(acrLogin(provider, options.acrValues))
  const handle = provider.callback()
  let answering = true
  server.on('request', (req, res) => {
    if (answering) void handle(req, res)
  })

  const rsaKeys = new Map<string, jose.CryptoKey | Uint8Array>([['RS256', privateKey]])
  async function rsaKey(alg: string): Promise<jose.CryptoKey | Uint8Array> {
    let key = rsaKeys.get(alg)
    if (key === undefined) {
      const { alg: _ignored, ...jwk } = privateJwk
      key = await jose.importJWK(jwk, alg)
      rsaKeys.set(alg, key)
    }
    return key
  }

  async function signJwt(claims: Record<string, unknown>, signOptions: SignJwtOptions = {}): Promise<string> {
    const alg = signOptions.alg ?? 'RS256'
    const now = Math.floor(Date.now() / 1000)
    const payload: jose.JWTPayload = { iss: issuer, iat: now, exp: now + 300, ...claims }
    if (typeof signOptions.expiresIn === 'number') payload.exp = now + signOptions.expiresIn
    for (const [name, value] of Object.entries(payload)) {
      if (value === undefined) delete payload[name]
    }

    if (alg === 'none') {
      const jwt = new jose.UnsecuredJWT(payload)
      if (typeof signOptions.expiresIn === 'string') jwt.setExpirationTime(signOptions.expiresIn)
      return jwt.encode()
    }

    let key: jose.CryptoKey | Uint8Array
    let keyId = kid
    if (RSA_ALGS.has(alg)) key = await rsaKey(alg)
    else if (HMAC_ALGS.has(alg)) key = new TextEncoder().encode(publicPem)
    else if (alg === 'ES256' && ecKey !== undefined) [key, keyId] = [ecKey, `${kid}-ec`]
    else throw new TypeError(`signJwt: unsupported alg ${alg}${alg === 'ES256' ? ' (start the provider with idTokenSigningAlg ES256)' : ''}`)

    const jwt = new jose.SignJWT(payload).setProtectedHeader({
      alg,
      kid: signOptions.kid ?? keyId,
      ...(signOptions.typ === undefined ? {} : { typ: signOptions.typ }),
    })
    if (typeof signOptions.expiresIn === 'string') jwt.setExpirationTime(signOptions.expiresIn)
    return jwt.sign(key)
  }

  function nextBackchannelLogout(): Promise<void> {
    return new Promise((resolve, reject) => {
      const success = (): void => {
        provider.off('backchannel.error', failure)
        resolve()
      }
      const failure = (_ctx: unknown, err: unknown): void => {
        provider.off('backchannel.success', success)
        reject(err instanceof Error ? err : new Error(String(err)))
      }
      provider.once('backchannel.success', success)
      provider.once('backchannel.error', failure)
    })
  }

  let closing: Promise<void> | undefined
  function close(): Promise<void> {
    closing ??= new Promise<void>((resolve) => {
      server.close(() => resolve())
      server.closeAllConnections()
    })
    return closing
  }

  return {
    issuer,
    port,
    provider,
    jwks: { keys: [structuredClone(privateJwk)] },
    signJwt,
    nextBackchannelLogout,
    tokenExchanges,
    stopAnswering: () => {
      answering = false
    },
    close,
  }
}

/** oidc-provider's `registration` and `resourceIndicators` features for DevProviderOptions.resourceServers. */
function resourceServerFeatures(
  servers: DevResourceServers,
  InvalidTarget: new () => Error,
): Pick<NonNullable<Configuration['features']>, 'registration' | 'resourceIndicators'> {
  const scope = servers.scopes.join(' ')
  return {
    registration: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // The one resource a request names is the token's audience (RFC 8707 2).
      defaultResource: (_ctx, _client, oneOf) => oneOf ?? undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resource) => {
        if (!servers.accepts(resource)) throw new InvalidTarget()
        return { scope, audience: resource, accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } } }
      },
    },
  }
}

/**
 * oidc-provider's loadExistingGrant, granting the scopes a request asks for (offline_access
 * aside: that one is granted on the consent screen prompt=consent brings), so a first-party client
 * signs in without a consent screen.
 */
async function grantFirstParty(ctx: KoaContextWithOIDC): Promise<InstanceType<Provider['Grant']> | undefined> {
  const { client, session, provider } = ctx.oidc
  if (client === undefined || session?.accountId === undefined) return undefined
  const grantId = ctx.oidc.result?.consent?.grantId ?? session.grantIdFor(client.clientId)
  const grant =
    (grantId === undefined ? undefined : await provider.Grant.find(grantId)) ?? new provider.Grant({ clientId: client.clientId, accountId: session.accountId })
  const scopes = [...ctx.oidc.requestParamScopes].filter((scope) => scope !== 'offline_access')
  const missing = scopes.filter((scope) => !(grant.getOIDCScope() ?? '').split(' ').includes(scope))
  if (missing.length > 0 || grantId === undefined) {
    grant.addOIDCScope(scopes.join(' '))
    await grant.save()
  }
  return grant
}

/** RFC 8693 2.1 and 3. */
const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange'
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token'

interface TokenExchangeContext {
  issuer: string
  publicKey: jose.CryptoKey
  privateKey: jose.CryptoKey
  kid: string
  exchange: DevTokenExchange
  log: DevTokenExchangeRequest[]
}

/**
 * An RFC 8693 token exchange grant for oidc-provider (registered with registerGrantType; the
 * client is already authenticated and allowed the grant). The subject token must be an access
 * token (2.1 subject_token_type) this provider issued: an opaque one in its store, or a JWT signed
 * with its key and not expired. The audience (or else the resource, RFC 8707) must be one of
 * `audiences` (2.2.2 invalid_target otherwise). The issued token is an RFC 9068 JWT access token
 * for that audience with the requested scope, the subject's `sub`, and the client as `client_id`.
 */
async function tokenExchangeGrant(ctx: KoaContextWithOIDC, context: TokenExchangeContext): Promise<void> {
  const { errors } = await import('oidc-provider')
  const params = ctx.oidc.params as Record<string, unknown>
  const text = (name: string): string | undefined => (typeof params[name] === 'string' ? params[name] : undefined)
  const clientId = ctx.oidc.client?.clientId ?? ''
  const entry: DevTokenExchangeRequest = { clientId, audience: text('audience'), scope: text('scope'), resource: text('resource'), subjectValid: false }
  context.log.push(entry)
  const subjectToken = text('subject_token')
  if (subjectToken === undefined || text('subject_token_type') !== ACCESS_TOKEN_TYPE) {
    throw new errors.InvalidRequest('subject_token and subject_token_type access_token are required')
  }
  const requested = text('requested_token_type')
  if (requested !== undefined && requested !== ACCESS_TOKEN_TYPE) throw new errors.InvalidRequest('only access tokens are issued')
  let sub: string | undefined
  const opaque = await ctx.oidc.provider.AccessToken.find(subjectToken)
  if (opaque !== undefined && !opaque.isExpired) sub = opaque.accountId
  else {
    try {
      const { payload } = await jose.jwtVerify(subjectToken, context.publicKey, { issuer: context.issuer })
      sub = typeof payload.sub === 'string' ? payload.sub : undefined
    } catch {
      sub = undefined
    }
  }
  if (sub === undefined) throw new errors.InvalidGrant('subject_token is invalid or expired')
  entry.subjectValid = true
  const audience = entry.audience ?? entry.resource
  if (audience === undefined || !context.exchange.audiences.includes(audience)) throw new errors.InvalidTarget('the provider issues no token for this audience')
  const expiresIn = context.exchange.expiresInSeconds ?? 300
  const now = Math.floor(Date.now() / 1000)
  const accessToken = await new jose.SignJWT({ client_id: clientId, ...(entry.scope === undefined ? {} : { scope: entry.scope }), jti: randomUUID() })
    .setProtectedHeader({ alg: 'RS256', kid: context.kid, typ: 'at+jwt' })
    .setIssuer(context.issuer)
    .setSubject(sub)
    .setAudience(audience)
    .setIssuedAt(now)
    .setExpirationTime(now + expiresIn)
    .sign(context.privateKey)
  ctx.body = {
    access_token: accessToken,
    issued_token_type: ACCESS_TOKEN_TYPE,
    token_type: 'Bearer',
    expires_in: expiresIn,
    ...(entry.scope === undefined ? {} : { scope: entry.scope }),
  }
}

/** Koa middleware: no RFC 9207 `iss` in authorization responses (query mode) nor in discovery. */
async function withoutIssParameter(ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> {
  await next()
  const location = ctx.response.get('location')
  // Interaction redirects are relative; the client's redirect_uri is absolute.
  if (ctx.status >= 300 && ctx.status < 400 && URL.canParse(location)) {
    const url = new URL(location)
    if (url.searchParams.has('code') || url.searchParams.has('error')) {
      url.searchParams.delete('iss')
      ctx.response.set('location', url.href)
    }
  }
  if (ctx.path.endsWith('/.well-known/openid-configuration') && typeof ctx.body === 'object' && ctx.body !== null) {
    delete (ctx.body as Record<string, unknown>).authorization_response_iss_parameter_supported
  }
}

type InteractionPolicy = typeof providerInteractionPolicy

/**
 * The default interaction policy plus a login check: `acr_values` the provider session's acr is
 * not one of asks for the login again (oidc-provider only prompts on an essential acr claim, but
 * IdPs such as Keycloak step up on acr_values). Once this interaction logged in, whatever acr it
 * gave stands, as its own max_age check does: the client judges the ID token (Core 3.1.3.7).
 */
function stepUpPolicy(policy: InteractionPolicy): ReturnType<InteractionPolicy['base']> {
  const base = policy.base()
  const login = base.get('login')
  login?.checks.add(
    new policy.Check('acr_values', 'requested ACR could not be obtained', (ctx: KoaContextWithOIDC) => {
      const requested = ctx.oidc.params?.acr_values
      if (typeof requested !== 'string' || ctx.oidc.result?.login !== undefined) return policy.Check.NO_NEED_TO_PROMPT
      return requested.split(' ').includes(ctx.oidc.session?.acr ?? '') ? policy.Check.NO_NEED_TO_PROMPT : policy.Check.REQUEST_PROMPT
    }),
  )
  return base
}

async function readForm(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of req) {
    size += (chunk as Buffer).length
    if (size > 16 * 1024) throw new Error('form too large')
    chunks.push(chunk as Buffer)
  }
  return parseQuery(Buffer.concat(chunks).toString('utf8'))
}

const LOGIN_BUTTON = '<button type="submit" class="login login-submit">'

/**
 * Koa middleware for `acrValues`: devInteractions' login form gets a "second factor" box, and its
 * submission finishes the login with the acr and amr it earned (devInteractions itself records
 * none). Other submissions (consent) go on to devInteractions with the form already read.
 */
function acrLogin(provider: Provider, acrValues: readonly string[]) {
  const weakest = acrValues[0] ?? 'pwd'
  const strongest = acrValues[acrValues.length - 1] ?? weakest
  return async (ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> => {
    const interaction = /^\/interaction\/[^/]+$/.test(ctx.path)

    if (interaction && ctx.method === 'POST') {
      const form = await readForm(ctx.req)
      if (form.prompt === 'login' && typeof form.login === 'string') {
        const mfa = form.mfa === '1'
        const login = { accountId: form.login, acr: mfa ? strongest : weakest, amr: mfa ? ['pwd', 'otp'] : ['pwd'] }
        ctx.respond = false
        await provider.interactionFinished(ctx.req, ctx.res, { login }, { mergeWithLastSubmission: false })
        return
      }
      // oidc-provider reads a body an earlier middleware parsed from req.body.
      ;(ctx.req as IncomingMessage & { body?: unknown }).body = form
    }
    await next()
    if (interaction && ctx.method === 'GET' && typeof ctx.body === 'string' && ctx.body.includes('name="prompt" value="login"')) {
      ctx.body = ctx.body.replace(
        LOGIN_BUTTON,
        `<label><input type="checkbox" name="mfa" value="1"/> second factor (acr ${strongest})</label>\n  ${LOGIN_BUTTON}`,
      )
    }
  }
}
