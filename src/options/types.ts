// The validated, defaults-applied configuration. Every module receives the slice it needs;
// nothing reads the YAML or the environment after startup. ConfigFile is what schema.ts accepts,
// key by key (the keys, which are optional, the values each takes): test/options/types.test.ts
// reads both and fails on any difference, so a key is changed in both or the test says where.

import type { SIGN_IN_PATH } from '../contract/endpoints.js'
import type { AsymmetricAlgorithm } from './algorithms.js'

export type AuthMode = 'required' | 'optional' | 'none'
export type SameSite = 'lax' | 'strict' | 'none'
export type SessionStoreKind = 'cookie' | 'memory' | 'redis'
export type ClientAuthMethod = 'client_secret_basic' | 'client_secret_post' | 'private_key_jwt'

export interface ServerConfig {
  host: string
  port: number
  /** External origin, without a trailing slash, e.g. https://app.example.com */
  publicUrl: string
  /** CIDRs (or single addresses) whose X-Forwarded-* headers are believed. */
  trustedProxies: string[]
  /**
   * Address of the management listener: in the file, or $OPENID_GATEWAY_MANAGEMENT_HOST (the
   * container image's 0.0.0.0), else 127.0.0.1 (normalize.ts).
   */
  managementHost: string
  /** Port of the management listener (/healthz, /readyz, /metrics); 0: none. */
  managementPort: number
  /** Time a client has to send a whole request (Node's server.requestTimeout), in milliseconds. */
  requestTimeoutMs: number
  /** How long a SIGTERM waits for in-flight requests, in milliseconds. */
  shutdownTimeoutMs: number
  /** Worker processes (node:cluster); `auto`: one per core. */
  workers: number | 'auto'
  /** Reload when the file changes (runtime/live.ts), besides SIGHUP. */
  watchConfig: boolean
  /** Port of the Envoy ext_authz gRPC service (src/checks/envoy-grpc/server.ts) on `host`; 0: none. */
  extAuthzGrpcPort: number
}

/** The name of the provider of the one-provider form (`provider:`). */
export const DEFAULT_PROVIDER = 'default'
/** In upstreams[].providers and allow.providers: every provider. */
export const ANY_PROVIDER = '*'

export interface ProviderConfig {
  /** Unique; sessions record it (DEFAULT_PROVIDER for the `provider:` form). */
  name: string
  issuer: string
  clientId: string
  /** With client_secret_basic and client_secret_post (config/cross-key-rules.ts makes it required there). */
  clientSecret?: string
  clientAuthMethod: ClientAuthMethod
  /** With private_key_jwt: PEM or JWK text, or a file holding it (src/keys/private-key.ts). */
  clientKey?: string
  clientKeyId?: string
  /** The `aud` of private_key_jwt client assertions: the issuer (a string; also when unset), or the token endpoint URL (Ory Hydra). */
  clientAssertionAudience?: 'issuer' | 'token_endpoint'
  /** RFC 9126: auto pushes when the provider requires it. */
  pushedAuthorizationRequests: 'auto' | 'required' | 'off'
  /** How the authorization response returns: a redirect's query, or a form POST (response_mode=form_post). */
  responseMode: 'query' | 'form_post'
  /** RFC 9449: the session's tokens are bound to a per-session key. */
  dpop: boolean
  /** fapi2: the FAPI 2.0 Security Profile (src/oidc/profile.ts); implies dpop and PAR required. */
  profile: 'oidc' | 'fapi2'
  scopes: string[]
  /** Ask for a refresh token: offline_access is added to `scopes`, with prompt=consent. */
  offlineAccess: boolean
  /** Accepted `aud` values of Bearer tokens (JWT or introspected); defaults to [clientId]. */
  audiences: string[]
  bearer: BearerConfig
  /** ID token algorithms, pinned; unset: the provider's advertised asymmetric ones. */
  idTokenAlgorithms?: AsymmetricAlgorithm[]
  timeoutMs: number
  /** After discovery has failed this long, not_ready says the provider is unreachable. */
  notReadyPageAfterMs: number
  postLogoutRedirectUri?: string
  /** Seconds of clock skew tolerated on `exp`/`iat`/`nbf`. */
  clockToleranceSeconds: number
  /** Plain-http issuer allowed (development and tests only). */
  allowInsecureHttp: boolean
  /** The Shared Signals receiver of this provider's transmitter (docs/features/shared-signals.md); unset: off. */
  ssf?: SsfConfig
  /** Claim mapping (docs/features/claim-mapping.md): the claim path of the user; unset: `sub`. */
  userClaim?: string
  /** Claim mapping: the claim path of the groups; unset: `groups`. */
  groupsClaim?: string
  /** Claims the userinfo endpoint adds to its answer (routes/userinfo.ts); kept in sessions. Unset: none. */
  additionalClaims?: string[]
  /** The path of this provider's redirect URI in place of the contract's callback path (a cutover from oauth2-proxy's /oauth2/callback). */
  redirectPath?: string
  /** Claims from beyond the ID token: UserInfo, aggregated and distributed claims, Entra ID's group overage (docs/features/claim-sources.md); unset: off. */
  claimSources?: ClaimSourcesConfig
  /** A GitHub provider (src/oidc/github.ts): plain OAuth 2.0, the user read from GitHub's REST API; unset: OpenID Connect. */
  github?: GithubConfig
}

