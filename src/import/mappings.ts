// The one table of the converter: every option oauth2-proxy v7.15 reads (the `flag:` and `cfg:`
// tags of pkg/apis/options in oauth2-proxy/oauth2-proxy, and the alpha configuration's settings of
// oauth2-proxy/oauth2-proxy docs/docs/configuration/alpha_config.md, normalised by alpha.ts), each with the gateway key it
// becomes or the reason it cannot be carried. A row carries an option by writing into the draft,
// and returns a reason for a value it cannot carry; `cannot(reason)` is a row that never carries.
// Carrying an option later (a new key of the gateway) is a change of its row alone.

import { patternCoversPrefix } from '../access/ambiguity.js'
import { endsWithAnchor, hasTopLevelAlternation, regexProblem } from '../access/request-match.js'
import { CALLBACK_PATH, FORWARD_AUTH_PATH, SIGN_IN_PATH } from '../contract/endpoints.js'
import { Draft, type JsonObject } from './draft.js'
import { isStringList, type AlphaHeader, type AlphaUpstream, type OptionKind, type OptionMap, type OptionValue } from './options.js'

/** A row's verdict: undefined when carried, else why it cannot be (one stderr line). */
type Carry = (value: OptionValue, draft: Draft, options: OptionMap) => string | undefined

export interface Mapping {
  /** The flag name (`--cookie-secret`); alpha-only settings are named `alpha-…`. */
  readonly flag: string
  /** Its names in oauth2-proxy.cfg (also OAUTH2_PROXY_<NAME> in the environment). */
  readonly cfg: readonly string[]
  readonly kind: OptionKind
  readonly carry: Carry
}

// --- the variables secrets become (named in the output's header and on stderr) ---------------

export const CLIENT_SECRET_VAR = 'OIDC_CLIENT_SECRET'
export const COOKIE_SECRET_VAR = 'COOKIE_SECRET'
export const REDIS_PASSWORD_VAR = 'REDIS_PASSWORD'
export const BASIC_AUTH_PASSWORD_VAR = 'BASIC_AUTH_PASSWORD'

// --- reasons shared by several rows ---------------------------------------------------------

const NO_SIGN_IN_PAGE = 'the gateway has no sign-in page: a sign-in goes straight to the provider'
const DISCOVERY_ONLY = "the gateway reads the provider's endpoints and keys from its discovery document only"
const LOGGING = 'the gateway logs one JSON line per request (pino), set with log.level'
const NO_TLS_LISTENER = 'the gateway serves plain HTTP: terminate TLS in front of it'
const NEVER_INSECURE = 'the gateway never skips TLS verification: trust a private CA with NODE_EXTRA_CA_CERTS'
/** A provider-specific option given with another provider: oauth2-proxy reads it with its own provider only. */
const GITHUB = 'read by oauth2-proxy with provider = "github" only'
const GROUP_SOURCE =
  "the gateway reads Google groups with a service account's JSON key and domain-wide delegation only (provider.claimSources.googleGroups: serviceAccountKeyFile or serviceAccountKeyEnv)"
const PLAIN_OAUTH = 'not an OpenID provider: the gateway speaks OpenID Connect only (and GitHub, with provider.github)'
const LEGACY_CREDENTIALS =
  'write it by hand as upstreams[].forwardBasicAuth (HTTP Basic), forwardIdToken (the ID token as Bearer) or forwardAccessTokenHeader (X-Forwarded-Access-Token)'
const REGEX_RULES = 'the gateway matches public paths with anchored regular expressions (upstreams[].publicPaths) it can run in linear time'
const SEVERAL_DOMAINS = 'the gateway hands a sign-in to the other cookies.domains through cross-site redirects'
const TEMPLATES = 'the gateway has its own pages (no templates, banner, footer or logo)'
const HTPASSWD = 'the gateway signs in through the provider only (no htpasswd users)'

// --- value readers ----------------------------------------------------------------------------

export function text(value: OptionValue): string {
  if (typeof value === 'string') return value
  if (typeof value === 'boolean' || typeof value === 'number') return String(value)
  return isStringList(value) ? value.join(',') : ''
}

function strings(value: OptionValue): string[] {
  if (isStringList(value))
    return value
      .flatMap((v) => v.split(','))
      .map((v) => v.trim())
      .filter((v) => v !== '')
  return text(value)
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v !== '')
}

function flag(value: OptionValue): boolean {
  if (typeof value === 'boolean') return value
  return /^(1|t|true|yes)$/i.test(text(value))
}

const DURATION_UNITS: Readonly<Record<string, number>> = { ns: 1e-9, us: 1e-6, µs: 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 }

/** A Go duration (`168h`, `1h30m`, `500ms`) in seconds, or undefined when it is not one. */
export function durationSeconds(value: OptionValue): number | undefined {
  if (typeof value === 'number') return value / 1e9
  const source = text(value).trim()
  if (source === '0') return 0
  const parts = [...source.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)]
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== source) return undefined
  return parts.reduce((sum, p) => sum + Number(p[1]) * (DURATION_UNITS[p[2] ?? 's'] ?? 1), 0)
}

// --- row builders ---------------------------------------------------------------------------------

function row(flagName: string, kind: OptionKind, carry: Carry, cfg?: string | readonly string[]): Mapping {
  return { flag: flagName, kind, carry, cfg: cfg === undefined ? [flagName.replaceAll('-', '_')] : typeof cfg === 'string' ? [cfg] : cfg }
}

/** An option the gateway has no place for. */
function cannot(flagName: string, kind: OptionKind, reason: string, cfg?: string | readonly string[]): Mapping {
  return row(flagName, kind, () => reason, cfg)
}

/** An option whose value `fits` is what the gateway always does: carried as nothing; another value is `reason`. */
function always(flagName: string, kind: OptionKind, fits: (value: OptionValue) => boolean, reason: string, cfg?: string | readonly string[]): Mapping {
  return row(flagName, kind, (value) => (fits(value) ? undefined : reason), cfg)
}

const isTrue = (value: OptionValue): boolean => flag(value)
const isFalse = (value: OptionValue): boolean => !flag(value)

// --- the rows with a place in the gateway's configuration -----------------------------------------

/** Provider types that are OpenID providers, and the issuer each has without `--oidc-issuer-url`. */
const OIDC_PROVIDERS: Readonly<Record<string, string | undefined>> = {
  oidc: undefined,
  'keycloak-oidc': undefined,
  'entra-id': undefined,
  azure: undefined,
  adfs: undefined,
  google: 'https://accounts.google.com',
  gitlab: 'https://gitlab.com',
}

/** oauth2-proxy's provider type (`google` when none is named, as in pkg/apis/options/legacy_options.go). */
function providerType(options: OptionMap): string {
  const given = options.get('provider')
  return given === undefined ? 'google' : text(given.value).toLowerCase()
}

function carryProvider(value: OptionValue, draft: Draft, options: OptionMap): string | undefined {
  const type = text(value).toLowerCase()
  if (type === 'github') {
    // The gateway's GitHub provider (docs/providers/github.md); its issuer is GitHub's, or a
    // GitHub Enterprise Server's read from login_url/redeem_url/validate_url by their rows. The
    // user header is the login, as oauth2-proxy's GitHub provider sets it (not the numeric id).
    draft.provider.issuer = 'https://github.com'
    draft.provider.userClaim = 'preferred_username'
    draft.provider.github = {}
    return undefined
  }
  if (!(type in OIDC_PROVIDERS)) return `provider ${type}: ${PLAIN_OAUTH}`
  const known = OIDC_PROVIDERS[type]
  if (options.get('oidc-issuer-url') === undefined && known !== undefined) draft.provider.issuer = known
  return undefined
}

// --- GitHub (oauth2-proxy's providers/github.go, v7.15) -------------------------------------------
//
// oauth2-proxy admits a user listed in github_users outright; otherwise, with github_org, a member
// of the organization, or with github_team too, of one of those teams of it (slugs, compared
// without case); only without github_org does github_repo count (push access, or pull on a
// private repository, asked with the user's token; with github_token, GitHub's collaborator check
// asked with that owner's token). The gateway's provider.github admits on any entry of any list.

