import type { AllowRules } from '../options/types.js'

// Step-up authentication: what an `allow` rule asks of how (and how recently) the user
// authenticated, and whether a set of claims meets it. One pure verdict, used twice: by the access
// decision on every request a step-up rule covers (access/decision.ts), and by the callback on the ID
// token of a sign-in that asked for it (routes/sign-in-flow.ts), so that what was asked for and what
// is accepted afterwards cannot drift apart (a drift would send the browser round the provider
// for ever).
//
// - OpenID Connect Core 3.1.2.1: `acr_values` is a space-separated list "in order of preference";
//   the gateway sends `allow.acr` in the order the operator wrote it. `acr` values are opaque
//   strings (a registry name such as `phr`, a URI, Keycloak's level `"2"`): the gateway cannot
//   know that one is "stronger" than another, so a value passes only when it is listed. An
//   operator who accepts `mfa` and `hwk` lists both.
// - Core 3.1.2.1 `max_age`, 2 `auth_time`: the seconds since the user last authenticated
//   actively. The claim is checked with the provider's clock tolerance (clockToleranceSeconds) at
//   the callback and at every request alike; without `auth_time` nothing is known of the age, so a
//   max-age rule refuses (sessions sealed before step-up existed carry none: they step up once).
//   An implausible one (before 2000, 0 included, or in the future beyond the tolerance) is no
//   better known: it counts as absent (plausibleAuthTime).
// - Core 3.1.3.7 items 11 and 12: a client that requested `acr` or `max_age` checks the ID token's
//   `acr` and `auth_time`. A provider may ignore `acr_values` (it is a voluntary claim request),
//   so the callback checks rather than trusts.
// - RFC 9068 2.2.1 (JWT access tokens) and RFC 7662 (introspection responses) carry the same
//   `acr` and `auth_time` claims: a Bearer token is judged by the same function.

/**
 * The earliest `auth_time` taken for an authentication: 2000-01-01T00:00:00Z. Core 2 defines it
 * as the time the End-User authentication occurred; no OpenID provider (OpenID Connect dates from
 * 2014) authenticated anyone before 2000, so an earlier value, 0 in particular (Glewlwyd 2.7 sends
 * `auth_time: 0`), says the provider does not know, not that the user signed in in 1970.
 */
export const EARLIEST_AUTH_TIME = 946684800

/**
 * `auth_time` as an authentication's time, or undefined when the claim is absent or implausible:
 * not an integer (Core 2: a JSON number of seconds), before EARLIEST_AUTH_TIME, or later than now
 * with the clock tolerance (an authentication that has not happened yet). Implausible means
 * unknown: a max-age rule then fails closed (as without the claim), and no header carries it.
 */
export function plausibleAuthTime(value: unknown, nowSeconds: number, toleranceSeconds: number): number | undefined {
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) return undefined
  if (value < EARLIEST_AUTH_TIME || value > nowSeconds + toleranceSeconds) return undefined
  return value
}

/** What a step-up rule asks for: `acrValues` most preferred first, `maxAge` in seconds. */
export interface StepUpRequirement {
  readonly acrValues?: readonly string[]
  readonly maxAge?: number
}

/** Why claims fall short of a requirement: no accepted `acr`, or no `auth_time` recent enough. */
export type StepUpShortfall = 'acr' | 'auth_time'

/** The step-up part of `allow`, or undefined when it asks for none (the common case: nothing to check). */
export function stepUpRequirementOf(rules: Pick<AllowRules, 'acr' | 'maxAuthAgeSeconds'>): StepUpRequirement | undefined {
  const acr = rules.acr !== undefined && rules.acr.length > 0 ? rules.acr : undefined
  const maxAge = rules.maxAuthAgeSeconds
  if (acr === undefined && maxAge === undefined) return undefined
  return { ...(acr === undefined ? {} : { acrValues: acr }), ...(maxAge === undefined ? {} : { maxAge }) }
}

/**
 * What `claims` lack to meet `requirement` at `nowSeconds` (epoch seconds), or undefined when they
 * meet it. `toleranceSeconds`: the provider's clock skew allowance, added to `maxAge`.
 */
export function stepUpShortfall(
  claims: Readonly<Record<string, unknown>>,
  requirement: StepUpRequirement,
  nowSeconds: number,
  toleranceSeconds: number,
): StepUpShortfall | undefined {
  const { acrValues, maxAge } = requirement
  if (acrValues !== undefined) {
    const acr = Object.hasOwn(claims, 'acr') ? claims.acr : undefined
    if (typeof acr !== 'string' || !acrValues.includes(acr)) return 'acr'
  }
  if (maxAge !== undefined) {
    // An auth_time in the future would otherwise be younger than any max age.
    const authTime = plausibleAuthTime(Object.hasOwn(claims, 'auth_time') ? claims.auth_time : undefined, nowSeconds, toleranceSeconds)
    if (authTime === undefined || nowSeconds - authTime > maxAge + toleranceSeconds) return 'auth_time'
  }
  return undefined
}

/** The authorization request parameters of a step-up sign-in (OpenID Connect Core 3.1.2.1). */
export function stepUpParameters(requirement: StepUpRequirement): Record<string, string> {
  const params: Record<string, string> = {}
  if (requirement.acrValues !== undefined) params.acr_values = requirement.acrValues.join(' ')
  if (requirement.maxAge !== undefined) params.max_age = String(requirement.maxAge)
  return params
}