/** provider.github (src/oidc/github.ts, src/oidc/github-api.ts). */
export interface GithubConfig {
  /** Organization logins whose members are admitted. */
  organizations: string[]
  /** Teams, each `org/team-slug`, whose members are admitted. */
  teams: string[]
  /** Repositories, each `owner/repo`, whose collaborators are admitted. */
  repositories: string[]
  /** User logins admitted. */
  users: string[]
  /** OAuth app scopes asked at sign-in. */
  scopes: string[]
}

/** provider.claimSources (src/oidc/claim-sources.ts). */
export interface ClaimSourcesConfig {
  /** Fetch the UserInfo endpoint at sign-in and at each refresh (OpenID Connect Core 5.3). */
  userInfo: boolean
  /** Issuers whose aggregated or distributed claim JWTs are verified and taken (Core 5.6.2). */
  trustedIssuers: string[]
  /** Distributed claim endpoints that may be fetched, exactly as written (Core 5.6.2). */
  trustedEndpoints: string[]
  /** Entra ID: a token with the groups overage marker has its groups fetched from Microsoft Graph. */
  entraGroupOverage: boolean
  /** Microsoft Graph's base URL (a national cloud's, e.g. https://graph.microsoft.us). */
  graphBaseUrl: string
  /** GitLab projects (`namespace/project[=level]`) whose members get a group `project:<path>` (src/oidc/gitlab-projects.ts). */
  gitlabProjects: string[]
  /** GitLab's root for the projects API; unset: the issuer. */
  gitlabUrl?: string
  /** Google Workspace groups from the Directory API (src/oidc/google-groups.ts); unset: off. */
  googleGroups?: GoogleGroupsConfig
}

/** provider.claimSources.googleGroups. */
export interface GoogleGroupsConfig {
  /** The administrator the service account acts as (the assertion's `sub`). */
  adminEmail: string
  /** The service account's JSON key: a file, or an environment variable named here (exactly one). */
  serviceAccountKeyFile?: string
  serviceAccountKeyEnv?: string
  tokenUrl: string
  directoryUrl: string
}

export interface SsfConfig {
  /** Unset: derived from the provider's issuer (SSF 1.0 section 7.2). */
  configurationUrl?: string
  delivery: 'push' | 'poll'
  pollIntervalSeconds: number
  /** The Authorization value registered for push delivery (required with push). */
  authorization?: string
  /** Bearer credential at the transmitter's management and poll endpoints. */
  bearerToken?: string
  /** Unset: the provider's clientId. */
  audience?: string
  credentialChange: 'end' | 'ignore'
  required: boolean
}

