// The JSON Schema of the configuration file, kept as a TypeScript value so that it ships inside
// the build (tsconfig.build.json compiles only src/) and needs no file lookup at run time.
// config/gateway.schema.json is a generated copy for editors; a test keeps the two identical.
//
// The schema is the single source of the defaults (ajv applies them) and of every per-value
// rule. Rules that relate two keys live in config/cross-key-rules.ts. Custom `format` names are implemented in
// formats.ts; editors that do not know them simply skip them.
// Only `properties`, `additionalProperties` and `items` nest here (no $ref, no combinators):
// env.ts walks the schema alongside the data to coerce interpolated numbers and booleans.

import { ASYMMETRIC_ALGORITHMS } from './algorithms.js'
import { CALLBACK_PATH, SIGN_IN_PATH, SSF_EVENTS_PATH } from '../contract/endpoints.js'

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue }
export type JsonType = 'string' | 'integer' | 'number' | 'boolean' | 'array' | 'object'

// A type alias, not an interface, so that it is assignable to ajv's indexed SchemaObject.
export type JsonSchema = {
  $schema?: string
  title?: string
  description?: string
  type?: JsonType | JsonType[]
  properties?: Record<string, JsonSchema>
  required?: string[]
  additionalProperties?: boolean | JsonSchema
  propertyNames?: JsonSchema
  minProperties?: number
  items?: JsonSchema
  minItems?: number
  uniqueItems?: boolean
  contains?: JsonSchema
  enum?: JsonValue[]
  const?: JsonValue
  minimum?: number
  maximum?: number
  minLength?: number
  maxLength?: number
  pattern?: string
  format?: string
  default?: JsonValue
}

// JSON Schema has no place for a human message, so each pattern carries its own here.
/** The largest clockToleranceSeconds accepted; forwarding, not knowing the provider, allows for this much. */
export const MAX_CLOCK_TOLERANCE_SECONDS = 300

const SCOPE_TOKEN = { pattern: '^[\\x21\\x23-\\x5B\\x5D-\\x7E]+$', message: 'must be a scope token (no spaces, quotes or backslashes)' }
// acr_values is a space-separated list (OpenID Connect Core 3.1.2.1), and each value is quoted in
// RFC 9470's WWW-Authenticate challenge: no space, quote or backslash.
const ACR_VALUE = {
  pattern: '^[\\x21\\x23-\\x5B\\x5D-\\x7E]{1,256}$',
  message: 'must be an acr value: 1 to 256 printable ASCII characters without spaces, quotes or backslashes',
}
const COOKIE_NAME = { pattern: '^[A-Za-z0-9_-]{1,32}$', message: 'must be 1 to 32 letters, digits, _ or -' }
// No brace: a `{` in the prefix would move the hash tag of every key (session/redis-keys.ts).
const KEY_PREFIX = { pattern: '^[\\x21-\\x7A\\x7C\\x7E]{0,64}$', message: 'must be at most 64 printable ASCII characters without spaces or braces' }
const WORKERS_AUTO = { pattern: '^auto$', message: 'must be a number of workers (1 to 64) or auto' }
/** A provider's name, or `*` for every one (upstreams[].providers, allow.providers). */
const PROVIDER_REF = '^(\\*|[A-Za-z0-9][A-Za-z0-9_-]*)$'

const EXT_AUTHZ_PATH = {
  pattern: `^${SIGN_IN_PATH.replace(/\//g, '\\/')}(\\/[A-Za-z0-9._~-]+)+$`,
  message: `must be a path below ${SIGN_IN_PATH}/ of letters, digits and . _ ~ -, without a trailing slash`,
}

/** RFC 8693 2.1 `audience`: a logical name or URI the provider knows; printable ASCII, no space. */
const AUDIENCE = { pattern: '^[\\x21-\\x7E]{1,2048}$', message: 'must be 1 to 2048 printable ASCII characters without spaces' }

const QUERY_PARAM_PART = { pattern: '^[A-Za-z0-9_.-]{1,64}$', message: 'must be 1 to 64 letters, digits, _, - or .' }

/** An HTTP method as publicPaths and rules name it (RFC 9110 9.1: a token; uppercase here). */
const METHOD_TOKEN = { pattern: '^[A-Z][A-Z_-]{0,31}$', message: 'must be an HTTP method in uppercase, e.g. GET' }

const UPSTREAM_NAME = {
  pattern: '^[A-Za-z0-9][A-Za-z0-9_-]*$',
  message: 'must start with a letter or digit and contain only letters, digits, _ and -',
}

/** Messages for `pattern` failures, keyed by the pattern itself. */
export const PATTERN_MESSAGES: Readonly<Record<string, string>> = Object.fromEntries(
  [SCOPE_TOKEN, ACR_VALUE, COOKIE_NAME, KEY_PREFIX, UPSTREAM_NAME, WORKERS_AUTO, EXT_AUTHZ_PATH, QUERY_PARAM_PART, AUDIENCE, METHOD_TOKEN].map(
    ({ pattern, message }) => [pattern, message],
  ),
)

// Node timers fire at once for delays above 2^31-1 ms, so larger timeouts would mean none.
const MAX_TIMER_MS = 2147483647

function object(description: string, properties: Record<string, JsonSchema>, extra: JsonSchema = {}): JsonSchema {
  return { type: 'object', description, additionalProperties: false, properties, ...extra }
}

function string(description: string, extra: JsonSchema = {}): JsonSchema {
  return { type: 'string', description, ...extra }
}

function integer(description: string, minimum: number, maximum: number, defaultValue?: number): JsonSchema {
  return { type: 'integer', description, minimum, maximum, ...(defaultValue === undefined ? {} : { default: defaultValue }) }
}

function boolean(description: string, defaultValue: boolean): JsonSchema {
  return { type: 'boolean', description, default: defaultValue }
}

function list(description: string, items: JsonSchema, extra: JsonSchema = {}): JsonSchema {
  return { type: 'array', description, items, ...extra }
}

const port = (description: string, defaultValue: number): JsonSchema => integer(description, 0, 65535, defaultValue)

const server = object(
  'Listeners and the public address of the gateway.',
  {
    host: string('Address the gateway listens on (an IP address or a host name).', { minLength: 1, format: 'listen-host', default: '0.0.0.0' }),
    port: port('Port of the gateway listener (`0` picks a free port).', 8080),
    publicUrl: string(
      `External origin of the gateway as browsers see it: scheme, host and optional port, without a path, query or fragment (a trailing \`/\` is removed). The \`redirect_uri\` is this origin plus \`${CALLBACK_PATH}\` (\`${CALLBACK_PATH}/<name>\` with [several providers](#several-providers)).`,
      { format: 'http-origin' },
    ),
    trustedProxies: list(
      'IP addresses or CIDRs of the reverse proxies whose `X-Forwarded-For`/`-Proto`/`-Host` headers are believed: from them these headers are extended (and `X-Forwarded-For` is read right to left, skipping these peers, for the client address); from any other peer they are replaced. Empty: none. Forward-auth does not use it (see [Which request is checked](#which-request-is-checked)).',
      string('IP address or CIDR', { format: 'ip-or-cidr' }),
      { default: [] },
    ),
    managementHost: string(
      'Address of the [management listener](#management-listener-probes-and-metrics). Its `/metrics` and `/config` are unauthenticated and answer anyone who reaches it, so unset it is `$OPENID_GATEWAY_MANAGEMENT_HOST` when that is set, else `127.0.0.1` (this host only); the container image sets `OPENID_GATEWAY_MANAGEMENT_HOST=0.0.0.0` because kubelet probes and Prometheus reach the pod from outside.',
      { minLength: 1, format: 'listen-host' },
    ),
    managementPort: integer(
      'Port of the [management listener](#management-listener-probes-and-metrics) (`/healthz`, `/readyz`, `/metrics`, `/config`) on `server.managementHost`; must differ from `server.port` (never served on the public port). `0` turns it off.',
      0,
      65535,
      9091,
    ),
    requestTimeoutMs: integer(
      'Time a client has to send a whole request, headers and body, in milliseconds; then `408` and the connection is closed. A client that trickles a body (to back-channel logout, or to a protected path) holds a connection no longer. WebSockets and upstream answers are not limited by it (see `upstreams[].timeoutMs`).',
      1000,
      MAX_TIMER_MS,
      30000,
    ),
    shutdownTimeoutMs: integer(
      'On SIGTERM/SIGINT: how long in-flight requests may still finish, in milliseconds; then the remaining connections are closed and the gateway exits 0.',
      0,
      MAX_TIMER_MS,
      10000,
    ),
    workers: {
      type: ['integer', 'string'],
      description:
        'Processes serving `server.port` (`node:cluster`, see [Workers](#workers-several-cores)): `1` is a single process; more, or `auto` (one per core), start a primary that runs them and the management listener. More than one is refused with `session.store: memory`, which workers cannot share.',
      minimum: 1,
      maximum: 64,
      pattern: WORKERS_AUTO.pattern,
      default: 1,
    },
    extAuthzGrpcPort: integer(
      'Port of the [Envoy ext_authz](#envoy-ext_authz-http-and-grpc) gRPC service (`envoy.service.auth.v3.Authorization/Check` and `grpc.health.v1`, cleartext HTTP/2) on `server.host`, for Envoy Gateway, Istio and other Envoy-based gateways. `0` turns it off.',
      0,
      65535,
      0,
    ),
    watchConfig: boolean(
      '[Reload](#live-reload) the configuration when the file changes (looked at every 2 s), as SIGHUP does: validated in full and swapped in without dropping connections or sessions; an invalid file keeps the running configuration. A change that removes access rules is loaded only once the file has stayed the same for 30 s (SIGHUP loads it at once).',
      false,
    ),
  },
  { required: ['publicUrl'] },
)

