// From the normalised option map to the gateway's configuration: the contradictions oauth2-proxy
// itself would refuse, every row of mappings.ts for the options given, then what the gateway needs
// that oauth2-proxy derives (its public URL, the callback path it keeps) and oauth2-proxy's
// defaults that differ from the gateway's (WebSockets are proxied unless proxy_websockets is false).

import { Draft, type JsonObject, type Lost } from './draft.js'
import { CLIENT_SECRET_VAR, COOKIE_SECRET_VAR, MAPPINGS, text } from './mappings.js'
import { ImportError, type OptionMap, type OptionValue } from './options.js'

export interface ConvertOptions {
  /** The gateway's public origin when the input has no absolute redirect_url (`--public-url`). */
  readonly publicUrl?: string
}

export interface Conversion {
  /** The gateway's configuration, ready for YAML. */
  readonly config: JsonObject
  /** Each `${VAR}` of it and what to set it to. */
  readonly variables: ReadonlyMap<string, string>
  readonly lost: readonly Lost[]
  /** What must hold where the result runs (a file it names). */
  readonly notes: readonly string[]
}

/** oauth2-proxy's callback path under its proxy prefix (`/oauth2` by default): `<prefix>/callback`. */
function defaultCallback(options: OptionMap): string {
  const prefix = options.get('proxy-prefix')
  return `${(typeof prefix?.value === 'string' ? prefix.value : '/oauth2').replace(/\/+$/, '')}/callback`
}

function refuseContradictions(options: OptionMap): void {
  const get = (name: string) => options.get(name)
  const legacy = get('upstream')
  const alpha = get('alpha-upstreams')
  if (legacy !== undefined && alpha !== undefined)
    throw new ImportError(`${legacy.from} contradicts ${alpha.from}: upstreams are given in one place, the alpha configuration or the options`)
  const sameSite = get('cookie-samesite')
  const secure = get('cookie-secure')
  if (sameSite !== undefined && text(sameSite.value).toLowerCase() === 'none' && secure !== undefined && secure.value === false) {
    throw new ImportError(`${sameSite.from} contradicts ${secure.from}: a SameSite=None cookie must be Secure (browsers drop it otherwise)`)
  }
  const store = get('session-store-type')
  if (store !== undefined && store.value === 'redis' && !['redis-connection-url', 'redis-use-sentinel', 'redis-use-cluster'].some((k) => options.has(k))) {
    throw new ImportError(`${store.from}: a redis session store needs redis_connection_url (or a sentinel or cluster)`)
  }
}

function isUnset(value: OptionValue): boolean {
  return value === '' || (Array.isArray(value) && value.every((v) => v === ''))
}

export function convert(options: OptionMap, extra: ConvertOptions = {}): Conversion {
  refuseContradictions(options)
  const draft = new Draft()
  for (const mapping of MAPPINGS) {
    const option = options.get(mapping.flag)
    // An empty value is oauth2-proxy's unset (contrib/oauth2-proxy.cfg.example writes `tls_cert_file = ""`).
    if (option === undefined || isUnset(option.value)) continue
    const reason = mapping.carry(option.value, draft, options)
    if (reason !== undefined && reason !== '') draft.cannot(option.from, reason)
  }
  // oauth2-proxy's default provider is Google (pkg/apis/options/legacy_options.go), an OpenID provider.
  if (!options.has('provider') && !options.has('oidc-issuer-url')) draft.provider.issuer = 'https://accounts.google.com'
  if (extra.publicUrl !== undefined) draft.server.publicUrl = new URL(extra.publicUrl).origin
  if (draft.server.publicUrl === undefined) {
    throw new ImportError(
      "no redirect_url: the gateway needs its public origin, e.g. --public-url https://app.example.com (oauth2-proxy derives it from each request's host)",
    )
  }
  draft.provider.redirectPath ??= defaultCallback(options)
  if (draft.provider.issuer === undefined) throw new ImportError('no oidc_issuer_url: the gateway needs the OpenID provider (its issuer URL)')
  if (draft.provider.clientId === undefined) throw new ImportError('no client_id: the gateway needs the client registered at the provider')
  if (draft.upstreams.length === 0) throw new ImportError('no upstream: the gateway needs at least one application to proxy to')
  // Secrets oauth2-proxy requires: always from the environment, whatever the input held.
  draft.provider.clientSecret ??= draft.secret(CLIENT_SECRET_VAR, 'the client secret')
  draft.cookies.secrets ??= [
    draft.secret(COOKIE_SECRET_VAR, 'a new cookie secret of 32 bytes or more, e.g. from openssl rand -base64 32; sessions do not carry over'),
  ]
  // oauth2-proxy proxies WebSockets unless told not to (proxy_websockets defaults to true).
  draft.shared.websocket ??= true
  const { issuer, clientId, clientSecret, ...provider } = draft.provider
  const config: JsonObject = { server: draft.server, provider: { issuer, clientId, clientSecret, ...provider }, cookies: draft.cookies }
  if (Object.keys(draft.session).length > 0) config.session = draft.session
  if (Object.keys(draft.redirects).length > 0) config.redirects = draft.redirects
  config.upstreams = draft.upstreamList()
  return { config, variables: draft.variables, lost: draft.lost, notes: draft.notes }
}