export interface BearerConfig {
  /** JWS algorithms accepted on Bearer JWTs; asymmetric only. */
  algorithms: AsymmetricAlgorithm[]
  /** RFC 7662 introspection of Bearer tokens that are not JWTs. */
  introspection: boolean
  /** Only JWTs with the `typ` header `at+jwt` (RFC 9068 2.1) are accepted as access tokens. */
  requireAtJwt: boolean
}

export interface CookiesConfig {
  /** Base name of every gateway cookie; prefixed with __Host- / __Secure- when secure. */
  name: string
  /** Each at least 32 bytes; the first seals, all open. */
  secrets: string[]
  secure: boolean
  sameSite: SameSite
  /** Optional Domain attribute (disables the __Host- prefix). */
  domain?: string
  /** Several Domain attributes, the longest matching the request's host chosen (never with `domain`). */
  domains?: string[]
  /** Path of the credentials cookie (refresh and ID tokens): everywhere, or the sign-in endpoints only. */
  credentialsPath: '/' | typeof SIGN_IN_PATH
}

export interface SessionConfig {
  store: SessionStoreKind
  /** The Redis server (store: redis); its password comes from the URL. */
  redisUrl?: string
  /** Absolute lifetime of a sign-in, in seconds. */
  maxAgeSeconds: number
  /** Sessions one user keeps at most in the memory and Redis stores; their oldest goes first. */
  maxSessionsPerUser: number
  memory: {
    /** Bound of the memory store; the oldest sign-in is evicted beyond it. */
    maxSessions: number
  }
  redis: RedisConfig
}

export interface RedisConfig {
  /** Prefix of every key the gateway writes. */
  keyPrefix: string
  /** Connect and per-command timeout. */
  timeoutMs: number
  /** The data nodes' ACL user and password, with sentinels or cluster (redisUrl carries its own). */
  username?: string
  password?: string
  /** TLS to the data nodes, with sentinels or cluster (redisUrl says it by rediss://). */
  tls: boolean
  /** Sentinel: the primary the sentinels name. */
  sentinels?: {
    name: string
    /** host:port of each sentinel. */
    nodes: string[]
    username?: string
    password?: string
    tls: boolean
  }
  /** Redis Cluster: seed nodes, and what managed services need. */
  cluster?: {
    /** host:port of one or more nodes; the others are discovered. */
    nodes: string[]
    /** The addresses nodes announce (host:port) -> where this gateway reaches them (host:port). */
    natMap?: Record<string, string>
    /** `passthrough`: connect by the names as given, so TLS verifies them (AWS ElastiCache). */
    dnsLookup: 'system' | 'passthrough'
  }
  /** Replicas a write waits for (WAIT); unset: 1 with sentinels or cluster, 0 with redisUrl. */
  waitReplicas?: number
  /** How long a write waits for them. */
  waitTimeoutMs: number
}

export interface RedirectsConfig {
  allowedHosts: string[]
}

export interface RateLimitConfig {
  /** Shared by the redirect, callback and refresh endpoints, per client address; max 0 = off. */
  signIn: { max: number; windowSeconds: number }
}

export interface AllowRules {
  /**
   * The providers whose users the other rules admit. In the file, `['*']` is every provider the
   * upstream accepts; normalize.ts makes it explicit and, with several providers and claim rules,
   * fills in the upstream's default provider when it is left out.
   */
  providers?: string[]
  emails?: string[]
  emailDomains?: string[]
  groups?: string[]
  claims?: Record<string, Array<string | number | boolean>>
  /** Step-up (oidc/step-up.ts): accepted `acr` values, most preferred first. */
  acr?: string[]
  /** Step-up: the oldest `auth_time` accepted, in seconds before now. */
  maxAuthAgeSeconds?: number
}

export interface IdentityHeaderNames {
  user: string
  email: string
  groups: string
  preferredUsername: string
  /** Carries the issuer of the provider the identity comes from. */
  issuer: string
  /** Carry how and when the user authenticated: `acr`, `amr` (comma-joined), `auth_time` (epoch seconds). */
  acr: string
  amr: string
  authTime: string
}

