// The custom `format`s of the schema. Each check returns why a value is wrong, or undefined when
// it is fine: ajv only needs the verdict, the error message needs the reason. No message ever
// repeats the value, since some of these values are secrets; a header name, which never is one,
// is the exception: a refusal names the header it refuses.

import { BlockList, isIP } from 'node:net'
import { SIGN_IN_PATH, isGatewayPath } from '../contract/endpoints.js'
import { parseClaimPath } from '../contract/claim-path.js'
import { canonicalHeaderName, createHeaderNameTest, GATEWAY_ONLY_HEADERS, isReservedHeaderName } from '../upstream/header-policy.js'
import { TXN_TOKEN_HEADER } from '../upstream/transaction-token.js'
import { gatewaySchema } from '../options/schema.js'
import { parsePrivateKey, PrivateKeyError } from '../keys/private-key.js'
import { MIN_SECRET_BYTES } from '../session/cipher.js'
import { regexProblem } from '../access/request-match.js'
import { globProblem } from '../access/public-paths.js'
import { createRedirectAfterValidator } from '../routes/redirect-after.js'

export type FormatCheck = (value: string) => string | undefined

// The WHATWG URL parser silently drops tabs and newlines and reads `\` as `/` in http URLs;
// refusing them up front keeps what the user wrote and what the gateway uses the same thing.
const INVISIBLE = /[\s\x00-\x1f\x7f]/
const HOST_LABEL = /^(?!-)[A-Za-z0-9_-]{1,63}(?<!-)$/
const PORT = /^\d{1,5}$/
const HEADER_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

const NOT_HTTP_URL = 'must be an http(s) URL'

function isHostname(value: string): boolean {
  return value.length <= 253 && value.split('.').every((label) => HOST_LABEL.test(label)) && isCanonicalHost(value)
}

// What a URL parser would rewrite (`0x7f.1` is 127.0.0.1, `1.2.3` is 1.2.0.3) is refused: the
// entry would match another host than the one written.
function isCanonicalHost(value: string): boolean {
  return URL.canParse(`http://${value}/`) && new URL(`http://${value}/`).hostname === value.toLowerCase()
}

/** Header names as upstreams may read them: case-insensitive, `_` the same as `-`. */

function isPort(value: string): boolean {
  return PORT.test(value) && Number(value) >= 1 && Number(value) <= 65535
}

/** `host`, `host:port`, `1.2.3.4:port` or `[::1]:port`, as in a Host header. */
function isHostWithPort(value: string): boolean {
  const bracketed = /^\[([^\]]+)\](?::([^:]*))?$/.exec(value)
  if (bracketed) return isIP(bracketed[1] ?? '') === 6 && (bracketed[2] === undefined || isPort(bracketed[2]))
  const [host = '', port, ...rest] = value.split(':')
  if (rest.length > 0 || (port !== undefined && !isPort(port))) return false
  return isIP(host) === 4 || isHostname(host)
}

