import * as jose from 'jose'
import { systemClock, type Clock } from '../lib/clock.js'
import { isAsymmetric } from './algorithms.js'

// Security Event Tokens (RFC 8417) from a Shared Signals transmitter (OpenID Shared Signals
// Framework 1.0, section 4: the SET profile), validated before any event in them is acted upon.
// Every refusal carries the RFC 8935 section 2.4 error code the receiver answers with (push) or
// reports in `setErrs` (RFC 8936 section 2.4, poll):
//
// - invalid_request: not a JWT, `typ` not secevent+jwt (SSF 1.0 4.1.1; RFC 8417 2.3 explicit
//   typing keeps a SET from passing as an ID or access token), `iat` or `jti` missing, `events`
//   not an object with exactly one event (SSF 1.0 4.1.8), `exp` present and past;
// - invalid_key: the signature does not verify with the transmitter's JWKS (its `jwks_uri`), or
//   the algorithm is `none` or symmetric (RFC 8417 5.1: keyed with public material anyone holds);
// - invalid_issuer: `iss` is not the transmitter's issuer (SSF 1.0 4.1.2);
// - invalid_audience: `aud` does not name the gateway (SSF 1.0 4.1.3).
//
// What the event says (its subject, its type) is judged afterwards (ssf-event.ts): a well-formed
// SET of an unknown type is accepted and ignored (RFC 8935 2.2).

/** RFC 8935 section 2.4 error codes (the IANA "Security Event Token Error Codes" registry). */
export type SetErrorCode = 'invalid_request' | 'invalid_key' | 'invalid_issuer' | 'invalid_audience' | 'authentication_failed' | 'access_denied'

/** A SET that must not be acted upon; `code` is the RFC 8935 error code to answer with. */
export class SetError extends Error {
  override readonly name = 'SetError'
  readonly code: SetErrorCode

  constructor(code: SetErrorCode, message: string) {
    super(message)
    this.code = code
  }
}

/**
 * How old (by `iat`) a SET may be. Poll delivery may hold events at the transmitter for a while
 * (RFC 8936 leaves retention to it), so this is longer than a logout token's five minutes; it is
 * also how long a `jti` is remembered by the replay guard.
 */
export const SET_MAX_AGE_SECONDS = 24 * 60 * 60

export interface SetContext {
  /** The transmitter's `issuer` (its configuration metadata). */
  issuer: string
  /** What `aud` must contain (ssf.audience, default the provider's clientId). */
  audience: string
  /** The transmitter's key for a JWS header (ProviderKeys.getKey over its jwks_uri). */
  getKey: jose.JWTVerifyGetKey
  clockToleranceSeconds: number
  clock?: Clock
}

export interface VerifiedSet {
  jti: string
  /** The one event: its type URI and its payload. */
  type: string
  event: Record<string, unknown>
  /** The top-level `sub_id` (SSF 1.0 4.1.5), when present. */
  subId: unknown
  /** Epoch seconds after which this SET could no longer be accepted: how long its jti must be remembered. */
  acceptableUntil: number
  /** Its `iat` (RFC 8417 2.2), epoch seconds: when the transmitter issued it. */
  issuedAt: number
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function headerRules(token: string): void {
  let header: jose.ProtectedHeaderParameters
  try {
    header = jose.decodeProtectedHeader(token)
  } catch {
    throw new SetError('invalid_request', 'the body is not a SET (a signed JWT)')
  }
  // Checked before any key lookup: a refused algorithm never causes a JWKS refetch.
  if (!isAsymmetric(header.alg)) throw new SetError('invalid_key', `the SET is signed with ${String(header.alg)}, not an asymmetric algorithm`)
  const typ = header.typ?.toLowerCase().replace(/^application\//, '')
  if (typ !== 'secevent+jwt') throw new SetError('invalid_request', `the typ header is ${String(header.typ)}, not secevent+jwt`)
}

/** The RFC 8935 code of a jose verification failure. */
function codeOf(err: jose.errors.JOSEError): SetErrorCode {
  if (err instanceof jose.errors.JWTClaimValidationFailed) {
    if (err.claim === 'iss') return 'invalid_issuer'
    if (err.claim === 'aud') return 'invalid_audience'
    return 'invalid_request'
  }
  if (err instanceof jose.errors.JWTExpired) return 'invalid_request'
  if (
    err instanceof jose.errors.JWSSignatureVerificationFailed ||
    err instanceof jose.errors.JWKSNoMatchingKey ||
    err instanceof jose.errors.JWKSMultipleMatchingKeys ||
    err instanceof jose.errors.JOSEAlgNotAllowed ||
    err instanceof jose.errors.JOSENotSupported
  ) {
    return 'invalid_key'
  }
  return 'invalid_request'
}

/**
 * The SET's one event and its jti when the token keeps every rule above; throws SetError naming
 * the RFC 8935 code otherwise. Errors that are not the token's fault (the transmitter's keys
 * cannot be fetched) propagate unchanged.
 */
export async function verifySet(token: string, ctx: SetContext): Promise<VerifiedSet> {
  headerRules(token)
  const nowMs = (ctx.clock ?? systemClock).now()
  let payload: jose.JWTPayload
  try {
    ;({ payload } = await jose.jwtVerify(token, ctx.getKey, {
      issuer: ctx.issuer,
      audience: ctx.audience,
      clockTolerance: ctx.clockToleranceSeconds,
      maxTokenAge: SET_MAX_AGE_SECONDS,
      requiredClaims: ['iat'],
      currentDate: new Date(nowMs),
    }))
  } catch (err) {
    if (!(err instanceof jose.errors.JOSEError)) throw err
    throw new SetError(codeOf(err), `the SET is refused: ${err.message}`)
  }
  // RFC 8417 2.2: jti is required, the handle of replay detection (and of poll acknowledgements).
  if (typeof payload.jti !== 'string' || payload.jti === '') throw new SetError('invalid_request', 'the SET has no jti')
  const events: unknown = payload.events
  if (!isObject(events)) throw new SetError('invalid_request', 'the SET has no events object')
  const types = Object.keys(events)
  // SSF 1.0 4.1.8: exactly one event per SET.
  const [type] = types
  const event = type === undefined ? undefined : events[type]
  if (types.length !== 1 || type === undefined || !isObject(event)) throw new SetError('invalid_request', 'the SET must carry exactly one event, an object')
  const iat = payload.iat as number
  const until = Math.min(iat + SET_MAX_AGE_SECONDS, payload.exp ?? Number.POSITIVE_INFINITY) + ctx.clockToleranceSeconds
  return { jti: payload.jti, type, event, subId: payload.sub_id, acceptableUntil: until, issuedAt: iat }
}
