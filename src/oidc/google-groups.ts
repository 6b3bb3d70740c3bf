import { readFileSync } from 'node:fs'
import type { KeyObject } from 'node:crypto'
import * as jose from 'jose'
import { GatewayError } from '../contract/errors.js'
import type { Clock } from '../lib/clock.js'
import { describeFsError } from '../lib/fs-errors.js'
import { isInlineKey, type ParsedKey, parsePrivateKey, PrivateKeyError } from '../keys/private-key.js'
import type { GoogleGroupsConfig } from '../options/types.js'
import { apiCall, type ApiAnswer, isRecord, jsonOf } from './group-api.js'

// Google Workspace groups (provider.claimSources.googleGroups), what oauth2-proxy's
// `--google-group`, `--google-admin-email` and `--google-service-account-json` do: a Google ID
// token carries no groups, so the user's groups are read from the Admin SDK Directory API by a
// service account with domain-wide delegation acting as an administrator.
//
// The rules played, each from Google's documentation:
// - "Using OAuth 2.0 for Server to Server Applications"
//   (https://developers.google.com/identity/protocols/oauth2/service-account), RFC 7523's JWT
//   bearer grant: a JWT signed RS256 with the service account's private key (its `kid` the key's
//   `private_key_id`), claims `iss` (the service account's email), `scope` (space-delimited),
//   `aud` ("always https://oauth2.googleapis.com/token"), `exp` ("a maximum of 1 hour after the
//   issued time"), `iat`, and `sub` ("the email address of the user for which the application is
//   requesting delegated access"); POSTed form-encoded as
//   `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<JWT>`; the answer has
//   `access_token` and `expires_in` (an hour). Refusals are RFC 6749 5.2 errors: `invalid_grant`
//   (a bad signature, a bad `iat`/`exp`, an unknown `sub`) and `unauthorized_client` ("Client is
//   unauthorized to retrieve access tokens using this method, or client not authorized for any of
//   the scopes requested": the domain-wide delegation of the scope is missing).
// - "Method: groups.list" (https://developers.google.com/workspace/admin/directory/reference/rest/v1/groups/list):
//   GET https://admin.googleapis.com/admin/directory/v1/groups with `userKey` (the user's email:
//   "If using the userKey, the list will only contain the groups the user is a direct member
//   of"), `maxResults` ("Maximum allowed value is 200"), `pageToken` from the previous page's
//   `nextPageToken`; the answer `{ kind, etag, groups: [Group], nextPageToken }`, `groups` absent
//   when there are none, each Group with its `email`. Scope
//   https://www.googleapis.com/auth/admin.directory.group.readonly.
// - Errors ("Directory API: Limits and Quotas",
//   https://developers.google.com/workspace/admin/directory/v1/limits, and the error format,
//   https://cloud.google.com/apis/design/errors): `{ "error": { "code", "message", "errors":
//   [{ "domain", "reason" }], "status" } }`; 403 `userRateLimitExceeded`, `rateLimitExceeded` or
//   `quotaExceeded`, and 429, are "slow down" answers, retried with backoff (group-api.ts); 401 is
//   a token no longer valid (read a new one, once); any other 403 a delegation or an
//   administrator without the privilege.
//
// The service account's token is cached until SERVICE_TOKEN_MARGIN_MS before it expires (one
// entry: one key, one administrator, one scope); concurrent sign-ins share one token request.
// Groups are never cached: each sign-in and refresh reads them anew. A lookup that fails fails the
// sign-in or refresh (502): a session is never admitted on groups that could not be read.

export const DIRECTORY_GROUP_SCOPE = 'https://www.googleapis.com/auth/admin.directory.group.readonly'
const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer'
/** Google's longest assertion lifetime. */
const ASSERTION_LIFETIME_SECONDS = 3600
/** A cached service token is renewed this long before it expires. */
export const SERVICE_TOKEN_MARGIN_MS = 60_000
/** groups.list's largest page. */
const MAX_RESULTS = 200
/** Pages read at most: 5,000 direct groups. */
export const MAX_DIRECTORY_PAGES = 25
/** Google's rate-limit reasons on a 403 (Directory API: Limits and Quotas). */
const RATE_LIMIT_REASONS: ReadonlySet<string> = new Set(['userRateLimitExceeded', 'rateLimitExceeded', 'quotaExceeded'])

/** What the gateway reads of a service account's JSON key ("Create and delete service account keys", https://cloud.google.com/iam/docs/keys-create-delete). */
export interface ServiceAccount {
  clientEmail: string
  /** Its RSA key, parsed once (keys/private-key.ts); Google signs service account assertions with RS256 only. */
  privateKey: KeyObject
  privateKeyId: string | undefined
}