/** The `provider.github` block (created by the provider row). */
function github(draft: Draft): JsonObject {
  const block = draft.provider.github
  if (typeof block === 'object' && block !== null && !Array.isArray(block)) return block
  const created: JsonObject = {}
  draft.provider.github = created
  return created
}

function carryGithubOrg(value: OptionValue, draft: Draft, options: OptionMap): string | undefined {
  if (providerType(options) !== 'github') return GITHUB
  // With github_team, the org only scopes the teams (their row writes org/team).
  if (!options.has('github-team')) github(draft).organizations = [text(value).trim()]
  return undefined
}

function carryGithubTeam(value: OptionValue, draft: Draft, options: OptionMap): string | undefined {
  if (providerType(options) !== 'github') return GITHUB
  const org = options.get('github-org')
  if (org === undefined || text(org.value).trim() === '')
    return 'oauth2-proxy reads github_team only with github_org (team slugs of that organization), which is not set'
  // oauth2-proxy's teams are slugs within github_org; the gateway's are org/team-slug.
  github(draft).teams = strings(value).map((slug) => `${text(org.value).trim()}/${slug}`)
  return undefined
}

function carryGithubRepo(value: OptionValue, draft: Draft, options: OptionMap): string | undefined {
  if (providerType(options) !== 'github') return GITHUB
  if (options.has('github-org')) {
    return "oauth2-proxy ignores github_repo when github_org is set (the organization alone decides); carrying it would also admit the repository's users"
  }
  github(draft).repositories = [text(value).trim()]
  return undefined
}

function carryGithubToken(_value: OptionValue, _draft: Draft, options: OptionMap): string | undefined {
  if (providerType(options) !== 'github') return GITHUB
  // oauth2-proxy asks with it only for github_repo without github_org.
  if (!options.has('github-repo') || options.has('github-org')) return undefined
  return "the gateway has no owner's token: github.repositories asks GitHub with the user's own token (push access, or read access to a private repository), where oauth2-proxy's collaborator check also admits a read-only collaborator of a public repository"
}

function carryGithubUsers(value: OptionValue, draft: Draft, options: OptionMap): string | undefined {
  if (providerType(options) !== 'github') return GITHUB
  github(draft).users = strings(value)
  return undefined
}

/** A row of an OpenID Connect key: with provider github, oauth2-proxy does not read it, and check refuses it on provider.github. */
function oidcOnly(carry: Carry): Carry {
  return (value, draft, options) =>
    providerType(options) === 'github'
      ? "not read by oauth2-proxy's GitHub provider, and OpenID Connect's: GitHub issues no ID token"
      : carry(value, draft, options)
}

const GITHUB_ENDPOINTS = ['login-url', 'redeem-url', 'validate-url'] as const

/**
 * The issuer a GitHub endpoint of oauth2-proxy implies: the gateway's GitHub provider signs in at
 * `<issuer>/login/oauth/authorize` and `<issuer>/login/oauth/access_token` and reads the REST API
 * at `<issuer>/api/v3` (https://api.github.com for https://github.com), as GitHub Enterprise
 * Server serves them.
 */
function githubIssuerOf(endpoint: (typeof GITHUB_ENDPOINTS)[number], raw: string): string | undefined {
  if (!URL.canParse(raw)) return undefined
  const url = new URL(raw)
  if (!/^https?:$/.test(url.protocol) || url.search !== '') return undefined
  const path = url.pathname.replace(/\/+$/, '')
  if (endpoint === 'login-url') return path === '/login/oauth/authorize' ? url.origin : undefined
  if (endpoint === 'redeem-url') return path === '/login/oauth/access_token' ? url.origin : undefined
  if (url.origin === 'https://api.github.com') return path === '' ? 'https://github.com' : undefined
  return path === '/api/v3' ? url.origin : undefined
}

function carryGithubEndpoint(endpoint: (typeof GITHUB_ENDPOINTS)[number]): Carry {
  return (value, draft, options) => {
    if (providerType(options) !== 'github') return DISCOVERY_ONLY
    const issuer = githubIssuerOf(endpoint, text(value))
    if (issuer === undefined) {
      return `the gateway's GitHub provider uses <issuer>/login/oauth/authorize, <issuer>/login/oauth/access_token and <issuer>/api/v3 (https://api.github.com for https://github.com): ${text(value)} is none of them`
    }
    const others = GITHUB_ENDPOINTS.filter((e) => {
      const other = e === endpoint ? undefined : options.get(e)
      const implied = other === undefined ? undefined : githubIssuerOf(e, text(other.value))
      return implied !== undefined && implied !== issuer
    })
    if (others.length > 0) return `names another GitHub server than ${others.map((e) => e.replace('-', '_')).join(' and ')}`
    draft.provider.issuer = issuer
    if (issuer.startsWith('http://')) draft.provider.allowInsecureHttp = true
    return undefined
  }
}

// --- GitLab (oauth2-proxy's providers/gitlab.go) and Google (providers/google.go) groups ----------

/** Adds to upstreams[].allow.groups (oauth2-proxy's allowed groups are one set: any of them admits). */
function addAllowedGroups(draft: Draft, groups: readonly string[]): void {
  const allow = draft.shared.allow
  const had = typeof allow === 'object' && allow !== null && !Array.isArray(allow) && Array.isArray(allow.groups) ? allow.groups : []
  Draft.set(draft.shared, ['allow', 'groups'], [...new Set([...had.filter((g): g is string => typeof g === 'string'), ...groups])])
}

function carryGitlabGroups(value: OptionValue, draft: Draft, options: OptionMap): string | undefined {
  if (providerType(options) !== 'gitlab') return 'read by oauth2-proxy with provider = "gitlab" only'
  // GitLab's UserInfo `groups` (with the groups inherited from parents), as oauth2-proxy reads them.
  Draft.set(draft.provider, ['claimSources', 'userInfo'], true)
  addAllowedGroups(draft, strings(value))
  return undefined
}

function carryGitlabProjects(value: OptionValue, draft: Draft, options: OptionMap): string | undefined {
  if (providerType(options) !== 'gitlab') return 'read by oauth2-proxy with provider = "gitlab" only'
  const specs = strings(value)
  Draft.set(draft.provider, ['claimSources', 'gitlabProjects'], specs)
  addAllowedGroups(
    draft,
    specs.map((spec) => `project:${spec.replace(/=[^=]*$/, '')}`),
  )
  // The projects API needs read_api; oauth2-proxy adds it to its scope, the gateway asks for what it is told.
  const scopes = Array.isArray(draft.provider.scopes) ? draft.provider.scopes.filter((s): s is string => typeof s === 'string') : ['openid', 'profile', 'email']
  if (!scopes.includes('read_api')) draft.provider.scopes = [...scopes, 'read_api']
  return undefined
}

function carryGoogleGroups(value: OptionValue, draft: Draft, options: OptionMap): string | undefined {
  if (providerType(options) !== 'google') return 'read by oauth2-proxy with provider = "google" only'
  // Written even when the groups cannot be read: an allow.groups no session meets admits nobody (never open).
  addAllowedGroups(draft, strings(value))
  if (options.has('google-admin-email') && options.has('google-service-account-json')) return undefined
  return `the groups are read with provider.claimSources.googleGroups, which needs google_admin_email and google_service_account_json: allow.groups is written, and until googleGroups is set it admits nobody`
}

function carryGoogleAdminEmail(_value: OptionValue, _draft: Draft, options: OptionMap): string | undefined {
  if (providerType(options) !== 'google') return 'read by oauth2-proxy with provider = "google" only'
  // Written with the key by the google_service_account_json row.
  return options.has('google-service-account-json') ? undefined : `${GROUP_SOURCE}, which google_service_account_json names and is not set`
}

function carryGoogleServiceAccount(value: OptionValue, draft: Draft, options: OptionMap): string | undefined {
  if (providerType(options) !== 'google') return 'read by oauth2-proxy with provider = "google" only'
  const admin = options.get('google-admin-email')
  if (admin === undefined)
    return 'provider.claimSources.googleGroups needs the administrator the service account acts as (google_admin_email), which is not set'
  const file = text(value)
  Draft.set(draft.provider, ['claimSources', 'googleGroups'], { adminEmail: text(admin.value), serviceAccountKeyFile: file })
  draft.note(
    `provider.claimSources.googleGroups.serviceAccountKeyFile: ${file} must exist, readable by the gateway, where check and the gateway run (check reads the key)`,
  )
  return undefined
}

