import { failedIdTokenCheck } from './id-token-rules.js'

// An ID token refused on its times (`iat` in the future, `exp` past, `nbf` not reached) is, in
// practice, two clocks that disagree: the provider's and the gateway's. openid-client's words
// ("expiration is past current timestamp") do not say which clock, by how much, or what to change.
// This module names it from what the provider's token response carries anyway: its HTTP `Date`
// header (RFC 9110 6.6.1, a server's clock at the time of the answer, to the second).
//
// It only explains a refusal: a token outside `clockToleranceSeconds` is still refused (OpenID
// Connect Core 3.1.3.7 steps 9 and 10, RFC 7519 4.1.4 and 4.1.5). A measured offset is never used
// to shift the checks: the Date header is not signed, and anyone on the path could choose it.

/** The time claims whose check a clock can fail. */
export type ClockClaim = 'iat' | 'exp' | 'nbf'

const CLOCK_CLAIMS: ReadonlySet<string> = new Set<ClockClaim>(['iat', 'exp', 'nbf'])

/** The time claim an ID token refusal (what the grant threw) is about, or undefined. */
export function clockClaimOf(err: unknown): ClockClaim | undefined {
  const check = failedIdTokenCheck(err)
  return check !== undefined && CLOCK_CLAIMS.has(check) ? (check as ClockClaim) : undefined
}

/**
 * The provider's clock minus the gateway's, in whole seconds, from the `Date` header of an answer
 * received at `receivedAtMs` (epoch milliseconds); undefined without a parseable Date. The header
 * has a resolution of one second and is written before the answer travels: it is exact to a
 * second or two, far finer than any tolerance worth naming. By default the system's clock: the
 * one openid-client judges the ID token's times by (lib/clock.ts), not the gateway's injected one.
 */
export function providerClockOffsetSeconds(date: string | null | undefined, receivedAtMs: number = Date.now()): number | undefined {
  if (date === null || date === undefined) return undefined
  const at = Date.parse(date)
  if (!Number.isFinite(at)) return undefined
  return Math.round((at - receivedAtMs) / 1000)
}

const FAILED: Record<ClockClaim, string> = {
  iat: "the ID token's iat (issued at) is in the future by the gateway's clock",
  exp: "the ID token's exp (expiry) has passed by the gateway's clock",
  nbf: "the ID token's nbf (not before) is in the future by the gateway's clock",
}

/**
 * What a refusal on `claim` means for the operator: which clock is off and by how much (when the
 * provider's Date header gives it), and the key of the tolerance. `toleranceKey` is the
 * configuration path of clockToleranceSeconds for this provider.
 */
export function clockSkewWords(claim: ClockClaim, offsetSeconds: number | undefined, toleranceSeconds: number, toleranceKey: string): string {
  const failed = FAILED[claim]
  if (offsetSeconds === undefined) {
    return `${failed}: the gateway's and the provider's clocks may disagree (the provider's answer had no Date header to measure them by); check both, and ${toleranceKey} (${toleranceSeconds} s)`
  }
  if (Math.abs(offsetSeconds) > toleranceSeconds) {
    const direction = offsetSeconds > 0 ? 'ahead of' : 'behind'
    return `${failed}: the provider's clock is ${Math.abs(offsetSeconds)} s ${direction} the gateway's (by its HTTP Date header), more than ${toleranceKey} (${toleranceSeconds} s) tolerates; set the wrong clock right (NTP)`
  }
  return `${failed}, though the provider's HTTP Date header agrees with the gateway's clock within ${toleranceKey} (${toleranceSeconds} s): the provider puts wrong times in its tokens`
}