/** A service account JSON key (`"type": "service_account"`, `client_email`, `private_key`), or what is wrong with it. */
export function parseServiceAccount(text: string): ServiceAccount | string {
  const parsed = jsonOf(text)
  if (!isRecord(parsed)) return 'is not JSON: expected the JSON key Google gives for a service account'
  if (parsed.type !== 'service_account') return 'is not a service account key ("type" must be "service_account")'
  if (typeof parsed.client_email !== 'string' || parsed.client_email === '') return 'has no client_email'
  if (typeof parsed.private_key !== 'string') return 'has no private_key'
  // parsePrivateKey reads a value that looks like a path as a file: a key document names none.
  if (!isInlineKey(parsed.private_key)) return 'has a private_key that is not a key (Google writes the PEM text there)'
  let key: ParsedKey
  try {
    key = parsePrivateKey(parsed.private_key)
  } catch (err) {
    if (err instanceof PrivateKeyError) return `has a private_key that ${err.message}`
    throw err
  }
  if (key.kind !== 'rsa') return 'has a private_key that is not an RSA key (Google signs service account assertions with RS256)'
  return {
    clientEmail: parsed.client_email,
    privateKey: key.key,
    privateKeyId: typeof parsed.private_key_id === 'string' ? parsed.private_key_id : undefined,
  }
}

/** The service account's key text, from its file or its environment variable, or `{ why }` it cannot be had. */
export function serviceAccountText(
  config: Pick<GoogleGroupsConfig, 'serviceAccountKeyFile' | 'serviceAccountKeyEnv'>,
  env: Readonly<Record<string, string | undefined>>,
): string | { why: string } {
  if (config.serviceAccountKeyEnv !== undefined) {
    const text = env[config.serviceAccountKeyEnv]
    return text === undefined || text === '' ? { why: `environment variable ${config.serviceAccountKeyEnv} is not set` } : text
  }
  if (config.serviceAccountKeyFile === undefined) return { why: 'no key: serviceAccountKeyFile or serviceAccountKeyEnv is required' }
  try {
    return readFileSync(config.serviceAccountKeyFile, 'utf8')
  } catch (err) {
    return { why: `${config.serviceAccountKeyFile} cannot be read (${describeFsError(err)})` }
  }
}

/** The URL of groups.list's page for `userKey`. */
export function groupsListUrl(directoryUrl: string, userKey: string, pageToken: string | undefined): string {
  const url = new URL(`${directoryUrl.replace(/\/+$/, '')}/admin/directory/v1/groups`)
  url.searchParams.set('userKey', userKey)
  url.searchParams.set('maxResults', String(MAX_RESULTS))
  if (pageToken !== undefined) url.searchParams.set('pageToken', pageToken)
  return url.href
}

interface ServiceToken {
  accessToken: string
  expiresAt: number
}

/** One provider's Directory API reader (claim-sources.ts holds one per provider). */
export class GoogleGroups {
  readonly #config: GoogleGroupsConfig
  readonly #account: ServiceAccount
  readonly #timeoutMs: number
  readonly #clock: Clock
  /** The one cached service token, or the request for it in flight. */
  #token: Promise<ServiceToken> | undefined

  constructor(config: GoogleGroupsConfig, account: ServiceAccount, timeoutMs: number, clock: Clock) {
    this.#config = config
    this.#account = account
    this.#timeoutMs = timeoutMs
    this.#clock = clock
  }

  /** The email addresses of the groups `email` is a direct member of. Throws GatewayError provider_unavailable. */
  async groupsOf(email: string): Promise<string[]> {
    const groups: string[] = []
    let pageToken: string | undefined
    let renewed = false
    for (let pages = 1; ; pages++) {
      if (pages > MAX_DIRECTORY_PAGES) throw googleFailure(`the Directory API listed more than ${MAX_DIRECTORY_PAGES} pages of groups`)
      const token = await this.#serviceToken()
      const answer = await apiCall({
        url: groupsListUrl(this.#config.directoryUrl, email, pageToken),
        headers: { authorization: `Bearer ${token.accessToken}`, accept: 'application/json' },
        timeoutMs: this.#timeoutMs,
        fail: googleFailure,
        throttled: (a) => a.status === 429 || (a.status === 403 && RATE_LIMIT_REASONS.has(errorReason(a) ?? '')),
      })
      if (answer.status === 401 && !renewed) {
        // A token revoked or expired early: read a new one, once per lookup.
        renewed = true
        this.#forget()
        pages--
        continue
      }
      if (answer.status !== 200) throw googleFailure(directoryRefusal(answer))
      const page = groupsPage(answer.body)
      if (page === undefined) throw googleFailure('the Directory API answered something other than a list of groups')
      groups.push(...page.emails)
      if (page.next === undefined) break
      pageToken = page.next
    }
    return [...new Set(groups)]
  }

  #forget(): void {
    this.#token = undefined
  }

