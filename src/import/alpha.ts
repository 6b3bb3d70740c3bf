// oauth2-proxy's alpha configuration (`--alpha-config`, YAML; AlphaOptions in
// oauth2-proxy/oauth2-proxy docs/docs/configuration/alpha_config.md): upstreamConfig, injectRequestHeaders,
// injectResponseHeaders, server, metricsServer and providers. Each setting that has a legacy
// option is read as that option (a provider's clientID is `client-id`), so mappings.ts has one row
// for both; the alpha-only ones are `alpha-…` options. oauth2-proxy reads the file strictly
// (pkg/apis/options/load.go: unknown fields are an error), and so does this parser.

import { parse, YAMLParseError } from 'yaml'
import { ImportError, type AlphaHeader, type AlphaHeaderValue, type AlphaUpstream, type OptionMap } from './options.js'
import { putOption } from './values.js'

type Node = Record<string, unknown>

function isNode(value: unknown): value is Node {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** The fields of `node` at `where`, refusing one not in `known`. */
function fields(node: unknown, where: string, known: readonly string[]): Node {
  if (!isNode(node)) throw new ImportError(`${where}: expects a mapping`)
  for (const key of Object.keys(node)) if (!known.includes(key)) throw new ImportError(`${where}.${key}: unknown field: oauth2-proxy v7.15 has no such setting`)
  return node
}

function list(node: unknown, where: string): unknown[] {
  if (!Array.isArray(node)) throw new ImportError(`${where}: expects a list`)
  return node
}

function optionalString(node: Node, key: string, where: string): string | undefined {
  const value = node[key]
  if (value === undefined || value === null) return undefined
  if (typeof value !== 'string') throw new ImportError(`${where}.${key}: expects a string`)
  return value
}

function optionalBool(node: Node, key: string, where: string): boolean | undefined {
  const value = node[key]
  if (value === undefined || value === null) return undefined
  if (typeof value !== 'boolean') throw new ImportError(`${where}.${key}: expects true or false`)
  return value
}

const UPSTREAM_FIELDS = [
  'id',
  'path',
  'rewriteTarget',
  'uri',
  'insecureSkipTLSVerify',
  'static',
  'staticCode',
  'flushInterval',
  'passHostHeader',
  'proxyWebSockets',
  'timeout',
  'disableKeepAlives',
]

function upstream(node: unknown, where: string): AlphaUpstream {
  const u = fields(node, where, UPSTREAM_FIELDS)
  const id = optionalString(u, 'id', where)
  const path = optionalString(u, 'path', where)
  if (id === undefined || path === undefined) throw new ImportError(`${where}: an upstream needs an id and a path`)
  const out: { -readonly [K in keyof AlphaUpstream]: AlphaUpstream[K] } = { id, path, from: where }
  for (const key of ['uri', 'rewriteTarget', 'flushInterval'] as const) {
    const value = optionalString(u, key, where)
    if (value !== undefined) out[key] = value
  }
  // A duration is a string (`30s`); YAML may hand a bare number of nanoseconds, as Go reads it.
  const timeout = u.timeout
  if (typeof timeout === 'string') out.timeout = timeout
  else if (typeof timeout === 'number') out.timeout = `${timeout}ns`
  for (const key of ['static', 'passHostHeader', 'proxyWebSockets', 'insecureSkipTLSVerify', 'disableKeepAlives'] as const) {
    const value = optionalBool(u, key, where)
    if (value !== undefined) out[key] = value
  }
  return out
}

const SECRET_FIELDS = ['value', 'fromEnv', 'fromFile']

function header(node: unknown, where: string): AlphaHeader {
  const h = fields(node, where, ['name', 'preserveRequestValue', 'InsecureSkipHeaderNormalization', 'values'])
  const name = optionalString(h, 'name', where)
  if (name === undefined) throw new ImportError(`${where}: a header needs a name`)
  const values = list(h.values ?? [], `${where}.values`).map((v, i): AlphaHeaderValue => {
    const at = `${where}.values[${i}]`
    // pkg/apis/options/header.go: a value is a `claimSource` (claim, prefix, basicAuthPassword) or a
    // `secretSource` (value, fromEnv, fromFile), each a mapping of its own.
    const either = fields(v, at, ['claimSource', 'secretSource'])
    const value = either.claimSource === undefined ? {} : fields(either.claimSource, `${at}.claimSource`, ['claim', 'prefix', 'basicAuthPassword'])
    const secretSource = either.secretSource === undefined ? undefined : fields(either.secretSource, `${at}.secretSource`, SECRET_FIELDS)
    const claim = optionalString(value, 'claim', at)
    const prefix = optionalString(value, 'prefix', at)
    // A secret's text never leaves the parser: only that there was one.
    const secret = secretSource === undefined ? undefined : SECRET_FIELDS.find((k) => secretSource[k] !== undefined)
    return {
      ...(claim === undefined ? {} : { claim }),
      ...(prefix === undefined ? {} : { prefix }),
      ...(secret === undefined ? {} : { secret }),
      ...(value.basicAuthPassword === undefined ? {} : { basicAuthPassword: true }),
    }
  })
  const preserve = optionalBool(h, 'preserveRequestValue', where)
  return { name, values, from: where, ...(preserve === undefined ? {} : { preserveRequestValue: preserve }) }
}

/** Provider fields that are legacy options (flag names), and the nested configurations' fields likewise. */
const PROVIDER_FIELDS: Readonly<Record<string, string>> = {
  provider: 'provider',
  clientID: 'client-id',
  clientSecret: 'client-secret',
  clientSecretFile: 'client-secret-file',
  scope: 'scope',
  allowedGroups: 'allowed-group',
  code_challenge_method: 'code-challenge-method',
  name: 'provider-display-name',
  caFiles: 'provider-ca-file',
  useSystemTrustStore: 'use-system-trust-store',
  loginURL: 'login-url',
  redeemURL: 'redeem-url',
  profileURL: 'profile-url',
  validateURL: 'validate-url',
  resource: 'resource',
  skipClaimsFromProfileURL: 'skip-claims-from-profile-url',
  authRequestResponseMode: 'auth-request-response-mode',
  backendLogoutURL: 'backend-logout-url',
  additionalClaims: 'alpha-additional-claims',
  loginURLParameters: 'alpha-login-url-parameters',
}

const NESTED_FIELDS: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  oidcConfig: {
    issuerURL: 'oidc-issuer-url',
    insecureAllowUnverifiedEmail: 'insecure-oidc-allow-unverified-email',
    insecureSkipIssuerVerification: 'insecure-oidc-skip-issuer-verification',
    insecureSkipNonce: 'insecure-oidc-skip-nonce',
    skipDiscovery: 'skip-oidc-discovery',
    jwksURL: 'oidc-jwks-url',
    publicKeyFiles: 'oidc-public-key-file',
    emailClaim: 'oidc-email-claim',
    groupsClaim: 'oidc-groups-claim',
    userIDClaim: 'user-id-claim',
    audienceClaims: 'oidc-audience-claim',
    extraAudiences: 'oidc-extra-audience',
    enabledSigningAlgs: 'oidc-enabled-signing-alg',
  },
  keycloakConfig: { groups: 'keycloak-group', roles: 'allowed-role' },
  azureConfig: { tenant: 'azure-tenant', graphGroupField: 'azure-graph-group-field' },
  microsoftEntraIDConfig: { allowedTenants: 'entra-id-allowed-tenant', federatedTokenAuth: 'entra-id-federated-token-auth' },
  ADFSConfig: { skipScope: 'scope' },
  bitbucketConfig: { team: 'bitbucket-team', repository: 'bitbucket-repository' },
  githubConfig: { org: 'github-org', team: 'github-team', repo: 'github-repo', token: 'github-token', users: 'github-user' },
  gitlabConfig: { group: 'gitlab-group', projects: 'gitlab-project' },
  googleConfig: {
    group: 'google-group',
    adminEmail: 'google-admin-email',
    serviceAccountJson: 'google-service-account-json',
    useApplicationDefaultCredentials: 'google-use-application-default-credentials',
    targetPrincipal: 'google-target-principal',
    useOrganizationID: 'google-use-organization-id',
    adminAPIUserScope: 'google-admin-api-user-scope',
  },
  loginGovConfig: { jwtKey: 'jwt-key', jwtKeyFile: 'jwt-key-file', pubjwkURL: 'pubjwk-url' },
}

