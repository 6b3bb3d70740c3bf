import * as jose from 'jose'
import type { SubjectSelector } from '../contract/identity.js'
import { systemClock, type Clock } from '../lib/clock.js'
import { isAsymmetric } from './algorithms.js'

// Logout tokens of OpenID Connect Back-Channel Logout 1.0, validated per its section 2.6. Each
// rule below is a named check, and a refused token names the one it broke (for the log and the
// 400 the provider receives). The provider signs logout tokens with the keys and algorithms of
// its ID tokens (2.4), so the same algorithms are accepted: asymmetric only, never `none`.

export const BACKCHANNEL_LOGOUT_EVENT = 'http://schemas.openid.net/event/backchannel-logout'

/**
 * How old (by `iat`) a logout token may be, clock tolerance aside. The spec encourages providers
 * to issue logout tokens that expire within two minutes (section 4) and they deliver them at
 * once; five minutes leaves room for a retry. It also bounds how long a `jti` is remembered when
 * the token carries no `exp`.
 */
export const LOGOUT_TOKEN_MAX_AGE_SECONDS = 300

/** `typ` header values accepted (without `application/`): the spec's own, and `JWT` (Keycloak before 25). */
const LOGOUT_TOKEN_TYPS = new Set(['logout+jwt', 'jwt'])

export type LogoutTokenCheck = 'malformed' | 'alg' | 'typ' | 'signature' | 'iss' | 'aud' | 'iat' | 'exp' | 'jti' | 'events' | 'sid_sub' | 'nonce'

/** A logout token that breaks a rule of section 2.6; `check` names the rule. */
export class LogoutTokenError extends Error {
  override readonly name = 'LogoutTokenError'
  readonly check: LogoutTokenCheck

  constructor(check: LogoutTokenCheck, message: string) {
    super(message)
    this.check = check
  }
}

export interface LogoutTokenContext {
  issuer: string
  clientId: string
  /** The algorithms the provider's ID tokens may be signed with (OidcClient.idTokenAlgorithms). */
  algorithms: readonly string[]
  clockToleranceSeconds: number
  /** The provider's key for a JWS header (ProviderKeys.getKey: refetches once for an unknown kid). */
  getKey: jose.JWTVerifyGetKey
  /**
   * What the token's iat and exp are judged by; the system clock unless a test sets one. The
   * gateway passes none: a logout token is the provider's, judged on real time like its ID tokens.
   */
  clock?: Clock
}