/**
 * One of an upstream's per-path rules (access/rules.ts): a `path` prefix or an anchored `regex`
 * (exactly one), optionally for some `methods` only; the deciding rule's `allow` applies.
 */
export interface PathRule {
  /** A path prefix, as match.pathPrefix. */
  path?: string
  /** An anchored RE2 pattern over the normalized path (access/request-match.ts). */
  regex?: string
  /** Uppercase methods the rule applies to; absent: every method. */
  methods?: string[]
  allow: AllowRules
}

/**
 * One of an upstream's `publicPaths` (access/public-paths.ts): a glob, or an object with a `glob`
 * or an anchored `regex` (exactly one), optionally for some `methods` only.
 */
export type PublicPath = string | { glob?: string; regex?: string; methods?: string[] }

/** RFC 8693 token exchange for an upstream (upstream/token-exchange.ts); at least one key. */
export interface TokenExchangeConfig {
  audience?: string
  scope?: string[]
  /** RFC 8707 resource indicator: an absolute URI without fragment. */
  resource?: string
}

/** RFC 9728 protected resource metadata of an upstream (access/resource-metadata.ts). */
export interface ResourceMetadataConfig {
  /** `scopes_supported`. */
  scopes?: string[]
}

/** HTTP Basic credentials for an upstream (upstream/credentials.ts): the user-id is the identity's, the password a secret. */
export interface BasicAuthConfig {
  /** Which identity is the user-id: `user` (the identity headers' user) or `email`. */
  user: 'user' | 'email'
  /** The password, from the environment (`${VAR}`); exactly one of password and passwordFile. */
  password?: string
  /** The path of a file holding the password. */
  passwordFile?: string
}

export interface UpstreamConfig {
  name: string
  match: { pathPrefix: string; hosts?: string[] }
  target: string
  auth: AuthMode
  publicPaths: PublicPath[]
  allow: AllowRules
  /** Per-path `allow` rules inside the upstream; the upstream's `allow` decides the paths none covers. */
  rules: PathRule[]
  forwardAccessToken: boolean
  /** Send the session's ID token as `Authorization: Bearer` (oauth2-proxy's --pass-authorization-header). */
  forwardIdToken: boolean
  /** Send the access token in X-Forwarded-Access-Token and X-Auth-Request-Access-Token (oauth2-proxy's --pass-access-token). */
  forwardAccessTokenHeader: boolean
  /** Send the user as HTTP Basic credentials (RFC 7617; oauth2-proxy's --pass-basic-auth); absent: none. */
  forwardBasicAuth?: BasicAuthConfig
  /** Exchange the user's token for one of this upstream's (RFC 8693); absent: no exchange. */
  tokenExchange?: TokenExchangeConfig
  /**
   * RFC 9728 metadata of this upstream: served unless `false` (or `auth: none`); the object sets
   * its members. Absent and `true` mean the same (resource-metadata.ts publishesResourceMetadata).
   */
  resourceMetadata?: boolean | ResourceMetadataConfig
  /**
   * Whose audience a Bearer token must name here: `provider` (absent: the provider's `audiences`)
   * or `resource` (exactly this upstream's RFC 9728 resource identifier, RFC 8707; no session
   * cookie signs in). See access/resource-metadata.ts resourceAudience.
   */
  tokenAudience?: 'provider' | 'resource'
  allowPreflight: boolean
  /** Send the served host (the X-Forwarded-Host value) as Host instead of the target's. */
  passHostHeader: boolean
  websocket: boolean
  timeoutMs: number
  /** Time a connection to the upstream may take to open (502 after). */
  connectTimeoutMs: number
  identityHeaders: IdentityHeaderNames
  /** Extra identity headers (docs/features/claim-mapping.md): header name to the claim path of its value; unset: none. */
  claimHeaders?: Record<string, string>
  /** Add the signed identity assertion (AssertionsConfig). */
  identityAssertion: boolean
  /** Send a Transaction Token (draft-ietf-oauth-transaction-tokens) in `Txn-Token`, signed with `assertions.signingKeys`. */
  transactionTokens?: TransactionTokensConfig
  /**
   * Names of the providers that may sign in here; the first is the default. In the file: unset is
   * the first configured provider alone, `['*']` every provider.
   */
  providers: string[]
}