const providerKeys: Record<string, JsonSchema> = {
  issuer: string(
    'Issuer identifier, kept exactly as written: it must match the `iss` claim. Discovery is read from `<issuer>/.well-known/openid-configuration`. Must be https unless `allowInsecureHttp` is true; no query or fragment.',
    { format: 'issuer-url' },
  ),
  clientId: string('Client identifier registered at the provider.', { minLength: 1 }),
  clientSecret: string(
    'Client secret: **required** with `client_secret_basic` and `client_secret_post`, refused with `private_key_jwt`. Supply it through the environment, e.g. `${OIDC_CLIENT_SECRET}`.',
    { minLength: 1 },
  ),
  clientAuthMethod: string(
    'How the client authenticates at the token, PAR, introspection and revocation endpoints. `private_key_jwt` signs a JWT with `clientKey` (register its public key: `openid-gateway jwks`); see [Client authentication with a key](#client-authentication-with-a-key-private_key_jwt).',
    { enum: ['client_secret_basic', 'client_secret_post', 'private_key_jwt'], default: 'client_secret_basic' },
  ),
  clientKey: string(
    'Private key of `private_key_jwt` (**required** there, refused otherwise): PEM (PKCS#8, PKCS#1 or SEC1) or JWK text, e.g. `${OIDC_CLIENT_KEY}`, or the path of a file holding it. RSA (2048 bits or more; PS256, else RS256), EC P-256/384/521 (ES256/384/512) or Ed25519; a JWK `alg` pins the algorithm. Masked by `check` when inline.',
    { format: 'private-key' },
  ),
  clientKeyId: string(
    "`kid` of the client assertions signed with `clientKey` and of the JWKS `openid-gateway jwks` prints. Unset: the JWK's own `kid`, else the RFC 7638 thumbprint of the public key.",
    {
      minLength: 1,
    },
  ),
  clientAssertionAudience: string(
    "`aud` of the `private_key_jwt` client assertions: `issuer` (also when unset), the provider's issuer identifier as one string (RFC 9126 section 2, FAPI 2.0, and what current providers expect), or `token_endpoint`, the token endpoint URL from discovery (OpenID Connect Core 9's suggestion, and the only value Ory Hydra 2.3 accepts: [Ory Hydra](#ory-hydra)). Only used with `private_key_jwt`; `token_endpoint` is refused with `profile: fapi2`.",
    { enum: ['issuer', 'token_endpoint'] },
  ),
  pushedAuthorizationRequests: string(
    '[Pushed authorization requests](#pushed-authorization-requests-par) (RFC 9126): `auto` uses them when the provider requires them (`require_pushed_authorization_requests`); `required` always (the provider must offer them); `off` never (a provider that requires them is refused).',
    { enum: ['auto', 'required', 'off'], default: 'auto' },
  ),
  responseMode: string(
    `How the provider returns the sign-in to the callback ([Form post](#form-post-response-mode)). \`query\`: a redirect whose URL carries \`code\` and \`state\`. \`form_post\` (OAuth 2.0 Form Post Response Mode): the authorization request carries \`response_mode=form_post\`, the provider posts \`code\` and \`state\` in a form to \`POST ${CALLBACK_PATH}\`, so they stay out of URLs, browser history and Referer headers; the sign-in's transaction cookie is then \`SameSite=None; Secure\` (it must survive the provider's cross-site POST), so \`server.publicUrl\` must be https or a loopback address.`,
    { enum: ['query', 'form_post'], default: 'query' },
  ),
  profile: string(
    '`oidc`: OpenID Connect with PKCE. `fapi2`: the [FAPI 2.0 Security Profile](#fapi-20-profile): requires `clientAuthMethod: private_key_jwt`, turns on `dpop` and `pushedAuthorizationRequests: required` (`off` is refused), requires `iss` in the authorization response and accepts only PS256, ES256 and EdDSA signatures.',
    { enum: ['oidc', 'fapi2'], default: 'oidc' },
  ),
  dpop: boolean(
    "Bind the session's access and refresh tokens to a key of its own with [DPoP](#dpop-sender-constrained-tokens) (RFC 9449): a stolen token is useless without the key, which stays sealed in the session. The provider must accept ES256 proofs. DPoP-bound tokens are never forwarded to upstreams (`forwardAccessToken: true` is refused).",
    false,
  ),
  scopes: list(
    'Scopes requested at sign-in; must include `openid`. Listing `offline_access` here does what `offlineAccess: true` does.',
    string('scope', { pattern: SCOPE_TOKEN.pattern }),
    {
      uniqueItems: true,
      contains: { const: 'openid' },
      default: ['openid', 'profile', 'email'],
    },
  ),
  offlineAccess: boolean(
    "Ask the provider for a refresh token: adds `offline_access` to `scopes`, and `prompt=consent`, which OpenID Connect Core 1.0 section 11 requires for it (most providers then show a consent screen at every sign-in). Without a refresh token a session ends when its access token expires, and the next request signs in again through the provider's own session. Keycloak issues refresh tokens without it.",
    false,
  ),
  audiences: list(
    'Accepted `aud` values of Bearer access tokens (for an introspected token without `aud`: the accepted `client_id` values). Empty: `[clientId]`.',
    string('audience', { minLength: 1 }),
    { uniqueItems: true, default: [] },
  ),
  bearer: object(
    '[Bearer tokens](#bearer-tokens) sent by API clients instead of a session cookie.',
    {
      algorithms: list(
        'JWS algorithms accepted on Bearer JWTs. Asymmetric only: `none` and `HS*` are refused by validation.',
        string('algorithm', { enum: [...ASYMMETRIC_ALGORITHMS] }),
        { minItems: 1, uniqueItems: true, default: [...ASYMMETRIC_ALGORITHMS] },
      ),
      introspection: boolean("Check Bearer tokens that are not JWTs at the provider's RFC 7662 `introspection_endpoint` (results cached up to 60 s).", false),
      requireAtJwt: boolean(
        'Accept a Bearer JWT only with the `typ` header `at+jwt` (RFC 9068 section 2.1). Off: `JWT` or no `typ` is accepted too, as Keycloak, Entra ID and Okta send, and a token shaped like an ID token must carry an access-token marker ([Bearer tokens](#bearer-tokens)).',
        false,
      ),
    },
    { default: {} },
  ),
  idTokenAlgorithms: list(
    "Pins the JWS algorithms ID tokens may be signed with ([ID token signing algorithm](#id-token-signing-algorithm)). Unset: every asymmetric algorithm in the provider's `id_token_signing_alg_values_supported` (RS256 when it lists none). `none` and `HS*` are refused by validation.",
    string('algorithm', { enum: [...ASYMMETRIC_ALGORITHMS] }),
    { minItems: 1, uniqueItems: true },
  ),
  timeoutMs: integer('Timeout of every request to the provider, in milliseconds.', 1, MAX_TIMER_MS, 10000),
  notReadyPageAfterMs: integer(
    'Once the provider\'s discovery has failed for this long (in milliseconds) for a cause that can pass (the provider unreachable, a timeout, a 404 or 5xx), sign-ins answer 503 `not_ready` saying the provider is unreachable (with the request id), instead of "the gateway is starting". A discovery answer that rules the provider out (another issuer, metadata the settings cannot work with) is 503 `provider_misconfigured` at once, whatever this says. The log names each failure\'s cause.',
    0,
    MAX_TIMER_MS,
    30000,
  ),
  postLogoutRedirectUri: string('Where the provider sends the browser after RP-initiated logout (`post_logout_redirect_uri`). Optional.', {
    format: 'http-url',
  }),
  clockToleranceSeconds: integer('Clock skew tolerated on `exp`, `iat` and `nbf`, in seconds.', 0, MAX_CLOCK_TOLERANCE_SECONDS, 30),
  allowInsecureHttp: boolean('Allow a plain-http (`http://`) issuer. For local development and tests only.', false),
  ssf: object(
    "The [Shared Signals receiver](#shared-signals-receiver): the gateway subscribes to this provider's OpenID Shared Signals Framework 1.0 transmitter and ends or refreshes sessions on CAEP events (`session-revoked`, `credential-change`, `token-claims-change`). Unset: off.",
    {
      configurationUrl: string(
        "The transmitter's configuration metadata. Unset: `/.well-known/ssf-configuration` under the provider's issuer (inserted after the host, as SSF 1.0 section 7.2 says). Must be https unless `allowInsecureHttp` is true.",
        { format: 'http-url' },
      ),
      delivery: string(
        `\`push\`: the transmitter POSTs events to \`${SSF_EVENTS_PATH}\` (RFC 8935) with \`authorization\`. \`poll\`: the gateway fetches them every \`pollIntervalSeconds\` (RFC 8936).`,
        { enum: ['push', 'poll'], default: 'push' },
      ),
      pollIntervalSeconds: integer(
        'With `delivery: poll`: seconds between two polls when the transmitter has nothing more (a poll that returns events is followed at once by the next).',
        1,
        3600,
        10,
      ),
      authorization: string(
        'With `delivery: push` (**required** there): the `Authorization` header value the gateway registers in the stream and requires on every push, compared in constant time. A secret: supply it through the environment, e.g. `${SSF_PUSH_AUTHORIZATION}`. Masked by `check`.',
        { minLength: 16 },
      ),
      bearerToken: string(
        "The access token the gateway sends (`Authorization: Bearer`) to the transmitter's stream management endpoints and its poll endpoint. A secret, e.g. `${SSF_TRANSMITTER_TOKEN}`. Masked by `check`.",
        { minLength: 1 },
      ),
      audience: string("The `aud` every event must carry: what the transmitter knows the gateway as. Unset: the provider's `clientId`.", { minLength: 1 }),
      credentialChange: string(
        "What a CAEP `credential-change` event does: `end` the subject's sessions (a password was changed or a key revoked elsewhere), or `ignore` it.",
        { enum: ['end', 'ignore'], default: 'end' },
      ),
      required: boolean(
        'The stream must be `enabled` at the transmitter and reachable for the gateway to be ready: `/readyz` answers 503 naming `shared_signals` until it is.',
        false,
      ),
    },
  ),
  userClaim: string(
    "[Claim mapping](features/claim-mapping.md): the claim path of the user, what the user identity header (`X-Forwarded-User`), forward-auth's `X-Auth-Request-User`, the assertion's `user` and the request line's `user` carry. A path: names joined by `.` (`realm_access.roles`), a name with other characters than letters, digits, `_`, `-`, `$` and `:` quoted as a JSON string in brackets (`[\"https://example.com/id\"]`). The value must be a non-empty string or a number: a user without it is refused with 403. Unset: `sub`. The session's subject stays `sub` either way (refresh, back-channel logout and revocation key on it).",
    { format: 'claim-path' },
  ),
  groupsClaim: string(
    '[Claim mapping](features/claim-mapping.md): the claim path of the groups (a list of strings, or one string), what the groups identity header, `X-Auth-Request-Groups`, `allow.groups` and the assertion\'s `groups` read: e.g. `realm_access.roles` or `resource_access.my-app.roles` (Keycloak), `["https://example.com/roles"]` (Auth0). Unset: `groups`.',
    { format: 'claim-path' },
  ),
  additionalClaims: list(
    "Claims the [userinfo endpoint](endpoints.md#userinfo) adds to its answer for a user of this provider, each under its own name, when the session has it (oauth2-proxy's `additionalClaims`). Top-level claim names; the session keeps them (from the ID token, or UserInfo with `claimSources.userInfo`). `user`, `email`, `groups` and `preferredUsername` are the endpoint's own members and are never replaced. Unset: none.",
    string('A claim name.', { minLength: 1 }),
    { uniqueItems: true },
  ),
  redirectPath: string(
    `The path of this provider's \`redirect_uri\` in place of \`${CALLBACK_PATH}\` (\`${CALLBACK_PATH}/<name>\` with [several providers](#several-providers)): the gateway sends \`server.publicUrl\` plus this path, and serves the callback there (GET, and POST for \`responseMode: form_post\`) with every check of the usual one (state, PKCE, nonce, \`iss\`). Set it to oauth2-proxy's \`/oauth2/callback\` to switch without changing the client registered at the provider ([cutover](migrating-from-oauth2-proxy.md#cutover-keep-the-redirect-uri)). The path and everything below it then belong to the gateway: never proxied, another method a 405; no upstream's \`match.pathPrefix\` may be at or below it. Unset: the contract's path.`,
    { format: 'redirect-path' },
  ),
  claimSources: object(
    "Claims from beyond the ID token ([claim sources](features/claim-sources.md)): the UserInfo endpoint, aggregated and distributed claims, Entra ID's group overage. Fetched at sign-in and at each refresh, kept in the session. Unset: the ID token's claims only, and nothing more is fetched.",
    {
      userInfo: boolean(
        "Fetch the provider's `userinfo_endpoint` with the session's access token (DPoP-bound when the session is) at sign-in and at each refresh (OpenID Connect Core 5.3), and merge its claims: the ID token's stand for the claims it defines (`iss`, `sub`, `aud`, `acr`, `amr`, `auth_time`, `sid`, `nonce`...), UserInfo's win for the others (`name`, `email`, `groups`...). A UserInfo answer about another `sub`, or that is not JSON, fails the sign-in or refresh (502).",
        false,
      ),
      trustedIssuers: list(
        "Issuers whose aggregated and distributed claims are taken (OpenID Connect Core 5.6.2): a claim source's JWT is verified against its issuer's keys (found through that issuer's discovery) and must name one of these in `iss`. A source of any other issuer is ignored and logged.",
        string('An issuer identifier, exactly as the JWTs name it.', { format: 'issuer-url' }),
        { default: [] },
      ),
      trustedEndpoints: list(
        "Distributed claim endpoints the gateway may fetch, exactly as a `_claim_sources` entry names them (OpenID Connect Core 5.6.2), with the access token the source gives or else the session's; the JWT it returns must be signed by one of `trustedIssuers`. Any other endpoint is never fetched (no request goes where a token says), only logged.",
        string('An endpoint URL.', { format: 'http-url' }),
        { default: [] },
      ),
      entraGroupOverage: boolean(
        "Microsoft Entra ID: when a token carries the groups overage marker (`_claim_names.groups`, or `hasgroups`) instead of `groups`, fetch the user's transitive group memberships from Microsoft Graph (`/v1.0/me/transitiveMemberOf`) with the session's access token and keep their ids as `groups`. The URL in the marker is never fetched. Needs `session.store` `memory` or `redis` (hundreds of group ids do not fit in cookies). See [Entra ID](providers/entra-id.md).",
        false,
      ),
      graphBaseUrl: string(
        "With `entraGroupOverage`: Microsoft Graph's root, for a national cloud `https://graph.microsoft.us`, `https://dod-graph.microsoft.us` or `https://microsoftgraph.chinacloudapi.cn`. Must be https unless `allowInsecureHttp` is true.",
        { format: 'http-url', default: 'https://graph.microsoft.com' },
      ),
      gitlabProjects: list(
        "GitLab: projects whose members get a group `project:<namespace/project>` (oauth2-proxy's `--gitlab-projects`), for `allow.groups`. Each `namespace/project`, or `namespace/project=<level>` with a GitLab access level the user must have at least (10 Guest, 15 Planner, 20 Reporter, 30 Developer, 40 Maintainer, 50 Owner; unset: 20). Read at sign-in and each refresh from the projects API (`GET /api/v4/projects?membership=true&min_access_level=<level>`) with the session's access token: add `read_api` to `scopes`. A lookup that fails fails the sign-in or refresh (502). See [GitLab](providers/gitlab.md).",
        string('A project path, optionally `=<access level>`.', { minLength: 3 }),
        { uniqueItems: true, default: [] },
      ),
      gitlabUrl: string(
        "With `gitlabProjects`: GitLab's root, where `/api/v4` is (self-managed: `https://gitlab.example.com`). Unset: the provider's `issuer`. Must be https unless `allowInsecureHttp` is true.",
        { format: 'http-url' },
      ),
      googleGroups: object(
        "Google Workspace: the user's groups (their email addresses) read from the Admin SDK Directory API (`groups.list` with `userKey` the session's `email`) become the session's `groups`, for `allow.groups` (oauth2-proxy's `--google-group`). Authorised by a service account with domain-wide delegation acting as `adminEmail`. A lookup that fails fails the sign-in or refresh (502). See [Google](providers/google.md).",
        {
          adminEmail: string(
            "A Workspace administrator the service account acts as (the JWT's `sub`; oauth2-proxy's `--google-admin-email`): one allowed to read groups. **Required**.",
            { format: 'email-address' },
          ),
          serviceAccountKeyFile: string(
            "Path of the service account's JSON key file (oauth2-proxy's `--google-service-account-json`). Exactly one of this and `serviceAccountKeyEnv`. The key itself is refused here: it never belongs in the configuration.",
            { minLength: 1 },
          ),
          serviceAccountKeyEnv: string(
            "Name of the environment variable holding the service account's JSON key (not the key: `GOOGLE_SERVICE_ACCOUNT_JSON`, never `${GOOGLE_SERVICE_ACCOUNT_JSON}`). Exactly one of this and `serviceAccountKeyFile`.",
            { minLength: 1 },
          ),
          tokenUrl: string(
            "Google's OAuth 2.0 token endpoint the signed JWT is sent to; also the JWT's `aud`. Must be https unless the provider's `allowInsecureHttp` is true.",
            { format: 'http-url', default: 'https://oauth2.googleapis.com/token' },
          ),
          directoryUrl: string(
            "The Admin SDK's root, where `/admin/directory/v1/groups` is. Must be https unless the provider's `allowInsecureHttp` is true.",
            {
              format: 'http-url',
              default: 'https://admin.googleapis.com',
            },
          ),
        },
        { required: ['adminEmail'] },
      ),
    },
  ),
  github: object(
    "Makes this provider [GitHub](providers/github.md) (plain OAuth 2.0, no ID token): `issuer` is then `https://github.com` or a GitHub Enterprise Server's base URL, the sign-in goes to `<issuer>/login/oauth/authorize` and `<issuer>/login/oauth/access_token`, and the user is read from GitHub's REST API (`https://api.github.com`, or `<issuer>/api/v3`): `sub` is the account's numeric id, `preferred_username` its login, `email` its verified primary email (a user without one is refused), `groups` every organization as `org` and every team as `org/team-slug`. The lists below admit a user who matches any entry of any of them (none given: every GitHub user); checked at sign-in and at each refresh. `check` refuses the OpenID Connect keys on a GitHub provider, naming each.",
    {
      organizations: list(
        "Admit members of these organizations (logins), as oauth2-proxy's `--github-org` alone does.",
        string('organization login', { pattern: '^[A-Za-z0-9][A-Za-z0-9-]{0,38}$' }),
        { uniqueItems: true, default: [] },
      ),
      teams: list(
        "Admit members of these teams, each `org/team-slug` (oauth2-proxy's `--github-org` with `--github-team`).",
        string('org/team-slug', { pattern: '^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,255}$' }),
        { uniqueItems: true, default: [] },
      ),
      repositories: list(
        "Admit collaborators of these repositories, each `owner/repo` (oauth2-proxy's `--github-repo`): a user who can push to it, or, for a private repository, read it (GitHub's `permissions` for the user on `GET /repos/{owner}/{repo}`). A private repository needs the `repo` scope in `github.scopes` (an OAuth app) or the Metadata permission (a GitHub App).",
        string('owner/repo', { pattern: '^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$' }),
        { uniqueItems: true, default: [] },
      ),
      users: list(
        "Admit these users (logins, compared without case), as oauth2-proxy's `--github-user`.",
        string('user login', { pattern: '^[A-Za-z0-9][A-Za-z0-9-]{0,38}$' }),
        { uniqueItems: true, default: [] },
      ),
      scopes: list(
        'OAuth app scopes asked at sign-in (GitHub Apps ignore them: their permissions apply). `read:user` and `user:email` read the user and its emails, `read:org` its organizations and teams; add `repo` for `repositories` that are private.',
        string('scope', { pattern: SCOPE_TOKEN.pattern }),
        { uniqueItems: true, default: ['read:user', 'user:email', 'read:org'] },
      ),
    },
  ),
}

