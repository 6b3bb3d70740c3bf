// The effective configuration as `openid-gateway check` prints it: everything the gateway will
// use, except the secrets.

import YAML from 'yaml'
import { isInlineKey } from '../keys/private-key.js'
import { gatewaySchema, type JsonSchema } from '../options/schema.js'
import type { GatewayConfig } from '../options/types.js'

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
  if (copy.assertions.signingKeys !== undefined) copy.assertions.signingKeys = copy.assertions.signingKeys.map((key) => (isInlineKey(key) ? MASK : key))
  copy.cookies.secrets = copy.cookies.secrets.map(() => MASK)
  if (copy.session.redisUrl !== undefined) copy.session.redisUrl = maskUrlCredentials(copy.session.redisUrl)
  if (copy.session.redis.password !== undefined) copy.session.redis.password = MASK
  if (copy.session.redis.sentinels?.password !== undefined) copy.session.redis.sentinels.password = MASK
  return copy
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