function provider(map: OptionMap, node: unknown, where: string): void {
  const p = fields(node, where, ['id', ...Object.keys(PROVIDER_FIELDS), ...Object.keys(NESTED_FIELDS)])
  for (const [key, value] of Object.entries(p)) {
    if (key === 'id' || value === null) continue
    const flag = PROVIDER_FIELDS[key]
    if (flag !== undefined) {
      putOption(map, flag, flag === 'alpha-login-url-parameters' ? list(value, `${where}.${key}`).map((v) => JSON.stringify(v)) : value, `${where}.${key}`)
      continue
    }
    const nested = NESTED_FIELDS[key] ?? {}
    const inner = fields(value, `${where}.${key}`, Object.keys(nested))
    for (const [field, innerValue] of Object.entries(inner)) {
      const innerFlag = nested[field]
      if (innerFlag === undefined || innerValue === null) continue
      // ADFS's skipScope is a boolean of its own: not the scope.
      if (key === 'ADFSConfig') continue
      putOption(map, innerFlag, innerValue, `${where}.${key}.${field}`)
    }
  }
}

function server(map: OptionMap, node: unknown, where: string, plain: string, secure: string): void {
  const s = fields(node, where, ['bindAddress', 'secureBindAddress', 'tls'])
  const bind = s.bindAddress
  const secureBind = s.secureBindAddress
  if (typeof bind === 'string' && bind !== '') putOption(map, plain, bind, `${where}.bindAddress`)
  if (typeof secureBind === 'string' && secureBind !== '') putOption(map, secure, secureBind, `${where}.secureBindAddress`)
  if (s.tls !== undefined) putOption(map, 'alpha-server-tls', 'set', `${where}.tls`)
}