const provider = object(
  "The OpenID Connect provider and this gateway's client registration there: the one-provider form of `providers`, a provider named `default`. Exactly one of `provider` and `providers` is given.",
  providerKeys,
  {
    required: ['issuer', 'clientId'],
  },
)

const providers = list(
  "[Several providers](#several-providers) instead of `provider` (never both): each entry has a unique `name` and the keys of `provider`. Each upstream names those that may sign in to it (`upstreams[].providers`); sessions remember theirs; a Bearer token's `iss` selects its provider.",
  object(
    "A provider and this gateway's client registration there.",
    {
      name: string("Unique name: the redirect endpoint's `provider=<name>`, `upstreams[].providers`, logs. Renaming a provider ends its sessions.", {
        pattern: UPSTREAM_NAME.pattern,
        maxLength: 63,
      }),
      ...providerKeys,
    },
    { required: ['name', 'issuer', 'clientId'] },
  ),
  { minItems: 1 },
)

const cookies = object(
  "The gateway's cookies (every one of them encrypted and HttpOnly).",
  {
    name: string('Base name of the cookies. When `secure`, it gets the `__Host-` prefix, or `__Secure-` when `domain` is set.', {
      pattern: COOKIE_NAME.pattern,
      default: 'ogw',
    }),
    secrets: list(
      'Encryption secrets, each at least 32 bytes (UTF-8). The first encrypts, all decrypt; to rotate, put the new secret first.',
      string('secret', { format: 'cookie-secret' }),
      { minItems: 1 },
    ),
    secure: boolean(
      'Set the `Secure` attribute (and the `__Host-`/`__Secure-` prefix). Only false for plain-http development: must be false when `server.publicUrl` is plain http on a host other than localhost.',
      true,
    ),
    sameSite: string('`SameSite` attribute of the session cookies; `none` requires `secure: true`.', {
      enum: ['lax', 'strict', 'none'],
      default: 'lax',
    }),
    domain: string(
      '`Domain` attribute, to share the sign-in with subdomains. Optional; disables the `__Host-` prefix. A leading dot is dropped and the value is lowercased.',
      {
        format: 'cookie-domain',
      },
    ),
    domains: list(
      `[Several cookie domains](features/several-domains.md) instead of \`domain\` (never both): each request's session cookie gets the longest entry its host is in (on a dot boundary), or no \`Domain\` (the request's host only) when its host is in none. One sign-in serves every entry: the callback sets the cookie for \`server.publicUrl\`'s host, and a host of another entry receives the session through the one-time hand-off endpoint (\`${SIGN_IN_PATH}/handoff\`). Disables the \`__Host-\` prefix. Leading dots are dropped and entries lowercased; at most 10.`,
      string('domain', { format: 'cookie-domain' }),
      { minItems: 1, uniqueItems: true },
    ),
    credentialsPath: string(
      `Path of the cookie holding the refresh and ID tokens (\`session.store: cookie\` only). \`/\`: sent with every request, so expired access tokens are refreshed for every request; \`${SIGN_IN_PATH}\`: sent to the sign-in endpoints only, so the refresh token never travels with application requests and only page navigations are refreshed (through a redirect). See [Sessions](#sessions).`,
      { enum: ['/', SIGN_IN_PATH], default: '/' },
    ),
  },
  { required: ['secrets'] },
)