function carryIssuer(value: OptionValue, draft: Draft): string | undefined {
  const issuer = text(value)
  draft.provider.issuer = issuer
  if (issuer.startsWith('http://')) draft.provider.allowInsecureHttp = true
  return undefined
}

function carryScope(value: OptionValue, draft: Draft, options: OptionMap): string | undefined {
  if (providerType(options) === 'github') {
    // GitHub's OAuth app scopes (oauth2-proxy's default for it is user:email read:org).
    Draft.set(
      draft.provider,
      ['github', 'scopes'],
      [
        ...new Set(
          text(value)
            .split(/\s+/)
            .filter((s) => s !== ''),
        ),
      ],
    )
    return undefined
  }
  const scopes = [
    ...new Set(
      text(value)
        .split(/\s+/)
        .filter((s) => s !== ''),
    ),
  ]
  if (!scopes.includes('openid')) scopes.unshift('openid')
  draft.provider.scopes = scopes
  return undefined
}

/** oauth2-proxy tries a claim name whole, then split at its dots; the gateway's claim path nests at dots and quotes other names. */
function claimPath(claim: string): string {
  return /^[A-Za-z0-9_$:-]+(\.[A-Za-z0-9_$:-]+)*$/.test(claim) ? claim : `[${JSON.stringify(claim)}]`
}

/** `redirect_url`: the public origin, and the callback's path kept (provider.redirectPath) unless it is the gateway's own. */
function carryRedirectUrl(value: OptionValue, draft: Draft): string | undefined {
  const raw = text(value)
  if (!URL.canParse(raw) || !/^https?:$/.test(new URL(raw).protocol)) {
    return 'a relative redirect URL: the gateway needs its absolute public origin (give it with --public-url)'
  }
  const url = new URL(raw)
  draft.server.publicUrl = url.origin
  if (url.pathname !== CALLBACK_PATH) draft.provider.redirectPath = url.pathname
  return undefined
}

function carryEmailDomains(value: OptionValue, draft: Draft): string | undefined {
  const domains = strings(value)
  if (domains.includes('*')) return undefined
  // oauth2-proxy's `*.example.com` is the gateway's `.example.com` (subdomains).
  Draft.set(draft.shared, ['allow', 'emailDomains'], [...new Set(domains.map((d) => d.replace(/^\*\./, '.')))])
  return undefined
}

/** The most cookies.domains the gateway accepts (config/cross-key/cookies.ts). */
const MAX_COOKIE_DOMAINS = 10

/**
 * cookie_domains: one domain is cookies.domain; several are cookies.domains, where each request's
 * cookie gets the longest domain its host is in, as oauth2-proxy picks it (docs/features/several-domains.md).
 * The gateway signs in on server.publicUrl's host and hands the session to a page's host on
 * another domain, which redirectAfter must allow: each domain whitelist_domains does not cover is
 * added to redirects.allowedHosts (oauth2-proxy, reached on each host, needed no entry there).
 */
function carryCookieDomains(value: OptionValue, draft: Draft, options: OptionMap): string | undefined {
  // A cookie's domain has no port (RFC 6265 5.2.3); oauth2-proxy's examples write one.
  const domains = [...new Set(strings(value).map((d) => d.toLowerCase().replace(/^\./, '').replace(/:\d+$/, '')))]
  const [first] = domains
  if (first === undefined) return undefined
  if (domains.length === 1) {
    draft.cookies.domain = first
    return undefined
  }
  const sameSite = options.get('cookie-samesite')
  if (sameSite !== undefined && text(sameSite.value).toLowerCase() === 'strict') {
    draft.cookies.domain = first
    return `${SEVERAL_DOMAINS}, which never carry a SameSite=Strict cookie (${sameSite.from}): ${first} is carried as cookies.domain, ${domains.slice(1).join(', ')} not`
  }
  if (domains.length > MAX_COOKIE_DOMAINS) {
    draft.cookies.domains = domains.slice(0, MAX_COOKIE_DOMAINS)
    return `cookies.domains holds at most ${MAX_COOKIE_DOMAINS} domains: ${domains.slice(MAX_COOKIE_DOMAINS).join(', ')} not carried`
  }
  draft.cookies.domains = domains
  const allowed = Array.isArray(draft.redirects.allowedHosts) ? draft.redirects.allowedHosts.filter((h): h is string => typeof h === 'string') : []
  const covered = (domain: string): boolean => allowed.some((h) => h.startsWith('.') && (domain === h.slice(1) || domain.endsWith(h)))
  const added = domains.filter((d) => !covered(d)).map((d) => `.${d}`)
  if (added.length > 0) draft.redirects.allowedHosts = [...allowed, ...added]
  return undefined
}

function carryCookieSecret(_value: OptionValue, draft: Draft, options: OptionMap): string | undefined {
  const file = options.get('cookie-secret-file')
  const read = options.get('cookie-secret') === undefined && file !== undefined ? ` (oauth2-proxy read its own from ${text(file.value)})` : ''
  draft.cookies.secrets = [
    draft.secret(COOKIE_SECRET_VAR, `a new cookie secret of 32 bytes or more, e.g. from openssl rand -base64 32${read}; sessions do not carry over`),
  ]
  return undefined
}

function carryClientSecret(_value: OptionValue, draft: Draft, options: OptionMap): string | undefined {
  const file = options.get('client-secret-file')
  const what =
    options.get('client-secret') === undefined && file !== undefined ? `the client secret (oauth2-proxy read it from ${text(file.value)})` : 'the client secret'
  draft.provider.clientSecret = draft.secret(CLIENT_SECRET_VAR, what)
  return undefined
}

function carryExpire(value: OptionValue, draft: Draft): string | undefined {
  const seconds = durationSeconds(value)
  if (seconds === undefined) return `not a duration: ${text(value)}`
  const whole = Math.round(seconds)
  if (whole < 60 || whole > 2592000) return `the gateway's session.maxAgeSeconds is 60 to 2592000 seconds (30 days), not ${whole}`
  draft.session.maxAgeSeconds = whole
  return undefined
}

function carryUpstreamTimeout(value: OptionValue, draft: Draft): string | undefined {
  const seconds = durationSeconds(value)
  if (seconds === undefined) return `not a duration: ${text(value)}`
  if (seconds <= 0) return 'the gateway always limits the wait for an upstream (upstreams[].timeoutMs)'
  draft.shared.timeoutMs = Math.round(seconds * 1000)
  return undefined
}

