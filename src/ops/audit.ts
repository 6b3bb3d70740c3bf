import { createHash } from 'node:crypto'
import { GatewayError, type ProblemCode } from '../contract/errors.js'
import type { LogoutTokenCheck } from '../oidc/logout-token.js'
import type { SetErrorCode } from '../oidc/ssf-set.js'

// The audit trail: one structured log line per sign-in, refresh, logout, back-channel logout and
// Shared Signals revocation, accepted or refused, in one shape a security team can grep for
// (`"audit":"sign-in"`) and join across events (docs/operations.md, "Audit trail").
//
// What a line may carry, and why no more: OWASP's Logging Cheat Sheet ("Data to exclude": session
// identifiers, access tokens, passwords, keys) and RFC 6750 5.3 say a credential never belongs in
// a log, which outlives the request and is read by more people than the gateway's store. A
// session id is a bearer credential in the memory and Redis stores' cookie, so a line names a
// session only by a digest: a SHA-256 prefix of 96 bits, enough to tell sessions apart and to
// join a sign-in with its refreshes and logout, and no handle on the session (the id carries 256
// random bits: its digest cannot be inverted, nor the id guessed from it). The provider's `sid`
// (OpenID Connect Back-Channel Logout 1.0, 2.4) is a handle on the provider's session and is
// digested the same way, so a sign-in's `sid` equals the back-channel logout's that ends it. An
// address a Shared Signals event names is digested as that event's own line does (routes/
// ssf-events.ts): it keeps the address out of plain sight only, since addresses can be guessed and
// hashed. The lines pass through the logger's redaction (logging.ts) like any other; nothing here
// needs it.

/** The events of the trail, in the order docs/operations.md lists them. */
export const AUDIT_EVENTS = ['sign-in', 'refresh', 'logout', 'backchannel-logout', 'ssf-revocation'] as const
export type AuditEvent = (typeof AUDIT_EVENTS)[number]

/** The fields a line may carry, in the order docs/operations.md lists them. */
export const AUDIT_FIELDS = [
  'audit',
  'outcome',
  'provider',
  'sub',
  'session',
  'sid',
  'email',
  'acr',
  'client',
  'reason',
  'detail',
] as const satisfies ReadonlyArray<keyof AuditLine>

/** The `msg` of every audit line. */
export const AUDIT_MESSAGE = 'audit'

/**
 * Why an event was refused: the problem code the gateway answered with (contract/errors.ts) on its
 * own endpoints; for a provider's push, the rule a logout token broke (oidc/logout-token.ts; a
 * request without one: `logout_token`) or the RFC 8935 error code a SET was refused with
 * (oidc/ssf-set.ts), `jti_replay` for a token or SET received before, `rate_limited` beyond a
 * provider's budget.
 */
export type AuditReason = ProblemCode | LogoutTokenCheck | SetErrorCode | 'logout_token' | 'jti_replay'

export interface AuditLine {
  audit: AuditEvent
  outcome: 'success' | 'refused'
  provider?: string
  sub?: string
  /** A digest of the gateway's session id (logDigest). */
  session?: string
  /** A digest of the provider's session id, the ID token's or logout token's `sid`. */
  sid?: string
  /** A digest of the lowercased address a Shared Signals event named its subject by. */
  email?: string
  acr?: string
  /** The client's address as the gateway trusts it (server.trustedProxies). */
  client?: string
  reason?: AuditReason
  /** Free text about a refusal, for people; match on `reason`. */
  detail?: string
}

/** Who and which session an event is about, as the route knows it. */
export interface AuditSubject {
  provider?: string | undefined
  sub?: string | undefined
  /** The gateway's session id: only its digest is written. */
  sessionId?: string | undefined
  /** The provider's `sid`: only its digest is written. */
  sid?: unknown
  /** An address naming the subject: only its digest is written. */
  email?: string | undefined
  acr?: unknown
}

/** A session as the routes hold it: only these parts of it reach the line. */
export interface AuditedSession {
  id: string
  provider: string
  claims: { sub: string; sid?: unknown; acr?: unknown }
}

/** The logger an audit line is written to (a request's, or the app's). */
export type AuditLogger = { info(fields: object, msg: string): void }

const DIGEST_CHARS = 16

/** A digest of an identifier a line must not carry (96 bits of SHA-256, base64url). */
export function logDigest(value: string): string {
  return createHash('sha256').update(value).digest('base64url').slice(0, DIGEST_CHARS)
}

/** The subject of a session. */
export function sessionSubject(session: AuditedSession): AuditSubject {
  return { provider: session.provider, sub: session.claims.sub, sessionId: session.id, sid: session.claims.sid, acr: session.claims.acr }
}

/** The line of an event: only the fields that have a value, every identifier digested. */
export function auditLine(event: AuditEvent, subject: AuditSubject, client: string | undefined, refusal?: { reason: AuditReason; detail?: string }): AuditLine {
  const line: AuditLine = { audit: event, outcome: refusal === undefined ? 'success' : 'refused' }
  if (subject.provider !== undefined) line.provider = subject.provider
  if (subject.sub !== undefined) line.sub = subject.sub
  if (subject.sessionId !== undefined) line.session = logDigest(subject.sessionId)
  if (typeof subject.sid === 'string') line.sid = logDigest(subject.sid)
  if (subject.email !== undefined) line.email = logDigest(subject.email.toLowerCase())
  if (typeof subject.acr === 'string') line.acr = subject.acr
  if (client !== undefined) line.client = client
  if (refusal !== undefined) {
    line.reason = refusal.reason
    if (refusal.detail !== undefined) line.detail = refusal.detail
  }
  return line
}

/** The stable reason of a thrown refusal: its problem code, else internal_error. */
export function refusalReason(err: unknown): ProblemCode {
  return err instanceof GatewayError ? err.code : 'internal_error'
}

/** The client address of a request that has one (a Fastify request; not a gRPC check's session request). */
export function clientAddress(req: object): string | undefined {
  const ip = (req as { ip?: unknown }).ip
  return typeof ip === 'string' ? ip : undefined
}

/** Writes a success. */
export function auditSuccess(log: AuditLogger, event: AuditEvent, subject: AuditSubject, client: string | undefined): void {
  log.info(auditLine(event, subject, client), AUDIT_MESSAGE)
}

/** Writes a refusal. */
export function auditRefusal(
  log: AuditLogger,
  event: AuditEvent,
  subject: AuditSubject,
  client: string | undefined,
  reason: AuditReason,
  detail?: string,
): void {
  log.info(auditLine(event, subject, client, detail === undefined ? { reason } : { reason, detail }), AUDIT_MESSAGE)
}

/**
 * What the session lifecycle calls after each refresh it redeemed (session/lifecycle.ts
 * RefreshObserver): the request's logger where the request has one, so the line carries its id.
 */
export function refreshAuditor(fallback: AuditLogger): (req: object, session: AuditedSession, refusal?: unknown) => void {
  return (req, session, refusal) => {
    const own = (req as { log?: unknown }).log
    const log = typeof own === 'object' && own !== null && typeof (own as AuditLogger).info === 'function' ? (own as AuditLogger) : fallback
    if (refusal === undefined) auditSuccess(log, 'refresh', sessionSubject(session), clientAddress(req))
    else auditRefusal(log, 'refresh', sessionSubject(session), clientAddress(req), refusalReason(refusal))
  }
}