const session = object(
  'Where sign-ins are kept.',
  {
    store: string(
      '`cookie`: encrypted in the browser; `memory`: this process only; `redis`: shared by every replica through `session.redisUrl`, `session.redis.sentinels` or `session.redis.cluster` (see [Redis store](#redis-store)).',
      {
        enum: ['cookie', 'memory', 'redis'],
        default: 'cookie',
      },
    ),
    redisUrl: string(
      'One Redis server (`redis://`, or `rediss://` for TLS; user and password in the URL, from the environment: `rediss://:${REDIS_PASSWORD}@redis:6379/0`). `store: redis` needs it, `session.redis.sentinels` or `session.redis.cluster` (one of the three). With `store: cookie`, Redis keeps the back-channel logout revocation list for every replica. Masked by `check`.',
      { format: 'redis-url' },
    ),
    maxAgeSeconds: integer('Absolute lifetime of a sign-in, in seconds (60 to 2592000).', 60, 2592000, 28800),
    maxSessionsPerUser: integer(
      "Sessions one user (a provider and `sub`) keeps at most in the `memory` and `redis` stores; a sign-in beyond it ends that user's oldest session, never anyone else's (1 to 1000). A session held in the browser (`store: cookie`) is not counted.",
      1,
      1000,
      10,
    ),
    memory: object(
      'The memory store.',
      {
        maxSessions: integer('Sessions kept at most; when full, the oldest sign-in is evicted (1 to 10000000).', 1, 10000000, 10000),
      },
      { default: {} },
    ),
    redis: object(
      'The Redis connection: `session.redisUrl`, or `sentinels` or `cluster` here (see [Redis: one node, Sentinel, Cluster](#redis-one-node-sentinel-cluster)).',
      {
        keyPrefix: string('Prefix of every key the gateway writes, so several gateways can share one Redis database.', {
          pattern: KEY_PREFIX.pattern,
          default: 'openid-gateway:',
        }),
        timeoutMs: integer(
          'Time to connect and to answer each command, in milliseconds; past it, requests that need a session answer 503 `session_store_unavailable`.',
          1,
          MAX_TIMER_MS,
          2000,
        ),
        username: string('ACL user of the data nodes, with `sentinels` or `cluster` (with `session.redisUrl`, the user is in the URL).', { minLength: 1 }),
        password: string(
          'Password of the data nodes, with `sentinels` or `cluster` (with `session.redisUrl`, it is in the URL); from the environment: `${REDIS_PASSWORD}`. Masked by `check`.',
          {
            minLength: 1,
          },
        ),
        tls: boolean(
          'TLS to the data nodes, with `sentinels` or `cluster` (with `session.redisUrl`, `rediss://` says it). Certificates are checked against the system CAs.',
          false,
        ),
        sentinels: object(
          'Redis Sentinel: the gateway asks the sentinels for the primary and follows a failover by itself (see [Redis Sentinel](#redis-sentinel)). Instead of `session.redisUrl`.',
          {
            name: string('Name of the primary the sentinels monitor (`sentinel monitor <name> ...`).', { minLength: 1 }),
            nodes: list('The sentinels, `host:port` each.', string('host:port', { format: 'host-port' }), { minItems: 1, uniqueItems: true }),
            username: string('ACL user of the sentinels, when they require one.', { minLength: 1 }),
            password: string('Password of the sentinels (`requirepass` on the sentinels), when they require one. Masked by `check`.', { minLength: 1 }),
            tls: boolean('TLS to the sentinels.', false),
          },
          { required: ['name', 'nodes'] },
        ),
        cluster: object(
          'Redis Cluster: keys are spread by hash slot over several primaries, each with replicas (see [Redis Cluster](#redis-cluster)). Instead of `session.redisUrl`.',
          {
            nodes: list(
              'Seed nodes, `host:port` each: one is enough, the others are discovered; list several so that a start finds one up.',
              string('host:port', { format: 'host-port' }),
              {
                minItems: 1,
                uniqueItems: true,
              },
            ),
            natMap: {
              type: 'object',
              description:
                'Where the gateway reaches each node, by the `host:port` the cluster announces: `{"10.0.1.5:6379": "redis-0.example.com:6379"}`. For nodes behind NAT or a port-forward, whose announced addresses the gateway cannot reach.',
              propertyNames: { format: 'host-port' },
              additionalProperties: string('host:port', { format: 'host-port' }),
            },
            dnsLookup: string(
              '`system`: resolve node names with the system resolver; `passthrough`: connect by the names as given, so that TLS checks the certificate against them (AWS ElastiCache and MemoryDB with TLS need it).',
              { enum: ['system', 'passthrough'], default: 'system' },
            ),
          },
          { required: ['nodes'] },
        ),
        waitReplicas: integer(
          'Replicas a session write waits for (Redis `WAIT`) before the gateway answers, so that a sign-in, refresh or logout it acknowledged survives a failover. Unset: 1 with `sentinels` or `cluster`, 0 with `session.redisUrl`. A write that fewer replicas acknowledge in `waitTimeoutMs` is still kept (it is on the primary), logged and counted; `min-replicas-to-write` on the primary refuses it instead.',
          0,
          16,
        ),
        waitTimeoutMs: integer('How long a write waits for `waitReplicas`, in milliseconds.', 1, 60000, 500),
      },
      { default: {} },
    ),
  },
  { default: {} },
)