function parseHttpUrl(value: string): URL | undefined {
  if (INVISIBLE.test(value) || value.includes('\\') || !/^https?:\/\/[^/?#]/i.test(value)) return undefined
  return URL.canParse(value) ? new URL(value) : undefined
}

/** Shared rules of every URL in the file; `extra` adds the rules of one kind. */
function httpUrl(extra: (url: URL, value: string) => string | undefined): FormatCheck {
  return (value) => {
    const url = parseHttpUrl(value)
    if (!url) return NOT_HTTP_URL
    if (url.username !== '' || url.password !== '') return 'must not contain credentials'
    if (value.includes('#')) return 'must not have a fragment'
    return extra(url, value)
  }
}

const noQuery = (_url: URL, value: string): string | undefined =>
  value.includes('?') ? 'must not have a query' : undefined

function checkOrigin(url: URL, value: string): string | undefined {
  const isOrigin = !value.includes('?') && url.pathname === '/'
  return isOrigin ? undefined : 'must be an origin (scheme, host and optional port) without a path or query'
}

function checkIpOrCidr(value: string): string | undefined {
  const message = 'must be an IP address or a CIDR such as 10.0.0.0/8'
  const [address = '', prefix, ...rest] = value.split('/')
  const family = isIP(address)
  if (family === 0 || rest.length > 0) return message
  if (prefix === undefined) return undefined
  if (!/^\d{1,3}$/.test(prefix)) return message
  try {
    new BlockList().addSubnet(address, Number(prefix), family === 4 ? 'ipv4' : 'ipv6')
    return undefined
  } catch {
    return message
  }
}

function checkHost(value: string): string | undefined {
  if (value.includes('://')) return 'must be a host name, not a URL'
  if (value.includes('/')) return 'must be a host name without a path'
  if (value.includes('*')) return 'must not contain wildcards'
  return isHostWithPort(value) ? undefined : 'must be a host name, optionally with :port'
}

function checkAllowedHost(value: string): string | undefined {
  if (value.includes('*')) return 'must not contain wildcards; write .example.com to allow example.com and its subdomains'
  const message = checkHost(value.startsWith('.') ? value.slice(1) : value)
  if (message !== undefined) return value.startsWith('.') ? 'must be a host name or a .example.com entry, optionally with :port' : message
  try {
    // The validator that will use the entry is the judge of its form (canonical host, port).
    createRedirectAfterValidator({ publicUrl: 'https://gateway.invalid', allowedHosts: [value] })
    return undefined
  } catch {
    return 'must be a canonical host name or a .example.com entry, optionally with :port'
  }
}

function checkPathPrefix(value: string): string | undefined {
  if (!value.startsWith('/')) return 'must start with /'
  if (INVISIBLE.test(value)) return 'must not contain whitespace or control characters'
  if (/[?#\\]/.test(value)) return 'must not contain ?, # or \\'
  // The prefix becomes a Fastify route: `:` would start a parameter and `*` a wildcard there,
  // and forward-auth's matcher (access/match.ts) reads prefixes literally.
  if (/[:*]/.test(value)) return 'must not contain : or *'
  if (value.includes('//')) return 'must not contain //'
  if (value.includes('..') || value.split('/').includes('.')) return 'must not contain . or .. segments'
  if (/%(2e|2f|5c)/i.test(value)) return 'must not contain percent-encoded dots, slashes or backslashes'
  // The router compares routes with the decoded request path: a percent-encoded prefix either
  // serves nothing (`/caf%C3%A9`; write `/café`) or is a literal `%` the proxy then refuses.
  if (value.includes('%')) return 'must not contain percent-encoding; write the characters themselves'
  // The sign-in endpoints own this path and everything below it; an upstream there would never
  // receive a request.
  if (isGatewayPath(value.toLowerCase())) return `must not be ${SIGN_IN_PATH} or below it (the gateway serves that path)`
  return undefined
}

/**
 * A provider's redirectPath: a path as clean as an upstream's prefix (the router registers it
 * literally), not `/` and without a trailing `/` (RFC 6749 3.1.2 compares redirect URIs as
 * strings: the provider's registered URI has none).
 */
function checkRedirectPath(value: string): string | undefined {
  const problem = checkPathPrefix(value)
  if (problem !== undefined) return problem
  if (value.endsWith('/')) return 'must not end with / (nor be /)'
  return undefined
}

// Headers only the gateway sets (header-policy.ts GATEWAY_ONLY_HEADERS): every client's copy is
// removed, so a claim sent in one would reach the application as the gateway's own word.
const isGatewayOnly = createHeaderNameTest(GATEWAY_ONLY_HEADERS)

/**
 * The names the gateway itself gives its identity headers in the X-Forwarded-* family (oauth2-proxy's
 * X-Forwarded-User, -Email, -Groups, -Preferred-Username, and this gateway's -Issuer, -Acr, -Amr,
 * -Auth-Time): the defaults of upstreams[].identityHeaders, read from the schema that owns them.
 */
const IDENTITY_HEADER_DEFAULTS: readonly string[] = Object.values(gatewaySchema.properties?.upstreams?.items?.properties?.identityHeaders?.properties ?? {}).flatMap(
  (key) => (typeof key.default === 'string' ? [key.default] : []),
)
const isIdentityHeaderDefault = createHeaderNameTest(IDENTITY_HEADER_DEFAULTS)

/**
 * A header the gateway sets towards an upstream may not carry a claim (upstreams[].identityHeaders,
 * upstreams[].claimHeaders, assertions.header), or the application would read the claim as what
 * the gateway asserts there: a display name as its Transaction Token, or as the client's address,
 * scheme, host or path. Names compare case-insensitively with `_` equal to `-`, as the header
 * policy compares them (header-policy.ts canonicalHeaderName: CGI, RFC 3875 4.1.18). Refused:
 * - what the header policy reserves (isReservedHeaderName): Authorization, Cookie, Host, the
 *   hop-by-hop headers (RFC 9110 7.6.1), the forwarded and client-address headers (Forwarded,
 *   X-Forwarded-For/-Host/-Proto/-Prefix..., X-Real-IP...), the request overrides and
 *   forward-auth's X-Auth-Request-*;
 * - `Txn-Token`, where the gateway sends Transaction Tokens (draft-ietf-oauth-transaction-tokens
 *   section 12.1; upstream/transaction-token.ts);
 * - the rest of the X-Forwarded-* family, which the gateway removes from every client as a whole:
 *   which of its names an application's framework reads for the request's scheme, host, port or
 *   path is open-ended (-Ssl, -Scheme, -Server, -Protocol...). Only the gateway's own identity
 *   names in it stay usable.
 */
export function checkHeaderName(value: string): string | undefined {
  if (!HEADER_TOKEN.test(value)) return 'must be a valid HTTP header name'
  if (isReservedHeaderName(value)) return `must not be ${value}, a header that HTTP or the gateway itself manages`
  if (canonicalHeaderName(value) === TXN_TOKEN_HEADER) return `must not be ${value}, the header the gateway sends Transaction Tokens in (upstreams[].transactionTokens)`
  if (isGatewayOnly(value) && !isIdentityHeaderDefault(value)) {
    return `must not be ${value}, one of the forwarded headers (X-Forwarded-*) the gateway manages; of those only its identity header names may be used (${IDENTITY_HEADER_DEFAULTS.join(', ')})`
  }
  return undefined
}

function checkSecret(value: string): string | undefined {
  return Buffer.byteLength(value, 'utf8') < MIN_SECRET_BYTES ? `must be at least ${MIN_SECRET_BYTES} bytes` : undefined
}

function checkRedisUrl(value: string): string | undefined {
  const message = 'must be a redis:// or rediss:// URL'
  if (INVISIBLE.test(value) || !/^rediss?:\/\/./i.test(value) || !URL.canParse(value)) return message
  return new URL(value).hostname === '' ? message : undefined
}

// A Redis node: host and port both (Redis has no default port a cluster or sentinel list could
// rely on), parsed by session/redis-client.ts (parseHostPort).
function checkHostPort(value: string): string | undefined {
  const message = 'must be host:port (a host name or IP address, and a port from 1 to 65535)'
  if (!/:\d+$/.test(value)) return message
  return isHostWithPort(value) ? undefined : message
}

function checkEmail(value: string): string | undefined {
  const [local = '', domain, ...rest] = value.split('@')
  const valid = rest.length === 0 && domain !== undefined && local !== '' && !INVISIBLE.test(local) && isHostname(domain)
  return valid ? undefined : 'must be an email address'
}

// `.example.com` stands for the subdomains of example.com (src/access/allow.ts).
function checkEmailDomain(value: string): string | undefined {
  if (value.includes('@')) return 'must be a domain without @'
  if (value.includes('*')) return 'must not contain wildcards; write .example.com for the subdomains of example.com'
  return isHostname(value.replace(/^\./, '')) ? undefined : 'must be a domain name'
}

function checkCookieDomain(value: string): string | undefined {
  return isHostname(value.replace(/^\./, '')) ? undefined : 'must be a domain name (no scheme, port or path)'
}

function checkListenHost(value: string): string | undefined {
  return isIP(value) !== 0 || isHostname(value) ? undefined : 'must be an IP address or a host name'
}

function checkPrivateKey(value: string): string | undefined {
  try {
    parsePrivateKey(value)
    return undefined
  } catch (err) {
    if (err instanceof PrivateKeyError) return err.message
    throw err
  }
}

// RFC 8707 2: a resource indicator is an absolute URI (RFC 3986 4.3) without a fragment; it is
// sent as it is written, so only printable ASCII without spaces.
function checkResourceUri(value: string): string | undefined {
  if (!/^[\x21-\x7e]+$/.test(value) || !/^[A-Za-z][A-Za-z0-9+.-]*:/.test(value) || !URL.canParse(value)) return 'must be an absolute URI'
  return value.includes('#') ? 'must not have a fragment (RFC 8707)' : undefined
}

// The claim mapping's owner parses paths; its message says what is wrong without the value.
function checkClaimPath(value: string): string | undefined {
  try {
    parseClaimPath(value)
    return undefined
  } catch (err) {
    return `must be a claim path: ${(err as Error).message}`
  }
}

export const FORMATS: Readonly<Record<string, FormatCheck>> = {
  'http-url': httpUrl(() => undefined),
  'base-url': httpUrl(noQuery),
  'issuer-url': httpUrl(noQuery),
  'http-origin': httpUrl(checkOrigin),
  'ip-or-cidr': checkIpOrCidr,
  host: checkHost,
  'allowed-host': checkAllowedHost,
  'path-prefix': checkPathPrefix,
  'redirect-path': checkRedirectPath,
  // The proxy's matcher owns the glob rules (a safe, linear-time subset).
  'path-glob': globProblem,
  // The access module owns what a path regex may be (linear-time, anchored, ASCII).
  'path-regex': regexProblem,
  'identity-header': checkHeaderName,
  'cookie-secret': checkSecret,
  'cookie-domain': checkCookieDomain,
  'redis-url': checkRedisUrl,
  'host-port': checkHostPort,
  'email-address': checkEmail,
  'email-domain': checkEmailDomain,
  'listen-host': checkListenHost,
  'private-key': checkPrivateKey,
  'resource-uri': checkResourceUri,
  'claim-path': checkClaimPath,
}