  /** The cached service token while it has more than SERVICE_TOKEN_MARGIN_MS left, else a new one. */
  async #serviceToken(): Promise<ServiceToken> {
    const held = this.#token
    if (held !== undefined) {
      const token = await held.catch(() => undefined)
      if (token !== undefined && token.expiresAt - SERVICE_TOKEN_MARGIN_MS > this.#clock.now()) return token
      // Another lookup already asked for a new one meanwhile: share it.
      if (this.#token !== undefined && this.#token !== held) return this.#serviceToken()
    }
    const request = this.#requestToken()
    this.#token = request
    // A failed request is not cached: the next sign-in asks again.
    request.catch(() => {
      if (this.#token === request) this.#token = undefined
    })
    return request
  }

  async #requestToken(): Promise<ServiceToken> {
    // Google judges iat and exp by real time, not by the gateway's clock (lib/clock.ts).
    const now = Math.floor(Date.now() / 1000)
    const assertion = await new jose.SignJWT({ scope: DIRECTORY_GROUP_SCOPE })
      .setProtectedHeader({ alg: 'RS256', typ: 'JWT', ...(this.#account.privateKeyId === undefined ? {} : { kid: this.#account.privateKeyId }) })
      .setIssuer(this.#account.clientEmail)
      .setSubject(this.#config.adminEmail)
      .setAudience(this.#config.tokenUrl)
      .setIssuedAt(now)
      .setExpirationTime(now + ASSERTION_LIFETIME_SECONDS)
      .sign(this.#account.privateKey)
    const answer = await apiCall({
      url: this.#config.tokenUrl,
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: new URLSearchParams({ grant_type: JWT_BEARER_GRANT, assertion }).toString(),
      timeoutMs: this.#timeoutMs,
      fail: googleFailure,
      throttled: (a) => a.status === 429,
    })
    const parsed = jsonOf(answer.body)
    if (answer.status !== 200) throw googleFailure(tokenRefusal(answer.status, parsed, this.#account.clientEmail))
    if (!isRecord(parsed) || typeof parsed.access_token !== 'string' || parsed.access_token === '') {
      throw googleFailure("Google's token endpoint answered without an access_token")
    }
    const expiresIn = typeof parsed.expires_in === 'number' && parsed.expires_in > 0 ? parsed.expires_in : ASSERTION_LIFETIME_SECONDS
    return { accessToken: parsed.access_token, expiresAt: this.#clock.now() + expiresIn * 1000 }
  }
}

/** RFC 6749 5.2's refusal in an operator's words, Google's two usual causes named. */
function tokenRefusal(status: number, parsed: unknown, clientEmail: string): string {
  const error = isRecord(parsed) && typeof parsed.error === 'string' ? parsed.error : undefined
  const description = isRecord(parsed) && typeof parsed.error_description === 'string' ? `: ${parsed.error_description}` : ''
  if (error === 'unauthorized_client') {
    return `Google's token endpoint refused the service account ${clientEmail} (unauthorized_client${description}): grant its client ID domain-wide delegation of the scope ${DIRECTORY_GROUP_SCOPE} in the Admin console`
  }
  if (error === 'invalid_grant') {
    return `Google's token endpoint refused the assertion (invalid_grant${description}): check adminEmail, that the key is not revoked, and the clock`
  }
  return `Google's token endpoint answered HTTP ${status}${error === undefined ? '' : ` (${error}${description})`}`
}

function directoryRefusal(answer: ApiAnswer): string {
  const reason = errorReason(answer)
  const said = reason === undefined ? '' : ` (${reason})`
  if (answer.status === 401) return `the Directory API refused the service token twice (401${said})`
  if (answer.status === 403)
    return `the Directory API refused (403${said}): adminEmail must be an administrator allowed to read groups, and the delegation must grant ${DIRECTORY_GROUP_SCOPE}`
  return `the Directory API answered HTTP ${answer.status}${said}`
}

/** The first `errors[].reason` of Google's error format, if any. */
function errorReason(answer: ApiAnswer): string | undefined {
  const parsed = jsonOf(answer.body)
  if (!isRecord(parsed) || !isRecord(parsed.error) || !Array.isArray(parsed.error.errors)) return undefined
  const first: unknown = parsed.error.errors[0]
  return isRecord(first) && typeof first.reason === 'string' ? first.reason : undefined
}

function groupsPage(body: string): { emails: string[]; next: string | undefined } | undefined {
  const parsed = jsonOf(body)
  if (!isRecord(parsed)) return undefined
  const groups = parsed.groups ?? []
  if (!Array.isArray(groups)) return undefined
  const emails: string[] = []
  for (const group of groups as unknown[]) {
    if (!isRecord(group) || typeof group.email !== 'string') return undefined
    emails.push(group.email)
  }
  const next = parsed.nextPageToken
  if (next !== undefined && (typeof next !== 'string' || next === '')) return undefined
  return { emails, next }
}

function googleFailure(why: string, cause?: unknown): GatewayError {
  return new GatewayError('provider_unavailable', `the user's Google groups could not be read: ${why}`, cause === undefined ? {} : { cause })
}

/** The service account of `config`, read once at start (cross-key/group-sources.ts has refused a configuration where it cannot be). */
export function loadServiceAccount(config: GoogleGroupsConfig, env: Readonly<Record<string, string | undefined>>): ServiceAccount {
  const text = serviceAccountText(config, env)
  const account = typeof text === 'string' ? parseServiceAccount(text) : `cannot be had: ${text.why}`
  if (typeof account === 'string') throw new GatewayError('provider_misconfigured', `provider.claimSources.googleGroups: the service account key ${account}`)
  return account
}