const redirects = object(
  'Where the gateway may send a browser after sign-in (`redirectAfter`), besides its own origin.',
  {
    allowedHosts: list(
      'Hosts that `redirectAfter` may point to, and whose pages may open WebSockets and send the sign-out form (over https only, unless `server.publicUrl` is http): exact hosts (`app.example.com`, `app.example.com:8443`) or `.example.com` entries (example.com and every subdomain). No scheme, path or `*`. Entries are lowercased.',
      string('host', { format: 'allowed-host' }),
      { default: [] },
    ),
  },
  { default: {} },
)

const rateLimit = object(
  'Limits on requests the gateway answers itself, per client address (the address `X-Forwarded-For` names when the peer is in `server.trustedProxies`, otherwise the peer; IPv6 clients count per /64). Counted in this process: each replica keeps its own budget. See [Rate limit on the sign-in endpoints](#rate-limit-on-the-sign-in-endpoints).',
  {
    signIn: object(
      `One budget shared by GET \`${SIGN_IN_PATH}/redirect\`, \`/callback\` and \`/refresh\` (a sign-in costs 2). Logout and proxied paths are never limited. Over it: 429 \`rate_limited\` with \`Retry-After\`.`,
      {
        max: integer(
          'Requests allowed per client address in each window; `0` turns the limit off. The default lets 10,000 people behind one NAT address sign in within five minutes.',
          0,
          1000000,
          6000,
        ),
        windowSeconds: integer('Length of the window, in seconds; it starts at the first request of the address.', 1, 86400, 60),
      },
      { default: {} },
    ),
  },
  { default: {} },
)

const stringList = (description: string, item: JsonSchema): JsonSchema => list(description, item, { minItems: 1 })

const allow = object(
  'Who may use the upstream once signed in. Every kind given must pass; omit a kind to not restrict by it.',
  {
    providers: stringList(
      "Providers whose users the other rules admit ([Several providers](#several-providers)); `['*']` is every provider of the upstream. Unset with several providers on the upstream and any other rule: the upstream's default provider alone (a group or email of one provider says nothing about another's users).",
      string('provider name', { pattern: PROVIDER_REF }),
    ),
    emails: stringList('Accepted email addresses, exact but ASCII case-insensitive (lowercased).', string('email', { format: 'email-address' })),
    emailDomains: stringList(
      'Accepted domains of the `email` claim: the part after `@`, written without the `@`; `.example.com` accepts the subdomains of example.com. Lowercased.',
      string('domain', { format: 'email-domain' }),
    ),
    groups: stringList('Accepted groups; any one of them in the `groups` claim passes.', string('group', { minLength: 1 })),
    claims: {
      type: 'object',
      description: 'Claim name to accepted values (string, number or boolean); the claim (or one of its values if it is a list) must be one of them.',
      minProperties: 1,
      propertyNames: { minLength: 1 },
      additionalProperties: stringList('accepted values', { type: ['string', 'number', 'boolean'] }),
    },
    acr: stringList(
      "[Step-up](features/step-up.md): the accepted authentication context classes (`acr`), most preferred first (sent in that order as `acr_values`, OpenID Connect Core 3.1.2.1). The session's `acr` (or a Bearer token's) must be one of them, exactly; a value not listed never passes, however strong. A browser page load without one is sent to sign in again asking for them, any other request gets 401 `insufficient_user_authentication` (RFC 9470).",
      string('acr value', { pattern: ACR_VALUE.pattern }),
    ),
    maxAuthAgeSeconds: integer(
      "[Step-up](features/step-up.md): the user must have authenticated at the provider at most this many seconds ago (the `auth_time` claim, with the provider's `clockToleranceSeconds`); sent as `max_age` when the browser is sent to sign in again. A session without `auth_time` does not pass.",
      1,
      31536000,
    ),
  },
  { default: {} },
)

// A rule's own `allow` is required: a rule that left it out would admit every signed-in user.
const { default: _allowDefault, ...ruleAllow } = allow

const pathRulePath = string(
  'Path prefix the rule covers: the path itself and everything below it, written as `match.pathPrefix` (the same characters are refused); a trailing `/` is removed.',
  { format: 'path-prefix' },
)

