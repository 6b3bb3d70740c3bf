// The effective configuration as `openid-gateway check` prints it: everything the gateway will
// use, except the secrets.

import YAML from 'yaml'
import { isInlineKey } from '../keys/private-key.js'
import { gatewaySchema, type JsonSchema } from '../options/schema.js'
import { DEFAULT_PROVIDER, type GatewayConfig } from '../options/types.js'

export const MASK = '********'

// Redis URL parameters some clients read a password from.
const SECRET_PARAMETER = /pass|secret|token/i

/** A copy of the configuration with every secret replaced by ********. For display only. */
export function maskConfig(cfg: GatewayConfig): unknown {
  const copy = structuredClone(cfg)
  for (const provider of copy.providers) {
    if (provider.clientSecret !== undefined) provider.clientSecret = MASK
    // A key given inline is masked; a file path is not a secret and says where the key comes from.
    if (provider.clientKey !== undefined && isInlineKey(provider.clientKey)) provider.clientKey = MASK
    if (provider.ssf?.authorization !== undefined) provider.ssf.authorization = MASK
    if (provider.ssf?.bearerToken !== undefined) provider.ssf.bearerToken = MASK
  }
  for (const upstream of copy.upstreams) {
    if (upstream.forwardBasicAuth?.password !== undefined) upstream.forwardBasicAuth.password = MASK
  }
  if (copy.assertions.signingKeys !== undefined) copy.assertions.signingKeys = copy.assertions.signingKeys.map((key) => (isInlineKey(key) ? MASK : key))
  copy.cookies.secrets = copy.cookies.secrets.map(() => MASK)
  if (copy.session.redisUrl !== undefined) copy.session.redisUrl = maskUrlCredentials(copy.session.redisUrl)
  if (copy.session.redis.password !== undefined) copy.session.redis.password = MASK
  if (copy.session.redis.sentinels?.password !== undefined) copy.session.redis.sentinels.password = MASK
  return copy
}

/** A secret of the configuration: the key that gives it, as the file writes it, and its value. */
export interface ConfigSecret {
  key: string
  value: string
}

/**
 * Every secret maskConfig hides, by key: what config/file-modes.ts looks for written in the file
 * itself. Of a Redis URL, the credentials in it (its password, a lone user name, a secret query
 * parameter), not the URL.
 */
export function configSecrets(cfg: GatewayConfig): ConfigSecret[] {
  const secrets: ConfigSecret[] = []
  const add = (key: string, value: string | undefined): void => {
    if (value !== undefined && value !== '') secrets.push({ key, value })
  }
  cfg.providers.forEach((provider, index) => {
    const at = providerKey(cfg, index)
    add(`${at}.clientSecret`, provider.clientSecret)
    if (provider.clientKey !== undefined && isInlineKey(provider.clientKey)) add(`${at}.clientKey`, provider.clientKey)
    add(`${at}.ssf.authorization`, provider.ssf?.authorization)
    add(`${at}.ssf.bearerToken`, provider.ssf?.bearerToken)
  })
  cfg.cookies.secrets.forEach((secret, index) => add(`cookies.secrets[${index}]`, secret))
  cfg.upstreams.forEach((upstream, index) => add(`upstreams[${index}].forwardBasicAuth.password`, upstream.forwardBasicAuth?.password))
  cfg.assertions.signingKeys?.forEach((key, index) => {
    if (isInlineKey(key)) add(`assertions.signingKeys[${index}]`, key)
  })
  if (cfg.session.redisUrl !== undefined) {
    for (const credential of urlCredentials(cfg.session.redisUrl)) add('session.redisUrl', credential)
  }
  add('session.redis.password', cfg.session.redis.password)
  add('session.redis.sentinels.password', cfg.session.redis.sentinels?.password)
  return secrets
}

/** The key of the provider at `index` as the file names it: `provider` in the one-provider form. */
export function providerKey(cfg: GatewayConfig, index: number): string {
  const oneProvider = cfg.providers.length === 1 && cfg.providers[0]?.name === DEFAULT_PROVIDER
  return oneProvider ? 'provider' : `providers[${index}]`
}

/** What maskUrlCredentials hides of a URL, decoded as a client reads it. */
function urlCredentials(value: string): string[] {
  if (!URL.canParse(value)) return [value]
  const url = new URL(value)
  const credentials = [url.password !== '' ? url.password : url.username]
  for (const [key, parameter] of url.searchParams) if (SECRET_PARAMETER.test(key)) credentials.push(parameter)
  return [...new Set(credentials.flatMap((credential) => [credential, safeDecode(credential)]))]
}

function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value)
  } catch {
    return value
  }
}

export function formatEffectiveConfig(cfg: GatewayConfig): string {
  return YAML.stringify(orderBySchema(maskConfig(cfg), gatewaySchema), { lineWidth: 0, singleQuote: true })
}

// Defaults are added after the keys the user wrote; printed in schema order, the effective
// configuration reads the same for every input and lines up with the documentation.
function orderBySchema(value: unknown, schema: JsonSchema | undefined): unknown {
  if (Array.isArray(value)) return value.map((item) => orderBySchema(item, schema?.items))
  if (typeof value !== 'object' || value === null) return value
  const entries = Object.entries(value)
  const known = Object.keys(schema?.properties ?? {})
  const rank = (key: string): number => (known.includes(key) ? known.indexOf(key) : known.length)
  return Object.fromEntries(
    entries
      .sort(([a], [b]) => rank(a) - rank(b))
      .map(([key, item]) => [key, orderBySchema(item, schema?.properties?.[key])]),
  )
}

// A URL with only a user name (`redis://secret@host`) is masked there too: several clients read
// a lone user name as the password.
function maskUrlCredentials(value: string): string {
  if (!URL.canParse(value)) return MASK
  const url = new URL(value)
  if (url.password !== '') url.password = MASK
  else if (url.username !== '') url.username = MASK
  for (const key of [...url.searchParams.keys()]) {
    if (SECRET_PARAMETER.test(key)) url.searchParams.set(key, MASK)
  }
  return url.href
}