function carryHttpAddress(value: OptionValue, draft: Draft): string | undefined {
  const address = text(value).replace(/^http:\/\//, '')
  if (/^(fd:|unix:)/i.test(address)) return 'the gateway listens on a TCP port only'
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(address)
  if (m === null) return `not a host:port: ${address}`
  const host = m[1] ?? m[2] ?? ''
  draft.server.host = host === '' ? '0.0.0.0' : host
  draft.server.port = Number(m[3])
  return undefined
}

function carryMetricsAddress(value: OptionValue, draft: Draft): string | undefined {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(text(value).replace(/^http:\/\//, ''))
  if (m === null) return `not a host:port: ${text(value)}`
  const host = m[1] ?? m[2] ?? ''
  if (host !== '') draft.server.managementHost = host
  draft.server.managementPort = Number(m[3])
  return undefined
}

function carryWhitelist(value: OptionValue, draft: Draft): string | undefined {
  const hosts: string[] = []
  const lost: string[] = []
  for (const entry of strings(value)) {
    // oauth2-proxy's `*.example.com` and `.example.com` are the gateway's `.example.com`; a `:*` port has no equivalent.
    const host = entry.replace(/^\*\./, '.')
    if (host.endsWith(':*')) lost.push(entry)
    else hosts.push(host)
  }
  if (hosts.length > 0) draft.redirects.allowedHosts = [...new Set(hosts)]
  return lost.length === 0 ? undefined : `redirects.allowedHosts has no port wildcard: ${lost.join(', ')} not carried`
}

function carryTrustedProxies(value: OptionValue, draft: Draft, options: OptionMap): string | undefined {
  const reverse = options.get('reverse-proxy')
  if (reverse === undefined || !flag(reverse.value)) return 'only believed with reverse-proxy: true, which is not set'
  draft.server.trustedProxies = strings(value)
  return undefined
}

function carryReverseProxy(value: OptionValue, _draft: Draft, options: OptionMap): string | undefined {
  if (!flag(value) || options.has('trusted-proxy-ip')) return undefined
  return "it believes X-Forwarded-* from every peer; the gateway believes only server.trustedProxies: list your load balancer's addresses there"
}

/**
 * redis_connection_url: the gateway's session.redisUrl, its password (in the URL, or
 * redis_password) from the environment, written back into the URL (the gateway reads a password
 * there with a URL; URL-encode it).
 */
function carryRedisUrl(value: OptionValue, draft: Draft, options: OptionMap): string | undefined {
  const raw = text(value)
  if (!URL.canParse(raw)) return `not a URL: ${raw}`
  const url = new URL(raw)
  const hasPassword = url.password !== '' || (options.get('redis-password')?.value ?? '') !== ''
  const user = url.username !== '' ? url.username : text(options.get('redis-username')?.value ?? '')
  const where = url.password !== '' ? 'it was in redis_connection_url' : 'redis_password'
  const auth = hasPassword ? `${user}:${draft.secret(REDIS_PASSWORD_VAR, `the Redis password, URL-encoded (${where})`)}@` : user === '' ? '' : `${user}@`
  draft.session.redisUrl = `${url.protocol}//${auth}${url.host}${url.pathname}${url.search}`
  return undefined
}

function carrySessionStore(value: OptionValue, draft: Draft): string | undefined {
  const store = text(value)
  if (store === 'cookie' || store === '') return undefined
  if (store === 'redis') {
    draft.session.store = 'redis'
    return undefined
  }
  return `unknown session store ${store}`
}

/** Upstreams of the legacy form (`--upstream`): the URL's path is where it is routed (oauth2-proxy's LegacyUpstreams.convert); its path is not sent. */
function carryUpstreams(value: OptionValue, draft: Draft, options: OptionMap): string | undefined {
  if (options.has('alpha-upstreams')) return undefined
  const lost: string[] = []
  for (const raw of strings(value)) {
    const url = URL.canParse(raw) ? new URL(raw) : undefined
    if (url?.protocol === 'static:') {
      // oauth2-proxy behind an ingress's auth_request or forward-auth, answering its checks itself.
      addUpstream(draft, '/', STATIC_TARGET, {})
      lost.push(
        `${raw} (a static answer: the gateway answers an ingress's checks at ${FORWARD_AUTH_PATH}, point the ingress there; this upstream's target ${STATIC_TARGET} is then never asked)`,
      )
      continue
    }
    if (url === undefined || !/^https?:$/.test(url.protocol)) {
      lost.push(`${raw} (${url === undefined ? 'not a URL' : 'the gateway proxies to http(s) upstreams only, no file://, static:// or unix:// ones'})`)
      continue
    }
    addUpstream(draft, url.pathname === '' ? '/' : url.pathname, url.origin, {})
  }
  return lost.length === 0 ? undefined : lost.map((l) => `upstream ${l}`).join('; ')
}

/** The target of an upstream that stands for oauth2-proxy's `static://` one: the discard port, never asked by forward-auth. */
const STATIC_TARGET = 'http://127.0.0.1:9'

function addUpstream(draft: Draft, path: string, target: string, own: JsonObject): void {
  const pathPrefix = path.length > 1 ? path.replace(/\/+$/, '') : '/'
  const base = pathPrefix === '/' ? 'app' : `app-${pathPrefix.slice(1).replace(/[^A-Za-z0-9_-]+/g, '-')}`
  let name = base
  for (let i = 2; draft.upstreams.some((u) => u.name === name); i++) name = `${base}-${i}`
  draft.upstreams.push({ name, pathPrefix, target, own })
}

/** Alpha upstreams: each its own path, target and settings. */
function carryAlphaUpstreams(value: OptionValue, draft: Draft): string | undefined {
  const lost: string[] = []
  for (const upstream of value as readonly AlphaUpstream[]) {
    const reason = alphaUpstreamProblem(upstream)
    if (reason !== undefined) {
      lost.push(`${upstream.from}: ${reason}`)
      continue
    }
    const own: JsonObject = {}
    if (upstream.passHostHeader !== undefined) own.passHostHeader = upstream.passHostHeader
    if (upstream.proxyWebSockets !== undefined) own.websocket = upstream.proxyWebSockets
    const timeout = upstream.timeout === undefined ? undefined : durationSeconds(upstream.timeout)
    if (timeout !== undefined && timeout > 0) own.timeoutMs = Math.round(timeout * 1000)
    addUpstream(draft, upstream.path, new URL(upstream.uri ?? '').origin, own)
    for (const [key, set] of [
      ['flushInterval', upstream.flushInterval !== undefined],
      ['insecureSkipTLSVerify', upstream.insecureSkipTLSVerify === true],
      ['disableKeepAlives', upstream.disableKeepAlives === true],
    ] as const) {
      if (set) lost.push(`${upstream.from}.${key}: ${key === 'insecureSkipTLSVerify' ? NEVER_INSECURE : 'the gateway manages its upstream connections itself'}`)
    }
  }
  return lost.length === 0 ? undefined : lost.join('; ')
}

/**
 * oauth2-proxy's regular expression as the gateway's anchored one, matching the same paths: Go's
 * regexp.MatchString searches (oauthproxy.go isAllowedPath), the gateway matches the whole path
 * (access/request-match.ts), so an unanchored start becomes `^.*` and an unanchored end `.*$`, and
 * a `|` outside parentheses is kept inside `(?:...)` first (each branch keeps its own anchors:
 * `^` and `$` match only at the ends of the path in RE2 without the m flag).
 */
export function anchoredRegex(pattern: string): string {
  if (pattern === '') return '^.*$'
  const body = hasTopLevelAlternation(pattern) ? `(?:${pattern})` : pattern
  const start = body.startsWith('^') ? '' : '^.*'
  const end = endsWithAnchor(body) ? '' : '.*$'
  return `${start}${body}${end}`
}

/** A public path for every upstream it can be one of: the same pattern's methods merged, as oauth2-proxy admits any route that matches. */
function addPublicRegex(draft: Draft, from: string, written: string, regex: string, method: string | undefined): void {
  for (const upstream of draft.upstreams) {
    const own = upstream.own as { publicPaths?: JsonObject[] }
    if (method === undefined && upstream.pathPrefix !== '/' && patternCoversPrefix(regex, upstream.pathPrefix)) {
      draft.cannot(
        from,
        `${written}: makes every path of ${upstream.pathPrefix} public, which the gateway writes as auth: none on upstream ${upstream.name}: write it there if meant`,
      )
      continue
    }
    const list = (own.publicPaths ??= [])
    const same = list.find((entry) => entry.regex === regex)
    if (same === undefined) list.push(method === undefined ? { regex } : { regex, methods: [method] })
    else if (method === undefined) delete same.methods
    else if (Array.isArray(same.methods) && !same.methods.includes(method)) same.methods = [...same.methods, method]
  }
}

/**
 * skip_auth_regex (every method) and skip_auth_routes (`METHOD=regex`, `METHOD!=regex` or a
 * regex), parsed as oauth2-proxy's buildRoutesAllowlist does: split at the first `=` or `!=`, the
 * method uppercased. `!=` (every path but the pattern's, for that method) has no place in the
 * gateway, nor has a pattern the gateway refuses even anchored; each is its own line.
 */
function carrySkipAuth(name: string): Carry {
  return (value, draft, options) => {
    const from = options.get(name)?.from ?? name
    const entries = isStringList(value) ? value : [text(value)]
    for (const entry of entries) {
      const split = name === 'skip-auth-route' ? /^(.*?)(!?=)(.*)$/s.exec(entry) : null
      const method = split === null ? undefined : (split[1] ?? '').toUpperCase()
      const pattern = split === null ? entry : (split[3] ?? '')
      if (split?.[2] === '!=') {
        draft.cannot(from, `${entry}: a route for every path but the pattern's (!=) has no place in upstreams[].publicPaths, which lists what is public`)
        continue
      }
      const regex = anchoredRegex(pattern)
      const problem = regexProblem(regex)
      if (problem !== undefined) {
        draft.cannot(from, `${entry}: ${REGEX_RULES}: as ${problem}`)
        continue
      }
      addPublicRegex(draft, from, entry, regex, method === '' ? undefined : method)
    }
    return undefined
  }
}

function alphaUpstreamProblem(upstream: AlphaUpstream): string | undefined {
  if (upstream.static === true) return 'a static response: the gateway only proxies'
  if (upstream.rewriteTarget !== undefined) return 'rewriteTarget: the gateway sends the request path unchanged'
  if (!upstream.path.startsWith('/') || /[\^$()[\]{}|?*+\\]/.test(upstream.path))
    return `the path ${upstream.path} is a pattern: the gateway routes by path prefix`
  const uri = upstream.uri ?? ''
  if (!URL.canParse(uri) || !/^https?:$/.test(new URL(uri).protocol)) return 'the gateway proxies to http(s) upstreams only, no file:// or unix:// ones'
  return undefined
}

/** The identity headers the gateway sends, by the session claim oauth2-proxy names (the alpha configuration's "ClaimSource"). */
const IDENTITY_CLAIMS: Readonly<Record<string, string>> = { user: 'user', email: 'email', groups: 'groups', preferred_username: 'preferredUsername' }

/** Alpha injectRequestHeaders: the identity headers' names, claims as claim headers, the access token as Bearer. */
function carryRequestHeaders(value: OptionValue, draft: Draft): string | undefined {
  const lost: string[] = []
  const named = new Set<string>()
  for (const header of value as readonly AlphaHeader[]) {
    const reason = carryRequestHeader(header, draft, named)
    if (reason !== undefined) lost.push(`${header.from} (${header.name}): ${reason}`)
  }
  return lost.length === 0 ? undefined : lost.join('; ')
}

function carryRequestHeader(header: AlphaHeader, draft: Draft, named: Set<string>): string | undefined {
  if (header.preserveRequestValue === true) return "preserveRequestValue: the gateway always removes a client's own copy"
  const [only, ...more] = header.values
  if (only === undefined || more.length > 0) return 'the gateway sets an identity header from one claim'
  if (only.basicAuthPassword === true) return LEGACY_CREDENTIALS
  if (only.claim === undefined) return 'a value that is not a claim: the gateway sets identity headers only'
  const claim = only.claim
  if (claim === 'access_token') {
    if (header.name.toLowerCase() === 'authorization' && only.prefix === 'Bearer ') {
      draft.shared.forwardAccessToken = true
      return undefined
    }
    return LEGACY_CREDENTIALS
  }
  if (only.prefix !== undefined && only.prefix !== '') return 'a prefix: the gateway sends the claim as it is'
  const key = IDENTITY_CLAIMS[claim]
  if (key !== undefined && !named.has(key)) {
    named.add(key)
    Draft.set(draft.shared, ['identityHeaders', key], header.name)
    return undefined
  }
  if (['id_token', 'refresh_token', 'created_at', 'expires_on'].includes(claim)) return `the session's ${claim} is never sent to an application`
  if (key !== undefined) return `a second header of the ${claim} claim`
  Draft.set(draft.shared, ['claimHeaders', header.name], claimPath(claim))
  return undefined
}

/** The forward-auth answer's headers: the gateway's X-Auth-Request-* are always sent. */
const X_AUTH_REQUEST: Readonly<Record<string, string>> = {
  'x-auth-request-user': 'user',
  'x-auth-request-email': 'email',
  'x-auth-request-groups': 'groups',
  'x-auth-request-preferred-username': 'preferred_username',
}

function carryResponseHeaders(value: OptionValue, draft: Draft): string | undefined {
  const lost: string[] = []
  for (const header of value as readonly AlphaHeader[]) {
    const [only, ...more] = header.values
    const name = header.name.toLowerCase()
    if (only?.claim !== undefined && more.length === 0 && (only.prefix ?? '') === '' && X_AUTH_REQUEST[name] === only.claim) continue
    if (name === 'x-auth-request-access-token' && only?.claim === 'access_token' && more.length === 0 && (only.prefix ?? '') === '') {
      draft.shared.forwardAccessToken = true
      continue
    }
    lost.push(`${header.from} (${header.name}): the forward-auth answer carries the gateway's X-Auth-Request-* headers only`)
  }
  return lost.length === 0 ? undefined : lost.join('; ')
}

function carryAllowedGroups(value: OptionValue, draft: Draft): string | undefined {
  addAllowedGroups(draft, strings(value))
  return undefined
}

/** A provider's additionalClaims (v7.15): the claims /oauth2/userinfo adds, which the gateway's userinfo endpoint adds too. */
function carryAdditionalClaims(value: OptionValue, draft: Draft): string | undefined {
  draft.provider.additionalClaims = strings(value)
  return undefined
}

function carryGroupsClaim(value: OptionValue, draft: Draft): string | undefined {
  const claim = text(value)
  if (claim !== 'groups') draft.provider.groupsClaim = claimPath(claim)
  return undefined
}

function carrySigningAlgs(value: OptionValue, draft: Draft): string | undefined {
  const algs = strings(value)
  const asymmetric = algs.filter((a) => !/^(HS|none)/i.test(a))
  if (asymmetric.length > 0) draft.provider.idTokenAlgorithms = asymmetric
  return asymmetric.length === algs.length ? undefined : 'the gateway accepts asymmetric signatures only (no HS* or none)'
}

function carryEmailsFile(value: OptionValue, _draft: Draft, options: OptionMap): string | undefined {
  const domains = options.get('email-domain')
  const everyone = domains === undefined || strings(domains.value).includes('*')
  if (!everyone) {
    return 'oauth2-proxy admits an address of the file or of email-domain, the gateway requires every allow rule: write upstreams[].allow.emails or allow.emailDomains, not both'
  }
  return `put the file's addresses in upstreams[].allow.emails (${text(value)} is not read)`
}

/**
 * The legacy credentials of oauth2-proxy (pkg/apis/options/legacy_options.go, LegacyHeaders): on
 * proxied requests, `pass_basic_auth` (true by default) sends `Authorization: Basic` when
 * `basic_auth_password` is set, `pass_authorization_header` the ID token as Bearer,
 * `pass_access_token` X-Forwarded-Access-Token; in the auth_request answer, `set_basic_auth` and
 * `set_authorization_header` the same Authorization, `set_xauthrequest` with `pass_access_token`
 * X-Auth-Request-Access-Token. The gateway's keys (docs/features/legacy-credentials.md) send each
 * at every exit of the upstream, and one upstream's Authorization carries one credential
 * (config/cross-key/legacy-credentials.ts): Basic and the ID token together (oauth2-proxy then
 * adds two Authorization lines) are reported on each option, neither written.
 */
interface LegacyPlan {
  /** Basic credentials, by the options that ask for them. */
  readonly basic: readonly string[]
  readonly idToken: readonly string[]
  readonly conflict: boolean
  readonly password: boolean
}

function legacyPlan(options: OptionMap): LegacyPlan {
  const on = (name: string, byDefault = false): boolean => {
    const option = options.get(name)
    return option === undefined || option.value === '' ? byDefault : flag(option.value)
  }
  const password = text(options.get('basic-auth-password')?.value ?? '') !== ''
  const basic = [
    ...(on('pass-basic-auth', true) && password ? [options.get('pass-basic-auth') === undefined ? 'basic-auth-password' : 'pass-basic-auth'] : []),
    ...(on('set-basic-auth') ? ['set-basic-auth'] : []),
  ]
  const idToken = ['pass-authorization-header', 'set-authorization-header'].filter((name) => on(name))
  return { basic, idToken, conflict: basic.length > 0 && idToken.length > 0, password }
}

function carryLegacy(name: string): Carry {
  return (_value, draft, options) => {
    const plan = legacyPlan(options)
    const fromOf = (n: string): string => options.get(n)?.from ?? n
    if (plan.basic.includes(name) || plan.idToken.includes(name)) {
      if (plan.conflict) {
        const others = [...plan.basic, ...plan.idToken].filter((n) => n !== name).map(fromOf)
        return `with ${others.join(', ')}: HTTP Basic and the ID token would both be Authorization (oauth2-proxy sends two Authorization lines), which carries one credential at the gateway: choose upstreams[].forwardBasicAuth or forwardIdToken`
      }
      if (plan.idToken.includes(name)) {
        draft.shared.forwardIdToken = true
        return undefined
      }
      if (!plan.password)
        return 'without basic_auth_password oauth2-proxy answers HTTP Basic with an empty password, which the gateway never sends: write upstreams[].forwardBasicAuth with the password'
      const user = options.get('prefer-email-to-user')
      draft.shared.forwardBasicAuth = {
        ...(user !== undefined && flag(user.value) ? { user: 'email' } : {}),
        password: draft.secret(BASIC_AUTH_PASSWORD_VAR, 'the password the application expects in HTTP Basic (basic_auth_password)'),
      }
    }
    return undefined
  }
}

function carryPassUserHeaders(value: OptionValue, _draft: Draft, options: OptionMap): string | undefined {
  const basic = options.get('pass-basic-auth')
  if (flag(value) || basic === undefined || flag(basic.value)) return undefined
  return 'the gateway always sends the identity headers (upstreams[].identityHeaders names them)'
}

function carryCodeChallenge(value: OptionValue): string | undefined {
  return /^(S256)?$/i.test(text(value)) ? undefined : 'the gateway always uses PKCE with S256'
}

function carryExtraAudiences(value: OptionValue, draft: Draft, options: OptionMap): string | undefined {
  const client = options.get('client-id')
  draft.provider.audiences = [...new Set([...(client === undefined ? [] : [text(client.value)]), ...strings(value)])]
  return undefined
}

function carryResponseMode(value: OptionValue, draft: Draft): string | undefined {
  const mode = text(value)
  if (mode === '' || mode === 'query') return undefined
  if (mode === 'form_post') {
    draft.provider.responseMode = 'form_post'
    return undefined
  }
  return `response mode ${mode}: the gateway asks for query or form_post`
}

function carryProxyPrefix(value: OptionValue): string | undefined {
  return text(value).replace(/\/+$/, '') === '/oauth2'
    ? undefined
    : `the gateway's endpoints are under ${SIGN_IN_PATH} (its callback path alone can be kept, with provider.redirectPath)`
}

/** Log rotation: meaningful only with logging_filename, which is not carried itself. */
function withLogFile(_value: OptionValue, _draft: Draft, options: OptionMap): string | undefined {
  const file = options.get('logging-filename')
  return file !== undefined && file.value !== '' ? `${LOGGING}, to stdout` : undefined
}

function bool(path: readonly string[], root: (draft: Draft) => JsonObject): Carry {
  return (value, draft) => {
    Draft.set(root(draft), path, flag(value))
    return undefined
  }
}

function str(path: readonly string[], root: (draft: Draft) => JsonObject): Carry {
  return (value, draft) => {
    Draft.set(root(draft), path, text(value))
    return undefined
  }
}

const provider = (d: Draft): JsonObject => d.provider
const cookies = (d: Draft): JsonObject => d.cookies
const shared = (d: Draft): JsonObject => d.shared

// --- the table ------------------------------------------------------------------------------------

export const MAPPINGS: readonly Mapping[] = [
  // The provider.
  row('provider', 'string', carryProvider),
  row('oidc-issuer-url', 'string', oidcOnly(carryIssuer)),
  row('client-id', 'string', str(['clientId'], provider)),
  row('client-secret', 'string', carryClientSecret),
  row('client-secret-file', 'string', carryClientSecret),
  row('scope', 'string', carryScope),
  row('code-challenge-method', 'string', carryCodeChallenge),
  row('force-code-challenge-method', 'string', carryCodeChallenge),
  row('oidc-groups-claim', 'string', oidcOnly(carryGroupsClaim)),
  always(
    'oidc-email-claim',
    'string',
    (v) => text(v) === 'email',
    "the gateway's email header and allow.emailDomains read the email claim; send another claim with upstreams[].claimHeaders",
  ),
  always(
    'user-id-claim',
    'string',
    (v) => text(v) === 'email',
    "the gateway's email header and allow.emailDomains read the email claim; send another claim with upstreams[].claimHeaders",
  ),
  row('prefer-email-to-user', 'bool', (v, d) => {
    if (flag(v)) d.provider.userClaim = 'email'
    return undefined
  }),
  row('oidc-extra-audience', 'list', oidcOnly(carryExtraAudiences), 'oidc_extra_audiences'),
  always('oidc-audience-claim', 'list', (v) => strings(v).every((c) => c === 'aud'), 'the gateway checks the aud claim', 'oidc_audience_claims'),
  row('oidc-enabled-signing-alg', 'list', oidcOnly(carrySigningAlgs), 'oidc_enabled_signing_algs'),
  row('auth-request-response-mode', 'string', oidcOnly(carryResponseMode)),
  row('redirect-url', 'string', carryRedirectUrl),
  row('proxy-prefix', 'string', carryProxyPrefix),
  cannot('acr-values', 'string', 'the gateway asks for acr values per path with upstreams[].rules step-up, not on every sign-in'),
  cannot('prompt', 'string', 'the gateway sends prompt=consent only with provider.offlineAccess'),
  cannot('approval-prompt', 'string', 'the gateway sends prompt=consent only with provider.offlineAccess'),
  cannot('provider-display-name', 'string', NO_SIGN_IN_PAGE),
  cannot('provider-ca-file', 'list', 'trust a private CA with NODE_EXTRA_CA_CERTS', 'provider_ca_files'),
  cannot('use-system-trust-store', 'bool', 'the gateway uses the system trust store plus NODE_EXTRA_CA_CERTS'),
  cannot('skip-oidc-discovery', 'bool', DISCOVERY_ONLY),
  cannot('oidc-jwks-url', 'string', DISCOVERY_ONLY),
  cannot('oidc-public-key-file', 'list', DISCOVERY_ONLY, 'oidc_public_key_files'),
  row('login-url', 'string', carryGithubEndpoint('login-url')),
  row('redeem-url', 'string', carryGithubEndpoint('redeem-url')),
  cannot('profile-url', 'string', DISCOVERY_ONLY),
  row('validate-url', 'string', carryGithubEndpoint('validate-url')),
  cannot('skip-claims-from-profile-url', 'bool', 'the gateway asks UserInfo only with provider.claimSources.userInfo'),
  cannot('backend-logout-url', 'string', "sign-out goes to the end_session_endpoint of the provider's discovery document"),
  cannot('resource', 'string', 'the gateway sends no resource parameter at sign-in'),
  always('insecure-oidc-allow-unverified-email', 'bool', isFalse, 'the gateway refuses an email with email_verified: false'),
  always('insecure-oidc-skip-issuer-verification', 'bool', isFalse, 'the gateway always checks the issuer (several issuers are several providers)'),
  always('insecure-oidc-skip-nonce', 'bool', () => true, 'never needed: the gateway always sends and checks the nonce'),
  cannot('extra-jwt-issuers', 'list', 'a Bearer token of another issuer needs that issuer as a provider of its own (providers)'),
  always('skip-jwt-bearer-tokens', 'bool', () => true, 'never needed: the gateway always accepts Bearer access tokens of the provider'),
  cannot('bearer-token-login-fallback', 'bool', 'a refused Bearer token is a 401 at the gateway'),
  cannot('allowed-role', 'list', 'Keycloak roles: set provider.groupsClaim to realm_access.roles and list them in upstreams[].allow.groups', 'allowed_roles'),
  cannot('keycloak-group', 'list', `the legacy keycloak provider is ${PLAIN_OAUTH}; use keycloak-oidc's issuer`, 'keycloak_groups'),
  cannot('azure-tenant', 'string', 'the tenant is in the issuer URL (https://login.microsoftonline.com/<tenant>/v2.0)'),
  cannot('azure-graph-group-field', 'string', 'Entra ID groups beyond the token come from provider.claimSources (graph group overage), by id'),
  cannot('entra-id-allowed-tenant', 'list', 'one issuer per provider: a multi-tenant app is a provider per tenant', 'entra_id_allowed_tenants'),
  cannot('entra-id-federated-token-auth', 'bool', 'the gateway authenticates with a client secret or private_key_jwt'),
  row('github-org', 'string', carryGithubOrg),
  row('github-team', 'string', carryGithubTeam),
  row('github-repo', 'string', carryGithubRepo),
  row('github-token', 'string', carryGithubToken),
  row('github-user', 'list', carryGithubUsers, 'github_users'),
  row('gitlab-group', 'list', carryGitlabGroups, 'gitlab_groups'),
  row('gitlab-project', 'list', carryGitlabProjects, 'gitlab_projects'),
  row('google-group', 'list', carryGoogleGroups, ['google_groups', 'google_group']),
  row('google-admin-email', 'string', carryGoogleAdminEmail),
  row('google-service-account-json', 'string', carryGoogleServiceAccount),
  always('google-use-application-default-credentials', 'bool', isFalse, `${GROUP_SOURCE}, not Application Default Credentials`),
  cannot('google-target-principal', 'string', `${GROUP_SOURCE}: it impersonates no other service account`),
  always(
    'google-use-organization-id',
    'bool',
    isFalse,
    "the gateway reads groups from the Directory, not the user's organization id (preferred_username stays Google's)",
  ),
  always(
    'google-admin-api-user-scope',
    'string',
    (v) => text(v) === 'https://www.googleapis.com/auth/admin.directory.group.readonly',
    'the gateway asks the Directory for the scope https://www.googleapis.com/auth/admin.directory.group.readonly alone',
  ),
  cannot('bitbucket-team', 'string', `Bitbucket is ${PLAIN_OAUTH}`),
  cannot('bitbucket-repository', 'string', `Bitbucket is ${PLAIN_OAUTH}`),
  cannot('jwt-key', 'string', `login.gov's private_key_jwt key: set provider.clientAuthMethod: private_key_jwt and provider.clientKey`),
  cannot('jwt-key-file', 'string', `login.gov's private_key_jwt key: set provider.clientAuthMethod: private_key_jwt and provider.clientKey`),
  cannot('pubjwk-url', 'string', DISCOVERY_ONLY),

  // Who may sign in.
  row('email-domain', 'list', carryEmailDomains, 'email_domains'),
  row('authenticated-emails-file', 'string', carryEmailsFile),
  row('allowed-group', 'list', carryAllowedGroups, 'allowed_groups'),
  row('whitelist-domain', 'list', carryWhitelist, 'whitelist_domains'),
  row('skip-auth-preflight', 'bool', bool(['allowPreflight'], shared)),
  cannot('trusted-ip', 'list', 'the gateway admits no request by its address alone', 'trusted_ips'),
  cannot('api-route', 'list', 'the gateway decides per request: a page load is sent to sign in, any other request gets 401', 'api_routes'),
  cannot('htpasswd-file', 'string', HTPASSWD),
  cannot('htpasswd-user-group', 'list', HTPASSWD, 'htpasswd_user_groups'),
  cannot('display-htpasswd-form', 'bool', HTPASSWD),
  always('skip-provider-button', 'bool', () => true, ''),

  // Cookies and sessions.
  row('cookie-name', 'string', str(['name'], cookies)),
  row('cookie-secret', 'string', carryCookieSecret),
  row('cookie-secret-file', 'string', carryCookieSecret),
  row('cookie-domain', 'list', carryCookieDomains, 'cookie_domains'),
  always('cookie-path', 'string', (v) => text(v) === '/', 'the session cookie is always on /'),
  row('cookie-secure', 'bool', bool(['secure'], cookies)),
  row('cookie-samesite', 'string', (v, d) => {
    const same = text(v).toLowerCase()
    if (same === '') return undefined
    if (!['lax', 'strict', 'none'].includes(same)) return `SameSite ${same}: lax, strict or none`
    d.cookies.sameSite = same
    return undefined
  }),
  row('cookie-expire', 'duration', carryExpire),
  cannot('cookie-refresh', 'duration', 'the gateway refreshes the access token with the refresh token when a request needs it, not by the session age'),
  always('cookie-httponly', 'bool', isTrue, 'the session cookie is always HttpOnly'),
  cannot('cookie-csrf-per-request', 'bool', "the gateway's sign-in transactions have cookies of their own, one per sign-in"),
  cannot('cookie-csrf-per-request-limit', 'int', "the gateway's sign-in transactions have cookies of their own, at most 3 at once"),
  cannot('cookie-csrf-expire', 'duration', "the gateway's sign-in transactions last 10 minutes"),
  cannot('cookie-csrf-samesite', 'string', "the gateway's sign-in transaction cookies are SameSite=Lax (None with form_post)"),
  cannot('session-cookie-minimal', 'bool', 'the gateway keeps what its session needs'),
  row('session-store-type', 'string', carrySessionStore),
  row('redis-connection-url', 'string', carryRedisUrl),
  // Both are written into session.redisUrl by its row.
  always('redis-password', 'string', (_v) => true, ''),
  always('redis-username', 'string', (_v) => true, ''),
  cannot('redis-use-sentinel', 'bool', 'write session.redis.sentinels (name and nodes) by hand'),
  cannot('redis-sentinel-master-name', 'string', 'write session.redis.sentinels (name and nodes) by hand'),
  cannot('redis-sentinel-connection-urls', 'list', 'write session.redis.sentinels (name and nodes) by hand'),
  cannot('redis-sentinel-password', 'string', 'write session.redis.sentinels.password by hand, from the environment'),
  cannot('redis-use-cluster', 'bool', 'write session.redis.cluster.nodes by hand'),
  cannot('redis-cluster-connection-urls', 'list', 'write session.redis.cluster.nodes by hand'),
  cannot('redis-ca-path', 'string', 'trust a private CA with NODE_EXTRA_CA_CERTS'),
  always('redis-insecure-skip-tls-verify', 'bool', isFalse, NEVER_INSECURE),
  cannot('redis-connection-idle-timeout', 'int', 'the gateway keeps its Redis connections open'),

  // Upstreams and what they receive.
  row('upstream', 'list', carryUpstreams, 'upstreams'),
  row('alpha-upstreams', 'list', carryAlphaUpstreams, []),
  // After the upstreams: each gets the public paths.
  row('skip-auth-regex', 'list', carrySkipAuth('skip-auth-regex')),
  row('skip-auth-route', 'list', carrySkipAuth('skip-auth-route'), 'skip_auth_routes'),
  row('alpha-inject-request-headers', 'list', carryRequestHeaders, []),
  row('alpha-inject-response-headers', 'list', carryResponseHeaders, []),
  cannot('alpha-proxy-raw-path', 'bool', 'the gateway normalizes the path before it routes and decides', []),
  row('alpha-additional-claims', 'list', carryAdditionalClaims, []),
  cannot('alpha-login-url-parameters', 'list', 'the gateway sends no parameters of the sign-in request to the provider', []),
  row('pass-host-header', 'bool', bool(['passHostHeader'], shared)),
  row('proxy-websockets', 'bool', bool(['websocket'], shared)),
  row('upstream-timeout', 'duration', carryUpstreamTimeout),
  cannot('flush-interval', 'duration', 'the gateway streams answers as the upstream sends them'),
  cannot('disable-keep-alives', 'bool', 'the gateway manages its upstream connections itself'),
  always('ssl-upstream-insecure-skip-verify', 'bool', isFalse, NEVER_INSECURE),
  always('ssl-insecure-skip-verify', 'bool', isFalse, NEVER_INSECURE),
  row('pass-user-headers', 'bool', carryPassUserHeaders),
  row('pass-basic-auth', 'bool', carryLegacy('pass-basic-auth')),
  row('basic-auth-password', 'string', carryLegacy('basic-auth-password')),
  row('pass-access-token', 'bool', (v, d) => {
    if (flag(v)) d.shared.forwardAccessTokenHeader = true
    return undefined
  }),
  row('pass-authorization-header', 'bool', carryLegacy('pass-authorization-header')),
  row('set-authorization-header', 'bool', carryLegacy('set-authorization-header')),
  row('set-basic-auth', 'bool', carryLegacy('set-basic-auth')),
  // The gateway's forward-auth answer always carries X-Auth-Request-User, -Email, -Groups and -Preferred-Username.
  always('set-xauthrequest', 'bool', () => true, ''),
  always('skip-auth-strip-headers', 'bool', isTrue, "the gateway always removes a client's own identity headers"),
  cannot(
    'signature-key',
    'string',
    'the gateway does not sign requests with GAP-Signature: an upstream that verifies the user gets upstreams[].identityAssertion',
  ),

  // Listeners.
  row('http-address', 'string', carryHttpAddress),
  cannot('https-address', 'string', NO_TLS_LISTENER),
  cannot('tls-cert-file', 'string', NO_TLS_LISTENER),
  cannot('tls-key-file', 'string', NO_TLS_LISTENER),
  cannot('tls-min-version', 'string', NO_TLS_LISTENER),
  cannot('tls-cipher-suite', 'list', NO_TLS_LISTENER, 'tls_cipher_suites'),
  row('metrics-address', 'string', carryMetricsAddress),
  cannot('metrics-secure-address', 'string', NO_TLS_LISTENER),
  cannot('metrics-tls-cert-file', 'string', NO_TLS_LISTENER),
  cannot('metrics-tls-key-file', 'string', NO_TLS_LISTENER),
  cannot('alpha-server-tls', 'string', NO_TLS_LISTENER, []),
  row('reverse-proxy', 'bool', carryReverseProxy),
  row('trusted-proxy-ip', 'list', carryTrustedProxies, 'trusted_proxy_ips'),
  always(
    'real-client-ip-header',
    'string',
    (v) => /^x-forwarded-for$/i.test(text(v)),
    'the gateway reads the client address from X-Forwarded-For, right to left past server.trustedProxies',
  ),
  cannot('ping-path', 'string', 'the probes are /healthz and /readyz on server.managementPort'),
  cannot('ready-path', 'string', 'the probes are /healthz and /readyz on server.managementPort'),
  cannot('ping-user-agent', 'string', 'the probes are /healthz and /readyz on server.managementPort'),
  cannot('gcp-healthchecks', 'bool', 'the probes are /healthz and /readyz on server.managementPort'),
  always('force-https', 'bool', isFalse, 'redirect http to https in front of the gateway'),
  cannot('relative-redirect-url', 'bool', 'the gateway redirects to server.publicUrl'),
  cannot('allow-query-semicolons', 'bool', 'the gateway reads queries as the WHATWG URL standard does'),
  cannot('encode-state', 'bool', "the gateway's state is its own"),
  cannot('force-json-errors', 'bool', 'the gateway answers a program with problem+json and a browser navigation with a page'),
  cannot('show-debug-on-error', 'bool', 'the gateway logs the cause and shows the request id'),
  cannot('custom-templates-dir', 'string', TEMPLATES),
  cannot('custom-sign-in-logo', 'string', TEMPLATES),
  cannot('banner', 'string', TEMPLATES),
  cannot('footer', 'string', TEMPLATES),

  // Logging.
  always('request-logging', 'bool', isTrue, LOGGING),
  cannot('request-logging-format', 'string', LOGGING),
  always('auth-logging', 'bool', isTrue, `${LOGGING}; sign-ins and their refusals are its audit lines`),
  cannot('auth-logging-format', 'string', LOGGING),
  always('standard-logging', 'bool', isTrue, LOGGING),
  cannot('standard-logging-format', 'string', LOGGING),
  always('errors-to-info-log', 'bool', isFalse, LOGGING),
  cannot('exclude-logging-path', 'list', LOGGING, 'exclude_logging_paths'),
  cannot('silence-ping-logging', 'bool', LOGGING),
  cannot('request-id-header', 'string', 'the gateway reads and sends X-Request-Id'),
  cannot('logging-filename', 'string', `${LOGGING}, to stdout`),
  row('logging-max-size', 'int', withLogFile),
  row('logging-max-age', 'int', withLogFile),
  row('logging-max-backups', 'int', withLogFile),
  row('logging-local-time', 'bool', withLogFile),
  row('logging-compress', 'bool', withLogFile),
]

/** The flags oauth2-proxy reads before its options (main.go), which name inputs or actions, not settings. */
export const META_FLAGS: ReadonlySet<string> = new Set(['config', 'alpha-config', 'convert-config-to-alpha', 'version', 'config-test'])

/**
 * The options of oauth2-proxy's LegacyOptions (pkg/apis/options/legacy_options.go): with an alpha
 * configuration they are no options at all (oauth2-proxy v7.15.6, run beside its alpha
 * configuration with --http-address, exits with "unknown flag: --http-address"), since the alpha
 * configuration holds the upstreams, headers, provider and servers.
 */
export const ALPHA_OWNED: ReadonlySet<string> = new Set([
  'acr-values',
  'allowed-group',
  'allowed-role',
  'approval-prompt',
  'auth-request-response-mode',
  'azure-graph-group-field',
  'azure-tenant',
  'backend-logout-url',
  'basic-auth-password',
  'bitbucket-repository',
  'bitbucket-team',
  'client-id',
  'client-secret',
  'client-secret-file',
  'code-challenge-method',
  'disable-keep-alives',
  'entra-id-allowed-tenant',
  'entra-id-federated-token-auth',
  'flush-interval',
  'force-code-challenge-method',
  'github-org',
  'github-repo',
  'github-team',
  'github-token',
  'github-user',
  'gitlab-group',
  'gitlab-project',
  'google-admin-api-user-scope',
  'google-admin-email',
  'google-group',
  'google-service-account-json',
  'google-target-principal',
  'google-use-application-default-credentials',
  'google-use-organization-id',
  'http-address',
  'https-address',
  'insecure-oidc-allow-unverified-email',
  'insecure-oidc-skip-issuer-verification',
  'insecure-oidc-skip-nonce',
  'jwt-key',
  'jwt-key-file',
  'keycloak-group',
  'login-url',
  'metrics-address',
  'metrics-secure-address',
  'metrics-tls-cert-file',
  'metrics-tls-key-file',
  'oidc-audience-claim',
  'oidc-email-claim',
  'oidc-enabled-signing-alg',
  'oidc-extra-audience',
  'oidc-groups-claim',
  'oidc-issuer-url',
  'oidc-jwks-url',
  'oidc-public-key-file',
  'pass-access-token',
  'pass-authorization-header',
  'pass-basic-auth',
  'pass-host-header',
  'pass-user-headers',
  'prefer-email-to-user',
  'profile-url',
  'prompt',
  'provider',
  'provider-ca-file',
  'provider-display-name',
  'proxy-websockets',
  'pubjwk-url',
  'redeem-url',
  'resource',
  'scope',
  'set-authorization-header',
  'set-basic-auth',
  'set-xauthrequest',
  'skip-auth-strip-headers',
  'skip-claims-from-profile-url',
  'skip-oidc-discovery',
  'ssl-upstream-insecure-skip-verify',
  'tls-cert-file',
  'tls-cipher-suite',
  'tls-key-file',
  'tls-min-version',
  'upstream',
  'upstream-timeout',
  'use-system-trust-store',
  'user-id-claim',
  'validate-url',
])

const BY_FLAG = new Map(MAPPINGS.map((m) => [m.flag, m]))
const BY_CFG = new Map(MAPPINGS.flatMap((m) => m.cfg.map((c) => [c, m] as const)))

export function mappingOfFlag(name: string): Mapping | undefined {
  return BY_FLAG.get(name)
}

/** A row by its oauth2-proxy.cfg name, which is also the environment name without OAUTH2_PROXY_ (lowercased). */
export function mappingOfCfg(name: string): Mapping | undefined {
  return BY_CFG.get(name)
}