export interface LogoutToken {
  jti: string
  /** The sessions to end: those of `sid` (with `sub` when the token names both), else every session of `sub`. */
  selector: SubjectSelector
  /** Epoch seconds after which the token could no longer be accepted: how long its `jti` must be remembered. */
  acceptableUntil: number
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function isNonEmptyString(value: unknown): value is string {
  return typeof value === 'string' && value !== ''
}

function headerRules(token: string, ctx: LogoutTokenContext): void {
  let header: jose.ProtectedHeaderParameters
  try {
    header = jose.decodeProtectedHeader(token)
  } catch {
    throw new LogoutTokenError('malformed', 'the logout token is not a JWT')
  }
  // 2.6 step 2 / Core 3.1.3.7 step 6: signed with the algorithm of the ID tokens; `none` and HMAC
  // (keyed with the public key anyone can fetch) would let anyone forge logouts. Checked before
  // any key is looked up, so a refused algorithm never causes a JWKS refetch.
  if (!isAsymmetric(header.alg) || !ctx.algorithms.includes(header.alg)) {
    throw new LogoutTokenError('alg', `the logout token is signed with ${String(header.alg)}, not one of ${ctx.algorithms.join(', ')}`)
  }
  // 2.4 recommends explicit typing; a token typed as something else (an access token, at+jwt) is
  // not a logout token, whatever its claims.
  if (header.typ !== undefined) {
    const typ = header.typ.toLowerCase().replace(/^application\//, '')
    if (!LOGOUT_TOKEN_TYPS.has(typ)) throw new LogoutTokenError('typ', `the typ header ${header.typ} is not logout+jwt`)
  }
}

/** The check a jose verification error stands for. */
function joseCheck(err: jose.errors.JOSEError): LogoutTokenCheck {
  if (err instanceof jose.errors.JWTClaimValidationFailed || err instanceof jose.errors.JWTExpired) {
    const claim = err.claim
    if (claim === 'iss' || claim === 'aud' || claim === 'iat' || claim === 'exp' || claim === 'jti') return claim
    return 'malformed'
  }
  if (
    err instanceof jose.errors.JWSSignatureVerificationFailed ||
    err instanceof jose.errors.JWKSNoMatchingKey ||
    err instanceof jose.errors.JWKSMultipleMatchingKeys
  ) {
    return 'signature'
  }
  return 'malformed'
}

/**
 * The logout token's selector and jti, when it keeps every rule of section 2.6; throws a
 * LogoutTokenError naming the rule it breaks. Errors that are not the token's fault (the
 * provider's keys cannot be fetched) propagate unchanged.
 */
export async function verifyLogoutToken(token: string, ctx: LogoutTokenContext): Promise<LogoutToken> {
  headerRules(token, ctx)
  const nowMs = (ctx.clock ?? systemClock).now()
  const tolerance = ctx.clockToleranceSeconds
  let payload: jose.JWTPayload
  try {
    // 2.6 steps 3 and 4: the signature with the provider's keys; iss, aud and iat as for ID
    // tokens (iat required, not in the future, not older than LOGOUT_TOKEN_MAX_AGE_SECONDS);
    // exp when present (2.4 does not require it; a token without one is bounded by iat).
    ;({ payload } = await jose.jwtVerify(token, ctx.getKey, {
      algorithms: [...ctx.algorithms],
      issuer: ctx.issuer,
      audience: ctx.clientId,
      clockTolerance: tolerance,
      maxTokenAge: LOGOUT_TOKEN_MAX_AGE_SECONDS,
      currentDate: new Date(nowMs),
    }))
  } catch (err) {
    if (!(err instanceof jose.errors.JOSEError)) throw err
    throw new LogoutTokenError(joseCheck(err), `the logout token is refused: ${err.message}`)
  }
  // 2.4: jti identifies the token, for replay detection (2.6 step 9 allows refusing a replay).
  if (!isNonEmptyString(payload.jti)) throw new LogoutTokenError('jti', 'the logout token has no jti')
  // 2.6 step 6: an events claim with the back-channel logout member, an object. This is what
  // tells a logout token from an ID token signed with the same keys for the same audience.
  const events: unknown = payload.events
  if (!isObject(events) || !isObject(events[BACKCHANNEL_LOGOUT_EVENT])) {
    throw new LogoutTokenError('events', `the logout token's events claim has no ${BACKCHANNEL_LOGOUT_EVENT} object`)
  }
  // 2.6 step 5: sid, sub or both; each, when present, a non-empty string (it must name someone).
  const { sid, sub } = payload
  if ((sid !== undefined && !isNonEmptyString(sid)) || (sub !== undefined && !isNonEmptyString(sub)) || (sid === undefined && sub === undefined)) {
    throw new LogoutTokenError('sid_sub', 'the logout token must name a sid, a sub or both, as non-empty strings')
  }
  // 2.6 step 7: no nonce, so that a logout token can never pass as an ID token of a sign-in.
  if (payload.nonce !== undefined) throw new LogoutTokenError('nonce', 'the logout token carries a nonce')

  const iat = payload.iat as number
  const until = Math.min(iat + LOGOUT_TOKEN_MAX_AGE_SECONDS, payload.exp ?? Number.POSITIVE_INFINITY) + tolerance
  const selector: SubjectSelector = isNonEmptyString(sid) ? (isNonEmptyString(sub) ? { sid, sub } : { sid }) : { sub: sub as string }
  return { jti: payload.jti, selector, acceptableUntil: until }
}