/** The options of an alpha configuration `text` read from `file`. */
export function parseAlpha(text: string, file: string): OptionMap {
  let doc: unknown
  try {
    doc = parse(text)
  } catch (err) {
    if (err instanceof YAMLParseError) throw new ImportError(`${file}:${err.linePos?.[0].line ?? 0}: not YAML: ${err.message.split('\n')[0] ?? ''}`)
    throw err
  }
  const root = fields(doc ?? {}, file, ['upstreamConfig', 'injectRequestHeaders', 'injectResponseHeaders', 'server', 'metricsServer', 'providers'])
  const map: OptionMap = new Map()
  if (root.upstreamConfig !== undefined) {
    const at = `${file} upstreamConfig`
    const config = fields(root.upstreamConfig, at, ['proxyRawPath', 'upstreams'])
    if (optionalBool(config, 'proxyRawPath', at) === true) putOption(map, 'alpha-proxy-raw-path', true, `${at}.proxyRawPath`)
    const upstreams = list(config.upstreams ?? [], `${at}.upstreams`).map((u, i) => upstream(u, `${at}.upstreams[${i}]`))
    map.set('alpha-upstreams', { name: 'alpha-upstreams', value: upstreams, from: `${at}.upstreams` })
  }
  for (const [key, flag] of [
    ['injectRequestHeaders', 'alpha-inject-request-headers'],
    ['injectResponseHeaders', 'alpha-inject-response-headers'],
  ] as const) {
    if (root[key] === undefined) continue
    const at = `${file} ${key}`
    map.set(flag, { name: flag, value: list(root[key], at).map((h, i) => header(h, `${at}[${i}]`)), from: at })
  }
  if (root.server !== undefined) server(map, root.server, `${file} server`, 'http-address', 'https-address')
  if (root.metricsServer !== undefined) server(map, root.metricsServer, `${file} metricsServer`, 'metrics-address', 'metrics-secure-address')
  if (root.providers !== undefined) {
    const providers = list(root.providers, `${file} providers`)
    // The alpha configuration's reference: "Multiple-providers is not yet working"; oauth2-proxy's validation refuses more than one.
    if (providers.length > 1) throw new ImportError(`${file} providers: oauth2-proxy v7.15 runs one provider, this file lists ${providers.length}`)
    if (providers[0] !== undefined) provider(map, providers[0], `${file} providers[0]`)
  }
  return map
}