const pathRegex = string(
  "An anchored regular expression (RE2 syntax, as Go and oauth2-proxy use; written `^...$`, it matches the whole path) over the normalized path: letters, digits, `-._~/` and `!$&'()*+,=:@` as themselves (also where the request percent-encoded them), every other character percent-encoded in uppercase hex (`/caf%C3%A9`). Printable ASCII, at most 1000 characters, counted repetitions up to 100; no backreferences, lookaround or `\\p{...}` classes, which linear-time matching cannot run.",
  { format: 'path-regex' },
)

const requestMethods = list(
  "The methods (uppercase, e.g. `GET`, `POST`) the entry applies to; a request's method is compared without case, and `GET` also covers `HEAD`. Unset: every method.",
  string('method', { pattern: METHOD_TOKEN.pattern }),
  { minItems: 1, uniqueItems: true },
)

const headerName = (description: string, defaultValue: string): JsonSchema => string(description, { format: 'identity-header', default: defaultValue })

const identityHeaders = object(
  'Names of the headers carrying the signed-in identity to the upstream. Each must be a valid header name, must not repeat another (case, `_` and `-` count as the same), and must not be one that HTTP or the gateway manages (`Authorization`, `Cookie`, `Host`, `X-Forwarded-For`, `X-Auth-Request-*`, …).',
  {
    user: headerName("Carries the user: the `sub` claim, or the claim the provider's `userClaim` names.", 'X-Forwarded-User'),
    email: headerName('Carries the `email` claim.', 'X-Forwarded-Email'),
    groups: headerName("Carries the groups, comma-separated: the `groups` claim, or the claim the provider's `groupsClaim` names.", 'X-Forwarded-Groups'),
    preferredUsername: headerName('Carries the `preferred_username` claim.', 'X-Forwarded-Preferred-Username'),
    issuer: headerName("Carries the issuer of the user's provider (two providers may use the same `sub` for different people).", 'X-Forwarded-Issuer'),
    acr: headerName(
      'Carries the `acr` claim: the authentication context class the provider says the user signed in with ([Step-up](features/step-up.md)).',
      'X-Forwarded-Acr',
    ),
    amr: headerName('Carries the `amr` claim (the authentication methods, e.g. `pwd`, `otp`), comma-separated.', 'X-Forwarded-Amr'),
    authTime: headerName(
      'Carries the `auth_time` claim: when the user last authenticated at the provider, in seconds since the epoch.',
      'X-Forwarded-Auth-Time',
    ),
  },
  { default: {} },
)

const transactionTokens = object(
  "[Transaction Tokens](features/transaction-tokens.md) (draft-ietf-oauth-transaction-tokens-10) for this upstream: every signed-in request (session or Bearer token) gets a fresh short-lived JWT in the `Txn-Token` header, `typ` `txntoken+jwt`, signed with `assertions.signingKeys` (required then) and verifiable against `/.well-known/jwks.json`: `iss` `server.publicUrl`, `aud` `trustDomain`, a unique `txn`, `sub` (the provider's `sub`, `<issuer>#<sub>` when the trust domain has several providers), `scope`, `req_wl` (the public URL's host), `rctx` (`req_ip`, `transport`, `authn`) and `tctx` (`upstream`, `method`, `path`, `idp`). A client's own `Txn-Token` never reaches an upstream of a configuration that uses this key.",
  {
    trustDomain: string('`aud` of the tokens: the trust domain they are valid in (e.g. `trust-domain.example` or a URI); the services behind verify it.', {
      pattern: AUDIENCE.pattern,
    }),
    scope: list(
      '`scope` of the tokens (space-joined): the purpose of the transactions, as narrow as the trust domain can name it.',
      string('scope', { pattern: SCOPE_TOKEN.pattern }),
      {
        minItems: 1,
        uniqueItems: true,
      },
    ),
    ttlSeconds: integer('Lifetime of a token, in seconds (`exp` - `iat`): a token is minted per request, never reused.', 5, 300, 60),
  },
  { required: ['trustDomain', 'scope'] },
)

const tokenExchange = object(
  "[Token exchange](#token-exchange) (RFC 8693) for this upstream: before a signed-in request is proxied, the user's access token (the session's, or the client's Bearer token) is exchanged at their provider's token endpoint for a token meant for this upstream, which alone is sent as `Authorization: Bearer`; the user's own token never reaches the upstream. Cached per access token and upstream until 30 seconds before the exchanged token expires. A refusal by the provider is 403 `token_exchange_refused`. At least one key.",
  {
    audience: string('`audience` of the exchange (RFC 8693 2.1): the logical name of the upstream at the provider (a client id in Keycloak).', {
      pattern: AUDIENCE.pattern,
    }),
    scope: list('`scope` of the exchange: the scopes the exchanged token should carry (space-joined).', string('scope', { pattern: SCOPE_TOKEN.pattern }), {
      minItems: 1,
      uniqueItems: true,
    }),
    resource: string('`resource` of the exchange (RFC 8707 2): the absolute URI of the upstream as the provider knows it, without a fragment.', {
      format: 'resource-uri',
    }),
  },
  { minProperties: 1 },
)

// A boolean or an object: `false` turns the document off, the object sets its members. `type` with
// two names rather than a combinator, so that env.ts still walks `properties` (only an object has them).
const resourceMetadata: JsonSchema = {
  type: ['boolean', 'object'],
  description:
    "[Protected resource metadata](#protected-resource-metadata) (RFC 9728) of this upstream, served at `/.well-known/oauth-protected-resource` followed by `match.pathPrefix` (on the upstream's hosts) and named in its 401's `WWW-Authenticate` as `resource_metadata`. Unset (or `true`): on for every upstream with `auth` other than `none` (those accept Bearer tokens). `false`: neither, e.g. for an API that publishes its own document at that path. An object sets the document's members. Refused with `auth: none` unless `false`.",
  additionalProperties: false,
  properties: {
    scopes: list(
      '`scopes_supported`: the scopes a client may ask for to use this upstream. Unset: the member is left out.',
      string('scope', { pattern: SCOPE_TOKEN.pattern }),
      { minItems: 1, uniqueItems: true },
    ),
  },
}

