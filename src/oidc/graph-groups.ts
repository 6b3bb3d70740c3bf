import { setTimeout as sleep } from 'node:timers/promises'
import { GatewayError } from '../contract/errors.js'
import { loggableUrl, MAX_PROVIDER_BODY_BYTES, readLimited } from './fetch.js'

// Microsoft Entra ID's group overage: past 200 groups a JWT carries a marker instead of `groups`
// ("Configure group claims for applications by using Microsoft Entra ID",
// https://learn.microsoft.com/entra/identity/hybrid/connect/how-to-connect-fed-group-claims; the
// ID token claims reference names `_claim_names`/`_claim_sources` and `hasgroups`,
// https://learn.microsoft.com/entra/identity-platform/id-token-claims-reference). The groups are
// then read from Microsoft Graph with the user's own delegated token: "List a user's memberships
// (direct and transitive)", GET /me/transitiveMemberOf, cast to microsoft.graph.group, whose least
// privileged delegated permission is User.Read
// (https://learn.microsoft.com/graph/api/user-list-transitivememberof).
//
// Security: the URL in the overage marker (graph.windows.net, retired Azure AD Graph) is never
// fetched: only the configured Graph root is, and a page's @odata.nextLink is followed only on
// that root's origin, so a token's words never choose where the user's access token goes. Every
// answer is bounded (time, size, pages, throttling waits); anything short of the whole list fails
// (502), since a partial list could lack the group an allow rule needs.

/** Graph's largest page for this API ("The default and maximum page sizes are 100 and 999 objects"). */
const PAGE_SIZE = 999
/** Pages followed at most: about 50,000 groups, far past any real membership. */
export const MAX_GRAPH_PAGES = 50
/** Throttled answers (429) waited out at most, per listing. */
export const MAX_GRAPH_RETRIES = 3
/** The longest Retry-After honoured; longer is a failure rather than a sign-in held that long. */
export const MAX_RETRY_AFTER_SECONDS = 10

export interface GraphGroupsOptions {
  /** Graph's root, e.g. https://graph.microsoft.com (a national cloud's: https://graph.microsoft.us). */
  baseUrl: string
  timeoutMs: number
}

/**
 * The first page's URL: the user's transitive memberships, groups only (the OData cast), ids only
 * ($select): directory roles and administrative units are not groups.
 */
export function transitiveGroupsUrl(baseUrl: string): string {
  const root = baseUrl.replace(/\/+$/, '')
  return `${root}/v1.0/me/transitiveMemberOf/microsoft.graph.group?$select=id&$top=${PAGE_SIZE}`
}

/**
 * Seconds to wait before retrying a 429 ("Microsoft Graph throttling guidance",
 * https://learn.microsoft.com/graph/throttling: "Wait the number of seconds specified in the
 * Retry-After header"; without one, back off exponentially). `undefined`: longer than the gateway
 * waits, or a value that is not delay-seconds (RFC 9110 10.2.3; an HTTP-date is not waited for).
 */
export function throttleDelaySeconds(retryAfter: string | null, attempt: number): number | undefined {
  if (retryAfter === null) return Math.min(2 ** attempt, MAX_RETRY_AFTER_SECONDS)
  if (!/^\d{1,6}$/.test(retryAfter.trim())) return undefined
  const seconds = Number(retryAfter.trim())
  return seconds <= MAX_RETRY_AFTER_SECONDS ? seconds : undefined
}

/** Whether `next` (an @odata.nextLink) may be followed: on the configured Graph root's origin only. */
export function followableNextLink(next: string, baseUrl: string): boolean {
  try {
    return new URL(next).origin === new URL(baseUrl).origin
  } catch {
    return false
  }
}

/**
 * The ids of every group the token's user is a member of, directly or through nested groups,
 * from Graph's paged listing ("Paging Microsoft Graph data in your app",
 * https://learn.microsoft.com/graph/paging: follow @odata.nextLink until a page has none).
 * Throws GatewayError `provider_unavailable` (502) when the list cannot be had whole.
 */
export async function graphGroups(accessToken: string, options: GraphGroupsOptions): Promise<string[]> {
  const groups: string[] = []
  let url: string | undefined = transitiveGroupsUrl(options.baseUrl)
  let pages = 0
  let retries = 0
  while (url !== undefined) {
    if (++pages > MAX_GRAPH_PAGES) throw graphFailure(`more than ${MAX_GRAPH_PAGES} pages of groups`)
    const res = await graphGet(url, accessToken, options.timeoutMs)
    if (res.status === 429) {
      const delay = throttleDelaySeconds(res.headers.get('retry-after'), retries)
      await res.body?.cancel()
      if (delay === undefined || ++retries > MAX_GRAPH_RETRIES) throw graphFailure('throttled (429) longer than the gateway waits')
      pages--
      await sleep(delay * 1000)
      continue
    }
    const body = await readLimited(res, MAX_PROVIDER_BODY_BYTES).catch((err: unknown) => {
      throw graphFailure('the answer is too large', err)
    })
    // "Microsoft Graph error responses and resource types" (https://learn.microsoft.com/graph/errors):
    // 401 is a missing, expired or invalid token; 403 a permission the app lacks.
    if (res.status === 401 || res.status === 403) {
      throw graphFailure(
        `refused the access token (${res.status}): the app registration needs the User.Read delegated permission and the sign-in's scopes a Microsoft Graph token`,
      )
    }
    if (res.status !== 200) throw graphFailure(`answered HTTP ${res.status}`)
    const page = parsePage(body)
    if (page === undefined) throw graphFailure('answered something other than a collection of directory objects')
    groups.push(...page.ids)
    if (page.next !== undefined && !followableNextLink(page.next, options.baseUrl)) throw graphFailure('named a next page on another origin')
    url = page.next
  }
  return [...new Set(groups)]
}

async function graphGet(url: string, accessToken: string, timeoutMs: number): Promise<Response> {
  try {
    return await fetch(url, {
      headers: { authorization: `Bearer ${accessToken}`, accept: 'application/json' },
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    })
  } catch (err) {
    throw graphFailure(`could not be reached at ${loggableUrl(url)}`, err)
  }
}

/** A page of a collection: `value`, an array of objects whose `id` is a string, and maybe `@odata.nextLink`. */
function parsePage(body: string): { ids: string[]; next: string | undefined } | undefined {
  let parsed: unknown
  try {
    parsed = JSON.parse(body)
  } catch {
    return undefined
  }
  if (typeof parsed !== 'object' || parsed === null || !('value' in parsed) || !Array.isArray(parsed.value)) return undefined
  const ids: string[] = []
  for (const item of parsed.value as unknown[]) {
    if (typeof item !== 'object' || item === null || !('id' in item) || typeof item.id !== 'string') return undefined
    ids.push(item.id)
  }
  const next = '@odata.nextLink' in parsed ? parsed['@odata.nextLink'] : undefined
  if (next !== undefined && typeof next !== 'string') return undefined
  return { ids, next }
}

function graphFailure(why: string, cause?: unknown): GatewayError {
  return new GatewayError('provider_unavailable', `the user's groups could not be read from Microsoft Graph: it ${why}`, cause === undefined ? {} : { cause })
}