export interface AssertionsConfig {
  /** Key sources (src/keys/private-key.ts); required when an upstream asks for assertions. */
  signingKeys?: string[]
  header: string
  ttlSeconds: number
}

/** One upstream's Transaction Tokens (src/upstream/transaction-token.ts). */
export interface TransactionTokensConfig {
  /** `aud`: the trust domain the token is valid in. */
  trustDomain: string
  /** `scope`: the purpose of the transaction, as the trust domain names it. */
  scope: string[]
  /** Lifetime, in seconds: short (the draft's section 6). */
  ttlSeconds: number
}

export interface WebSocketConfig {
  /** Longest a proxied WebSocket stays open, whatever its session (which may end it sooner). */
  maxLifetimeSeconds: number
}

/** The check endpoints (ext_authz, ingress-nginx, Traefik) and their decision cache. */
export interface ForwardAuthConfig {
  cache: { enabled: boolean; ttlSeconds: number; maxEntries: number }
}

/** The Envoy ext_authz HTTP check. */
export interface EnvoyConfig {
  /** Prefix of the check, below SIGN_IN_PATH (Envoy's http_service.path_prefix); the client's path follows it. */
  pathPrefix: string
}

export interface LogConfig {
  level: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent'
  /** Parts of query parameter names whose values are redacted in every logged URL (ops/logging.ts). */
  redactQueryParams: string[]
}

/** OpenTelemetry traces (ops/tracing.ts); absent, the gateway traces nothing and loads no SDK. */
export interface TracingConfig {
  /** OTLP over HTTP (JSON), the traces URL itself: `http://collector:4318/v1/traces`. */
  endpoint: string
  /** Share of new traces kept, 0 to 1; a trusted parent's decision is followed. */
  sampleRatio: number
  serviceName: string
  /** Whose `traceparent`/`tracestate` the gateway continues. */
  trustIncoming: 'trustedProxies' | 'always' | 'never'
  /** How long a finished span waits to be sent with others. */
  batchDelayMs: number
}

export interface TelemetryConfig {
  tracing?: TracingConfig
}

export interface GatewayConfig {
  server: ServerConfig
  /** At least one; names unique. */
  providers: ProviderConfig[]
  cookies: CookiesConfig
  session: SessionConfig
  redirects: RedirectsConfig
  rateLimit: RateLimitConfig
  upstreams: UpstreamConfig[]
  assertions: AssertionsConfig
  websocket: WebSocketConfig
  forwardAuth: ForwardAuthConfig
  envoy: EnvoyConfig
  log: LogConfig
  telemetry: TelemetryConfig
}

/**
 * The file as the schema validates it: one provider (`provider:`, named DEFAULT_PROVIDER) or
 * several (`providers:`), upstreams whose `providers` may be left out, and `envoy.pathPrefix` left
 * out or under its former name `forwardAuth.extAuthzPath`. normalize.ts turns it into a
 * GatewayConfig.
 */
export interface ConfigFile extends Omit<GatewayConfig, 'server' | 'providers' | 'upstreams' | 'forwardAuth' | 'envoy'> {
  server: Omit<ServerConfig, 'managementHost'> & { managementHost?: string }
  /** `extAuthzPath`: deprecated, the former name of envoy.pathPrefix. */
  forwardAuth: ForwardAuthConfig & { extAuthzPath?: string }
  envoy: Partial<EnvoyConfig>
  provider?: Omit<ProviderConfig, 'name'>
  providers?: ProviderConfig[]
  upstreams: Array<Omit<UpstreamConfig, 'providers'> & { providers?: string[] }>
}