const upstream = object(
  'An application behind the gateway.',
  {
    name: string('Unique name (the comparison ignores case), used in logs and metrics.', {
      pattern: UPSTREAM_NAME.pattern,
      maxLength: 63,
    }),
    match: object(
      'Which requests go to this upstream: optional hosts, then the longest matching path prefix.',
      {
        pathPrefix: string(
          `Path prefix: matches the path itself and everything below it. It must start with \`/\` and may not contain \`//\`, \`?\`, \`#\`, \`\\\`, \`.\` or \`..\` segments, encoded dots, encoded slashes or whitespace. It may not contain \`:\`, \`*\` (route syntax: a parameter, a wildcard) or \`%\` (write non-ASCII characters as they are, e.g. \`/café\`), and may not be \`${SIGN_IN_PATH}\` or below it. A trailing \`/\` is removed.`,
          { format: 'path-prefix', default: '/' },
        ),
        hosts: stringList(
          'Host names (optionally with `:port`) this upstream serves; omit to serve any host. Entries are lowercased. The same hosts with the same `pathPrefix` in two upstreams is an error.',
          string('host', { format: 'host' }),
        ),
      },
      { default: {} },
    ),
    target: string(
      "URL of the upstream (http or https, without credentials, query or fragment). An https upstream's certificate is always verified, for the host of this URL (whatever `Host` is sent), against Node's CA store (add a private CA with the `NODE_EXTRA_CA_CERTS` environment variable); a certificate that does not verify makes the upstream unreachable (502).",
      { format: 'base-url' },
    ),
    auth: string(
      "`required`: sign-in needed; `optional`: identity forwarded when present, except that a path whose `allow` (the upstream's, or the [per-path rule](proxying.md#per-path-rules) deciding it) names anything (`providers`, `emails`, `emailDomains`, `groups`, `claims`, `acr`, `maxAuthAgeSeconds`) needs a sign-in as with `required`; `none`: no check.",
      {
        enum: ['required', 'optional', 'none'],
        default: 'required',
      },
    ),
    publicPaths: list(
      "Paths that need no sign-in ([Public paths](proxying.md#public-paths)). A string is a glob, e.g. `/public/**`: it starts with `/`; `*` matches within one segment, `**` at any depth, and `?` and `[...]` work as usual; braces, extglobs and a leading `!` are literal. An object gives a `glob` or a `regex` (an anchored regular expression, `^...$`, matched in linear time against the whole normalized path) and optionally `methods`, the methods it is public for (`GET` also covers `HEAD`). A path is public when any entry for the request's method matches. Refused: an invalid or unanchored regex, one the linear-time engine cannot run (backreferences, lookaround), an entry given twice, and a regex without `methods` that covers all of `match.pathPrefix` (write `auth: none`).",
      {
        type: ['string', 'object'],
        description: 'A glob, or an object with `glob` or `regex` and `methods`.',
        format: 'path-glob',
        additionalProperties: false,
        properties: {
          glob: string('A glob, as a string entry is.', { format: 'path-glob' }),
          regex: pathRegex,
          methods: requestMethods,
        },
      },
      { default: [] },
    ),
    allow,
    rules: list(
      "Per-path `allow` rules, so that part of an application (an admin area) needs other users than the rest without a second upstream ([Per-path rules](proxying.md#per-path-rules)). Each has a `path` (a prefix written as `match.pathPrefix` is, covering that path and everything below it) or a `regex` (an anchored regular expression, `^...$`, matched in linear time against the whole normalized path), and optionally `methods`, the only methods it applies to (`GET` also covers `HEAD`). Which rule decides: the first `regex` rule, in the order written, that matches; else the rule with the longest `path` covering the request (at the same `path`, one naming the method before one without `methods`). It decides with its `allow` **instead of** the upstream's `allow` (rules are not added together); requests no rule matches keep the upstream's `allow`. `auth`, `publicPaths` and `allowPreflight` are decided first: a rule never makes a path public, and never requires a sign-in on a public path. Refused: a rule with both or neither of `path` and `regex`, a `path` outside `match.pathPrefix` or equal to it, two rules with the same `path` (also once case and trailing dots are ignored) or the same `regex` for a method in common, a `path` rule that a `regex` rule covers, a `path` that a `publicPaths` entry makes public, an invalid, unanchored or not linear-time `regex`, and rules with `auth: none`.",
      object(
        'A path or pattern, the methods, and who may use it.',
        {
          path: pathRulePath,
          regex: pathRegex,
          methods: requestMethods,
          allow: {
            ...ruleAllow,
            description: "Who may use the rule's path once signed in, instead of the upstream's `allow`: the same kinds, with the same meaning.",
          },
        },
        { required: ['allow'] },
      ),
      { default: [] },
    ),
    forwardAccessToken: boolean(
      "Send `Authorization: Bearer <access token>` to the upstream; a client's own `Authorization` then never reaches it (without this key it passes unchanged).",
      false,
    ),
    forwardIdToken: boolean(
      "[Legacy credentials](features/legacy-credentials.md): send the session's ID token as `Authorization: Bearer <id token>` (oauth2-proxy's `--pass-authorization-header`; forward-auth answers it as `Authorization`); a client's own `Authorization` then never reaches the upstream. A request signed in with a Bearer token has no ID token: the upstream then receives no `Authorization`. Refused with `forwardAccessToken`, `tokenExchange` or `forwardBasicAuth` (each wants `Authorization`), with `auth: none`, and with `cookies.credentialsPath` other than `/` (the ID token is not sent with application requests then).",
      false,
    ),
    forwardAccessTokenHeader: boolean(
      "[Legacy credentials](features/legacy-credentials.md): send the access token in `X-Forwarded-Access-Token` (oauth2-proxy's `--pass-access-token`) and `X-Auth-Request-Access-Token` (what an edge copies from oauth2-proxy's auth_request answer); forward-auth answers it as `X-Auth-Request-Access-Token`. A client's own copies never reach the upstream. Refused with `tokenExchange` (the user's own token would reach the upstream), with `auth: none`, and with a DPoP-bound provider.",
      false,
    ),
    forwardBasicAuth: object(
      "[Legacy credentials](features/legacy-credentials.md): send the signed-in user as HTTP Basic credentials, `Authorization: Basic base64(user:password)` (RFC 7617, UTF-8), for applications that only read Basic (oauth2-proxy's `--pass-basic-auth` with `--basic-auth-password`; forward-auth answers it as `Authorization`, as `--set-basic-auth` does). A user-id that is absent, contains `:` or a control character sends no `Authorization`. A client's own `Authorization` never reaches the upstream. Exactly one of `password` and `passwordFile`. Refused with `forwardAccessToken`, `tokenExchange` or `forwardIdToken` (each wants `Authorization`) and with `auth: none`.",
      {
        user: string(
          "The user-id: `user`, the identity headers' user (the provider's `userClaim`, `sub` unless set); `email`, the `email` claim (oauth2-proxy's `--prefer-email-to-user`), never replaced by the user when absent.",
          { enum: ['user', 'email'], default: 'user' },
        ),
        password: string(
          'The password, written as one environment reference and nothing else (`${APP_BASIC_PASSWORD}`): a password written in the file is refused. No control characters. Masked by `check`.',
          { minLength: 1 },
        ),
        passwordFile: string(
          'The path of a file holding the password (a Kubernetes Secret mounted as a file), read at start and at each reload; one trailing line break is dropped. Warned about when readable by group or others.',
          { minLength: 1 },
        ),
      },
      { minProperties: 1 },
    ),
    tokenExchange,
    resourceMetadata,
    tokenAudience: {
      type: 'string',
      enum: ['provider', 'resource'],
      description:
        "Whose audience a Bearer token must name to sign in here. `provider` (unset): one of the provider's `audiences` (by default its client id), and a session cookie signs in too. `resource`: the audience (`aud`, or an introspected token's `aud`) must be exactly this upstream's resource identifier (RFC 8707; a list of that one value; scheme and host compared without case), the `resource` of its [protected resource metadata](#protected-resource-metadata): the public origin (with `match.hosts`, the scheme of `server.publicUrl` and the host the client asked) followed by `match.pathPrefix`; a token for any other audience is refused with 401 `invalid_token`, and such a token is accepted nowhere else (a provider whose `audiences` names the resource is refused). No session cookie signs in there (a page load gets the 401, not a sign-in redirect): what an [MCP server](features/mcp.md) needs. Refused with `auth: none` and with `resourceMetadata: false`.",
    },
    allowPreflight: boolean(
      "Let CORS preflight requests through without sign-in: `OPTIONS` with a non-empty `Origin` and `Access-Control-Request-Method` (the Fetch standard's CORS-preflight request); any other `OPTIONS` is decided like any request. Decided after `publicPaths` and before `rules`; `publicPaths` and `rules` entries naming `methods` see a preflight as `OPTIONS`.",
      false,
    ),
    passHostHeader: boolean(
      "Send the application, as `Host`, the host it receives in `X-Forwarded-Host`: a host the gateway serves (the request's when it is `server.publicUrl`'s, a `match.hosts` entry or a `redirects.allowedHosts` entry, else `server.publicUrl`'s), never one a client made up; on HTTP requests and WebSocket upgrades. `false`: the host of `target`. The TLS server name and certificate check of an `https` target stay the target's host either way. [What the application receives](proxying.md#what-the-application-receives).",
      true,
    ),
    websocket: boolean(
      'Proxy WebSocket upgrades (checked like any request, and `Origin` must be the public origin or an allowed host over https); without it upgrades are refused with 400.',
      false,
    ),
    timeoutMs: integer('Time the upstream has to answer, in milliseconds (504 after).', 1, MAX_TIMER_MS, 30000),
    connectTimeoutMs: integer(
      'Time a connection to the upstream may take to open, in milliseconds; after it the upstream is unreachable: 502 `upstream_unavailable` (a firewall that drops packets would otherwise hold the request for the whole `timeoutMs`).',
      1,
      MAX_TIMER_MS,
      5000,
    ),
    identityHeaders,
    claimHeaders: {
      type: 'object',
      description:
        "[Claim mapping](features/claim-mapping.md): extra identity headers, each a header name and the claim path of its value (`X-User-Name: name`, `X-Roles: realm_access.roles`). Strings as they are, numbers and booleans as text, a list comma-joined (its elements that are strings, numbers or booleans without a `,`), an object or anything unsafe in a header never: the header is then left out. Names are checked like `identityHeaders` (not a managed header, not the same as another identity header of this upstream or the assertion header), and every upstream, forward-auth answer and Envoy check removes a client's own copy. In the [signed identity assertion](#signed-identity-for-upstreams) as `headers`.",
      minProperties: 1,
      // Each name is checked as an `identity-header` by config/cross-key/upstreams.ts, which names it.
      propertyNames: { minLength: 1 },
      additionalProperties: string('claim path', { format: 'claim-path' }),
    },
    identityAssertion: boolean(
      "Add a [signed identity assertion](#signed-identity-for-upstreams): a short-lived JWT of the identity (`iss`: `server.publicUrl`, `aud`: this upstream's name, `sub`, `email`, `groups`, and `acr`, `amr`, `auth_time` when present), signed with `assertions.signingKeys` (required then), in the `assertions.header` header; verify it against `/.well-known/jwks.json`. With a [claim mapping](features/claim-mapping.md) also `user`, the mapped `groups`, and `headers` (the extra identity headers).",
      false,
    ),
    transactionTokens,
    providers: list(
      "Names of the providers that may sign in to this upstream ([Several providers](#several-providers)); the first is its default, the one the redirect endpoint uses unless asked for another (`provider=<name>`). Unset: the first configured provider alone; `['*']`: every provider, in configuration order, the first being the default. A session or Bearer token of another provider is not signed in here.",
      string('provider name', { pattern: PROVIDER_REF }),
      { minItems: 1, uniqueItems: true },
    ),
  },
  { required: ['name', 'target'] },
)

