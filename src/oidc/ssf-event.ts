import { isObject, type VerifiedSet } from './ssf-set.js'

// What a verified SET asks of the gateway (a pure verdict; routes/ssf-events.ts acts on it).
//
// Events (OpenID CAEP 1.0 section 3; SSF 1.0 section 8.1.4 and 8.1.5):
// - session-revoked (CAEP 3.1): end the subject's sessions;
// - credential-change (CAEP 3.3): end them, or nothing (ssf.credentialChange);
// - token-claims-change (CAEP 3.2): the claims the provider issued changed; the subject's sessions
//   take fresh tokens and claims at their next request;
// - verification (SSF 8.1.4): the answer to a verification request, carrying its `state`;
// - stream-updated (SSF 8.1.5): the transmitter changed the stream's status.
// Any other type is ignored (RFC 8935 2.2: the receiver accepts a SET it does not act upon).
//
// Subjects (SSF 1.0 section 3, RFC 9493): the SET's top-level `sub_id`, or the event's own
// `subject` member (SSF 1.0 3.1.1, CAEP events before SSF 1.0). Formats understood:
// - iss_sub (RFC 9493 3.2.5): the user `sub` of the issuer `iss`, which must be the stream's own
//   provider's: a transmitter speaks for its own provider only (SSF 1.0 4.1.2), and a `sub` is
//   unique only within its issuer (RFC 9493 3.2.5, OpenID Connect Core 2), so another issuer's
//   subject (also inside `complex`) names nobody this transmitter may end (foreignIssuer);
// - email (RFC 9493 3.2.2): sessions whose `email` claim is that address (found by the memory and
//   Redis stores, refused through its revocation list by the cookie store: see
//   docs/features/shared-signals.md);
// - opaque (RFC 9493 3.2.4): the `sub` at the stream's own provider (a transmitter that is the
//   provider names its users by the `sub` it issues);
// - complex (SSF 1.0 3.2): its `user` member (one of the above) and its `session` member (an
//   opaque id, taken as the provider's `sid`, matched together with the user when both are given).
// Any other format names nobody the gateway knows: the event ends nothing.

export const SESSION_REVOKED = 'https://schemas.openid.net/secevent/caep/event-type/session-revoked'
export const CREDENTIAL_CHANGE = 'https://schemas.openid.net/secevent/caep/event-type/credential-change'
export const TOKEN_CLAIMS_CHANGE = 'https://schemas.openid.net/secevent/caep/event-type/token-claims-change'
export const VERIFICATION = 'https://schemas.openid.net/secevent/ssf/event-type/verification'
export const STREAM_UPDATED = 'https://schemas.openid.net/secevent/ssf/event-type/stream-updated'

/** The events the gateway asks its streams for (events_requested, SSF 1.0 8.1.1). */
export const EVENTS_REQUESTED: readonly string[] = [SESSION_REVOKED, CREDENTIAL_CHANGE, TOKEN_CLAIMS_CHANGE]

/** Whom an event names; at least one of sub, email and sid. */
export interface SsfSubject {
  /** iss_sub: the issuer whose `sub` this is; unset: the stream's own provider. */
  iss?: string
  sub?: string
  email?: string
  sid?: string
}

export type SsfAction =
  | { kind: 'end'; subject: SsfSubject }
  | { kind: 'refresh'; subject: SsfSubject }
  | { kind: 'verification'; state: string | undefined }
  | { kind: 'stream_updated'; status: string | undefined }
  | { kind: 'ignore'; reason: 'unknown_event' | 'unknown_subject' | 'configured' }

function text(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined
}

/** A simple (non-complex) subject identifier: iss_sub, email or opaque. */
function simpleSubject(id: Record<string, unknown>): SsfSubject | undefined {
  switch (id.format) {
    case 'iss_sub': {
      const iss = text(id.iss)
      const sub = text(id.sub)
      return iss === undefined || sub === undefined ? undefined : { iss, sub }
    }
    case 'email': {
      const email = text(id.email)
      return email === undefined ? undefined : { email }
    }
    case 'opaque': {
      const sub = text(id.id)
      return sub === undefined ? undefined : { sub }
    }
    default:
      return undefined
  }
}

/** The subject a `sub_id` (or `subject` member) names, or undefined for one the gateway cannot read. */
export function subjectOf(id: unknown): SsfSubject | undefined {
  if (!isObject(id)) return undefined
  if (id.format !== 'complex') return simpleSubject(id)
  const user = isObject(id.user) ? simpleSubject(id.user) : undefined
  const session = isObject(id.session) && id.session.format === 'opaque' ? text(id.session.id) : undefined
  if (user === undefined && session === undefined) return undefined
  return { ...user, ...(session === undefined ? {} : { sid: session }) }
}

export interface EventPolicy {
  credentialChange: 'end' | 'ignore'
}

/** What `set` asks for, under `policy`. */
export function actionOf(set: Pick<VerifiedSet, 'type' | 'event' | 'subId'>, policy: EventPolicy): SsfAction {
  const { type, event } = set
  if (type === VERIFICATION) return { kind: 'verification', state: text(event.state) }
  if (type === STREAM_UPDATED) return { kind: 'stream_updated', status: text(event.status) }
  if (type !== SESSION_REVOKED && type !== CREDENTIAL_CHANGE && type !== TOKEN_CLAIMS_CHANGE) return { kind: 'ignore', reason: 'unknown_event' }
  if (type === CREDENTIAL_CHANGE && policy.credentialChange === 'ignore') return { kind: 'ignore', reason: 'configured' }
  const subject = subjectOf(set.subId ?? event.subject)
  if (subject === undefined) return { kind: 'ignore', reason: 'unknown_subject' }
  return type === TOKEN_CLAIMS_CHANGE ? { kind: 'refresh', subject } : { kind: 'end', subject }
}

/**
 * The issuer a subject names when it is not `ownIssuer`, the stream's own provider's (SSF 1.0
 * 4.1.2; Back-Channel Logout 1.0 2.6 ties a logout token to its OP the same way): such a subject
 * is ignored, never looked up among the other providers.
 */
export function foreignIssuer(subject: SsfSubject, ownIssuer: string | undefined): string | undefined {
  return subject.iss !== undefined && subject.iss !== ownIssuer ? subject.iss : undefined
}

/**
 * When the event happened, epoch seconds: its `event_timestamp` (CAEP 1.0 section 2, "the time at
 * which the event described by this SET occurred"), else the SET's `iat`; never later than `now`
 * (a transmitter's clock ahead, or a forged future time, would end sessions signed in after the
 * event arrived). The sessions signed in after it are not ended by it: a polled event may come late.
 */
export function eventTime(set: Pick<VerifiedSet, 'event' | 'issuedAt'>, now: number): number {
  const stamp = set.event.event_timestamp
  const time = typeof stamp === 'number' && Number.isFinite(stamp) ? stamp : set.issuedAt
  return Math.min(Math.floor(time), Math.floor(now))
}
