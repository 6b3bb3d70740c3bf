import { setTimeout as sleep } from 'node:timers/promises'
import type { GatewayError } from '../contract/errors.js'
import { loggableUrl, MAX_PROVIDER_BODY_BYTES, readLimited } from './fetch.js'
import { throttleDelaySeconds } from './graph-groups.js'

// One bounded call to a group source's REST API (GitLab's projects API, gitlab-projects.ts;
// Google's Directory API and token endpoint, google-groups.ts), and what their answers share:
//
// - Bounded: provider.timeoutMs per request, 1 MiB per answer, no redirect followed (a redirect
//   could carry the user's or the service account's token elsewhere).
// - Throttling waited out, a few times only: RFC 6585 4 (429 Too Many Requests) "MAY include a
//   Retry-After header", which both APIs send ("Rate limits",
//   https://docs.gitlab.com/security/rate_limits/; Google's "Directory API: Limits and Quotas",
//   https://developers.google.com/workspace/admin/directory/v1/limits, asks for exponential
//   backoff). graph-groups.ts's throttleDelaySeconds is the one rule for how long: Retry-After in
//   seconds up to MAX_RETRY_AFTER_SECONDS, else backoff; an HTTP-date or a longer wait is a failure.
// - Every failure is GatewayError provider_unavailable (502): the list of groups could not be
//   read whole, and a sign-in is never admitted on groups that were not read.

/** Throttled answers waited out at most, per call. */
export const MAX_THROTTLE_RETRIES = 3

export interface ApiAnswer {
  status: number
  headers: Headers
  body: string
}

export interface ApiCall {
  url: string
  method?: 'GET' | 'POST'
  headers: Record<string, string>
  body?: string
  timeoutMs: number
  /** The source's failure, from a sentence saying what went wrong. */
  fail: (why: string, cause?: unknown) => GatewayError
  /** Whether an answer says "slow down" (429, and the source's own rate-limit answers). */
  throttled: (answer: ApiAnswer) => boolean
}

/** The answer to `call`, after waiting out at most MAX_THROTTLE_RETRIES throttled ones. */
export async function apiCall(call: ApiCall): Promise<ApiAnswer> {
  for (let attempt = 0; ; attempt++) {
    const answer = await once(call)
    if (!call.throttled(answer)) return answer
    const delay = throttleDelaySeconds(answer.headers.get('retry-after'), attempt)
    if (delay === undefined || attempt >= MAX_THROTTLE_RETRIES)
      throw call.fail(`${loggableUrl(call.url)} throttled the gateway (HTTP ${answer.status}) longer than it waits`)
    await sleep(delay * 1000)
  }
}

async function once(call: ApiCall): Promise<ApiAnswer> {
  let res: Response
  try {
    res = await fetch(call.url, {
      method: call.method ?? 'GET',
      headers: call.headers,
      ...(call.body === undefined ? {} : { body: call.body }),
      redirect: 'manual',
      signal: AbortSignal.timeout(call.timeoutMs),
    })
  } catch (err) {
    throw call.fail(`${loggableUrl(call.url)} could not be reached`, err)
  }
  try {
    return { status: res.status, headers: res.headers, body: await readLimited(res, MAX_PROVIDER_BODY_BYTES) }
  } catch (err) {
    throw call.fail(`${loggableUrl(call.url)} answered too much, or too slowly`, err)
  }
}

/** `body` as JSON, or `undefined` when it is not. */
export function jsonOf(body: string): unknown {
  try {
    return JSON.parse(body) as unknown
  } catch {
    return undefined
  }
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** A claim's groups as a list: a list of strings, or one string (as groupsClaim reads it). */
export function groupList(value: unknown): string[] {
  if (typeof value === 'string') return [value]
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : []
}