const assertions = object(
  '[Signed identity assertions](#signed-identity-for-upstreams) for upstreams with `identityAssertion: true`; its `signingKeys` also sign the [Transaction Tokens](features/transaction-tokens.md) of upstreams with `transactionTokens`.',
  {
    signingKeys: list(
      'Private keys, PEM or JWK text or file paths; the first signs, all are published at `/.well-known/jwks.json` (rotation: prepend the new key, remove the old one once no assertion signed with it is alive). EC P-256 signs ES256, RSA PS256, Ed25519 Ed25519. Inline keys are masked by `check`.',
      string('key', { format: 'private-key' }),
      { minItems: 1 },
    ),
    header: string("Header carrying the assertion; a client's own is always removed.", { format: 'identity-header', default: 'X-Identity-Assertion' }),
    ttlSeconds: integer('Lifetime of an assertion, in seconds; it is reused for half of it.', 10, 3600, 60),
  },
  { default: {} },
)

const websocket = object(
  'Proxied WebSockets (`upstreams[].websocket: true`).',
  {
    maxLifetimeSeconds: integer(
      'Longest a proxied WebSocket stays open, in seconds; it is closed (1008) sooner when its session ends (`session.maxAgeSeconds` after sign-in, logout, back-channel logout) or its Bearer token expires, and when a reload refuses it access.',
      60,
      Math.floor(MAX_TIMER_MS / 1000),
      86400,
    ),
  },
  { default: {} },
)

/** `envoy.pathPrefix` when neither it nor its former name is given (config/normalize.ts). */
export const DEFAULT_ENVOY_PATH_PREFIX = `${SIGN_IN_PATH}/ext-authz`

const forwardAuth = object(
  'The [check endpoints](#forward-auth-ingress-nginx-traefik-envoy) that gateways and ingresses call to decide a request they serve themselves: ext_authz (Envoy, Istio, Gateway API), ingress-nginx and Traefik.',
  {
    extAuthzPath: string(
      'Deprecated: the former name of `envoy.pathPrefix`, read as it is, with a warning at load that names `envoy.pathPrefix`. Given with `envoy.pathPrefix` (even with the same value), the file is refused.',
      { pattern: EXT_AUTHZ_PATH.pattern },
    ),
    cache: object(
      "A short-lived [cache](#decision-cache) of the check endpoints' answers (ext_authz HTTP and gRPC, ingress-nginx, Traefik), keyed by a digest of the credentials and the request checked. Back-channel logout, logout and reload empty it.",
      {
        enabled: boolean('Cache decisions. Off: every check is decided afresh.', false),
        ttlSeconds: integer('How long a cached decision is reused, in seconds; a session ended elsewhere (another replica) may pass for this long.', 1, 60, 5),
        maxEntries: integer('Most decisions kept; the oldest is dropped first.', 1, 1000000, 10000),
      },
      { default: {} },
    ),
  },
  { default: {} },
)

// Envoy's HttpService names the prefix of its check requests `path_prefix` ("Sets a prefix to the
// value of authorization request header Path", envoyproxy/envoy
// api/envoy/extensions/filters/http/ext_authz/v3/ext_authz.proto): the key says the same. No
// `default` here: normalize.ts applies DEFAULT_ENVOY_PATH_PREFIX, so that a file giving the key
// and its former name at once can be told from one giving the former name alone.
const envoy = object(
  'The [Envoy ext_authz](#envoy-ext_authz-http-and-grpc) HTTP check (the gRPC service is `server.extAuthzGrpcPort`).',
  {
    pathPrefix: string(
      `Path prefix of the Envoy ext_authz HTTP check, what Envoy's \`http_service.path_prefix\` names: Envoy appends the client's path and query to it. Must be below \`${SIGN_IN_PATH}/\` (the gateway's own paths, never proxied) and not under one of its endpoints. Unset: \`${DEFAULT_ENVOY_PATH_PREFIX}\` (or the deprecated \`forwardAuth.extAuthzPath\`, its former name).`,
      { pattern: EXT_AUTHZ_PATH.pattern },
    ),
  },
  { default: {} },
)

/** `log.redactQueryParams`' default: what the name of a credential contains. */
export const DEFAULT_REDACTED_QUERY_PARAMS: readonly string[] = [
  'password',
  'passwd',
  'secret',
  'token',
  'api_key',
  'apikey',
  'key',
  'jwt',
  'session',
  'auth',
  'code',
  'state',
]

const log = object(
  'Logging.',
  {
    level: string('Log level.', {
      enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
      default: 'info',
    }),
    redactQueryParams: list(
      "Query parameters whose values never reach a log line (the request line's `url`, and every logged URL): a parameter is redacted when its name contains one of these, ASCII case-insensitive (`password` covers `user_password` and `Password`; `key` covers `X-Api-Key` and `apikey`); its value becomes `[redacted]`, its name and the other parameters stay. The list replaces the default (so it can also narrow it, e.g. without `code` when `postcode` must stay readable); the gateway's own sign-in parameters (`code`, `state`, `id_token_hint`, `access_token`, `refresh_token`, `token`, `logout_token`, `client_secret`, `nonce`, `session_state`, `id_token`) are redacted whatever it says. Entries: letters, digits, `_`, `-` and `.`.",
      string('part of a parameter name', { pattern: QUERY_PARAM_PART.pattern }),
      { default: [...DEFAULT_REDACTED_QUERY_PARAMS], uniqueItems: true },
    ),
  },
  { default: {} },
)

const telemetry = object(
  'OpenTelemetry. Off unless `telemetry.tracing` is set.',
  {
    tracing: object(
      'Traces over OTLP/HTTP (JSON): a server span per request, spans for the access decision, the upstream call, every provider call and Redis command; W3C Trace Context (`traceparent`) passed to the upstream, `trace_id` and `span_id` in the request line. Absent: nothing is traced and no tracing code is loaded.',
      {
        endpoint: string("The collector's OTLP/HTTP traces URL, path included (an OpenTelemetry Collector or Jaeger: `http://collector:4318/v1/traces`).", {
          format: 'http-url',
        }),
        sampleRatio: {
          type: 'number',
          description:
            'Share of the traces the gateway starts that are recorded and sent, 0 to 1 (parent-based ratio sampling, by trace id). A request whose `traceparent` is trusted (`trustIncoming`) follows its sampled flag instead. `0` records nothing the gateway starts but still passes a `traceparent` upstream and logs its trace id.',
          minimum: 0,
          maximum: 1,
          default: 1,
        },
        serviceName: string('`service.name` of the spans.', { minLength: 1, default: 'openid-gateway' }),
        trustIncoming: string(
          "Whose `traceparent` and `tracestate` the gateway continues: `trustedProxies` (default), only a peer in `server.trustedProxies` (with none, nobody); `always`, any client; `never`. An untrusted request's trace context is ignored and replaced upstream by the gateway's own: a client cannot join its requests to another trace or force sampling on.",
          { enum: ['trustedProxies', 'always', 'never'], default: 'trustedProxies' },
        ),
        batchDelayMs: integer('How long a finished span waits to be sent with others, in milliseconds; a clean stop sends what is left.', 10, 60000, 5000),
      },
      { required: ['endpoint'] },
    ),
  },
  { default: {} },
)

export const gatewaySchema: JsonSchema = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  title: 'openid-gateway configuration',
  ...object(
    'Configuration of openid-gateway. Strings may use ${VAR} and ${VAR:-default} (environment); $${ is a literal ${.',
    {
      server,
      provider,
      providers,
      cookies,
      session,
      redirects,
      rateLimit,
      upstreams: list('Applications behind the gateway.', upstream, { minItems: 1 }),
      assertions,
      websocket,
      forwardAuth,
      envoy,
      log,
      telemetry,
    },
    // provider or providers: config/cross-key-rules.ts requires exactly one of them, naming both keys.
    { required: ['server', 'cookies', 'upstreams'] },
  ),
}

/** The text of config/gateway.schema.json. */
export function schemaJson(): string {
  return `${JSON.stringify(gatewaySchema, null, 2)}\n`
}
