import { createHash, timingSafeEqual } from 'node:crypto'
import type { FastifyBaseLogger, FastifyInstance, FastifyReply } from 'fastify'
import { GatewayError } from '../contract/errors.js'
import { SSF_EVENTS_PATH } from '../contract/endpoints.js'
import type { JtiReplay } from '../oidc/jti-replay.js'
import { KeysNotLoadedError } from '../oidc/provider-keys.js'
import type { Providers } from '../oidc/providers.js'
import { actionOf, eventTime, foreignIssuer, type SsfAction, type SsfSubject } from '../oidc/ssf-event.js'
import { SetError, verifySet, type SetErrorCode } from '../oidc/ssf-set.js'
import type { SetVerdict, SsfTransmitter } from '../oidc/ssf-transmitter.js'
import { SECURITY_HEADERS } from '../ops/response-headers.js'
import { auditRefusal, auditSuccess, logDigest, type AuditLogger } from '../ops/audit.js'
import { systemClock, type Clock } from '../lib/clock.js'
import { KeyedRateLimit, PROVIDER_PUSH_LIMIT, type RateLimitOptions } from '../lib/rate-limit.js'
import { endSelected, type RevocationList } from '../session/revocation.js'
import type { SessionSelector, SessionStore } from '../session/types.js'

// The Shared Signals receiver (docs/features/shared-signals.md): what a SET from a provider's
// transmitter does to sessions, for both deliveries, and the push endpoint.
//
// POST /api/v1/openid/ssf/events (RFC 8935): the transmitter sends one SET as the body, typed
// application/secevent+jwt (2.1), with the Authorization the gateway registered in its stream
// (SSF 1.0 8.1.1 authorization_header), compared in constant time. Answers (2.2, 2.3, 2.4):
// - 202, no body: the SET was accepted, whether it was acted upon or, a well-formed SET of a type
//   or subject the gateway does not act on, ignored (logged);
// - 400 {"err", "description"}: the SET is refused (ssf-set.ts names the code); a replayed jti is
//   invalid_request (the jti guard of back-channel logout, oidc/jti-replay.ts: replayed, a SET
//   would end again the sessions a user has signed in to since);
// - 401 authentication_failed: no or another Authorization (the transmitter is not known);
//   403 access_denied: the Authorization of a stream that is not pushed to (delivery: poll);
// - 429 with Retry-After: the transmitter pushed more than PROVIDER_PUSH_LIMIT (per provider and
//   replica; RFC 8935 2.3 answers a general HTTP error with its status code, RFC 6585 4), counted
//   once its Authorization matched, so no one else spends its budget; it pushes the SET again;
// - 5xx problem: the gateway failed (keys or store unreachable), so that the transmitter retries.
// Never cached. Never does a refused SET end anything: every check runs before any session is
// touched, and the jti is released again when ending them fails.
//
// A transmitter speaks for its own provider only (SSF 1.0 4.1.2): the sessions an event ends are
// always its provider's, and a subject naming another issuer is ignored (logged at warn). An event
// ends the sessions signed in (and the Bearer tokens issued) at or before its time (ssf-event.ts
// eventTime), not those of a sign-in after it.

/** A SET is a few KiB at most. */
export const MAX_BODY_BYTES = 64 * 1024
const SET_MEDIA_TYPE = 'application/secevent+jwt'

/**
 * Who pushed a SET, for its audit line: the request's logger and client address. A polled SET
 * (RFC 8936) was fetched by the gateway itself: its line has no client and goes to the app's log.
 */
export interface SetDelivery {
  log: AuditLogger
  client?: string
}

/** What receiving one SET came to. */
export type SetOutcome = { kind: 'accepted'; action: SsfAction } | { kind: 'replayed' } | { kind: 'refused'; code: SetErrorCode; description: string }

export interface SsfReceiverOptions {
  providers: Providers
  store: SessionStore
  replay: JtiReplay
  log: Pick<FastifyBaseLogger, 'info' | 'warn'>
  /**
   * The revocation list, for a store that keeps none itself (memory, Redis): the Bearer tokens of
   * the subjects an event ends are refused through it (session/revocation.ts endSelected).
   */
  revocations?: RevocationList
  /** What an event's time is bounded by (default the system's). */
  clock?: Clock
  /** Told of the sessions an event ended, as of `at` (the decision cache is emptied, their WebSockets close). */
  onEnded?: (selector: SessionSelector, at: number) => void
  /** Told that sessions must take fresh claims (the decision cache is emptied). */
  onChanged?: () => void
}

/** Log fields of a subject: never the email address itself (a digest), sid digested as back-channel logout does. */
function subjectFields(subject: SsfSubject): Record<string, string> {
  const fields: Record<string, string> = {}
  if (subject.sub !== undefined) fields.sub = subject.sub
  if (subject.sid !== undefined) fields.sid = logDigest(subject.sid)
  if (subject.email !== undefined) fields.email = logDigest(subject.email.toLowerCase())
  return fields
}

export class SsfReceiver {
  readonly #options: SsfReceiverOptions

  constructor(options: SsfReceiverOptions) {
    this.#options = options
  }

  /**
   * Verifies `token` as a SET of `transmitter` and does what it asks. Throws GatewayError when
   * the gateway cannot tell (keys or store unreachable): the SET was not at fault.
   */
  async receive(transmitter: SsfTransmitter, token: string, delivery?: SetDelivery): Promise<SetOutcome> {
    const { log, replay } = this.#options
    const audit = delivery ?? { log }
    const issuer = transmitter.issuer
    if (issuer === undefined) throw new GatewayError('not_ready', 'the shared signals transmitter is not read yet')
    let set
    try {
      set = await verifySet(token, {
        issuer,
        audience: transmitter.audience,
        getKey: transmitter.keys.getKey,
        clockToleranceSeconds: transmitter.clockToleranceSeconds,
        clock: this.#options.clock ?? systemClock,
      })
    } catch (err) {
      if (err instanceof SetError) {
        auditRefusal(audit.log, 'ssf-revocation', { provider: transmitter.provider }, audit.client, err.code, err.message)
        return { kind: 'refused', code: err.code, description: err.message }
      }
      if (err instanceof KeysNotLoadedError) throw new GatewayError('not_ready', 'the transmitter keys are not loaded yet', { cause: err })
      throw new GatewayError('provider_unavailable', "the transmitter's keys cannot be fetched", { cause: err })
    }
    if (!(await replay.firstUse(issuer, set.jti, set.acceptableUntil))) {
      auditRefusal(audit.log, 'ssf-revocation', { provider: transmitter.provider }, audit.client, 'jti_replay')
      return { kind: 'replayed' }
    }
    const action = actionOf(set, transmitter.config)
    const at = eventTime(set, (this.#options.clock ?? systemClock).now() / 1000)
    try {
      await this.#act(transmitter, action, set.type, at, audit)
    } catch (err) {
      // Not done: the transmitter's retry of this SET must not count as a replay.
      await replay.release(issuer, set.jti)
      throw err
    }
    return { kind: 'accepted', action }
  }

  /** A polled SET's verdict (RFC 8936 2.4): acknowledged when accepted or already processed, else its error. */
  async judge(transmitter: SsfTransmitter, token: string): Promise<SetVerdict> {
    const outcome = await this.receive(transmitter, token)
    return outcome.kind === 'refused' ? { code: outcome.code, description: outcome.description } : undefined
  }

  async #act(transmitter: SsfTransmitter, action: SsfAction, event: string, at: number, audit: SetDelivery): Promise<void> {
    const { log } = this.#options
    const base = { provider: transmitter.provider, event }
    switch (action.kind) {
      case 'ignore':
        log.info({ ...base, outcome: 'ignored', reason: action.reason }, 'shared signals event')
        return
      case 'verification': {
        const verified = transmitter.verified(action.state)
        log.info({ ...base, outcome: verified ? 'verified' : 'ignored', ...(verified ? {} : { reason: 'state' }) }, 'shared signals event')
        return
      }
      case 'stream_updated':
        transmitter.status.status = action.status
        log.info({ ...base, outcome: 'stream_updated', status: action.status }, 'shared signals event')
        return
      case 'end':
      case 'refresh': {
        const foreign = foreignIssuer(action.subject, this.#options.providers.get(transmitter.provider)?.config.issuer)
        if (foreign !== undefined) {
          log.warn(
            { ...base, outcome: 'ignored', reason: 'foreign_issuer', issuer: foreign, ...subjectFields(action.subject) },
            "shared signals event names another provider's subject; ignored",
          )
          return
        }
        const selectors = await this.#selectors(transmitter, action.subject)
        if (selectors === undefined) {
          log.info({ ...base, outcome: 'ignored', reason: 'unknown_subject', ...subjectFields(action.subject) }, 'shared signals event')
          return
        }
        const { store } = this.#options
        // A store that cannot make sessions refresh in place (the cookie store: the claims are in
        // the browser's cookie) ends them: the next sign-in takes the new claims.
        const refreshInPlace = action.kind === 'refresh' && store.expireTokens !== undefined
        for (const selector of selectors) {
          if (refreshInPlace) await store.expireTokens?.(selector)
          else await endSelected(store, this.#options.revocations, selector, at)
        }
        if (refreshInPlace) this.#options.onChanged?.()
        else for (const selector of selectors) this.#options.onEnded?.(selector, at)
        // `provider`: the transmitter's, which is also the one whose sessions ended (#selectors).
        log.info(
          { ...base, outcome: refreshInPlace ? 'refresh' : 'ended', sessions: selectors.length, at, ...subjectFields(action.subject) },
          'shared signals event',
        )
        if (!refreshInPlace) auditSuccess(audit.log, 'ssf-revocation', { ...action.subject, provider: transmitter.provider }, audit.client)
        return
      }
    }
  }

  /** The sessions a subject names, or undefined when the gateway cannot find them. */
  async #selectors(transmitter: SsfTransmitter, subject: SsfSubject): Promise<SessionSelector[] | undefined> {
    const { store } = this.#options
    // Always the transmitter's own provider: a subject of another issuer was ignored (#act).
    const provider = transmitter.provider
    if (subject.sid !== undefined) return [subject.sub === undefined ? { provider, sid: subject.sid } : { provider, sid: subject.sid, sub: subject.sub }]
    if (subject.sub !== undefined) return [{ provider, sub: subject.sub }]
    if (subject.email === undefined) return undefined
    // A store that cannot find sessions by email (the cookie store: they are in the browsers) is
    // given the address itself: its revocation list refuses the sessions carrying it.
    if (store.subjectsByEmail === undefined) return [{ provider, email: subject.email }]
    const subs = await store.subjectsByEmail(provider, subject.email)
    return subs.map((sub) => ({ provider, sub }))
  }
}

export interface SsfEventsRouteOptions {
  receiver: SsfReceiver
  /** The transmitters of this configuration. */
  transmitters: readonly SsfTransmitter[]
  /** Pushes per provider (default PROVIDER_PUSH_LIMIT on the system clock); tests lower it. */
  limit?: RateLimitOptions
}

function refuse(reply: FastifyReply, status: number, err: SetErrorCode, description: string): FastifyReply {
  return reply.code(status).type('application/json').send({ err, description })
}

/** The transmitter whose registered Authorization `header` is, compared in constant time with each. */
function transmitterOf(header: string | undefined, transmitters: readonly SsfTransmitter[]): SsfTransmitter | undefined {
  if (header === undefined) return undefined
  const presented = createHash('sha256').update(header).digest()
  let found: SsfTransmitter | undefined
  for (const transmitter of transmitters) {
    const registered = transmitter.config.authorization
    if (registered === undefined) continue
    // Digests: equal lengths, so the comparison takes the same time whatever was presented.
    if (timingSafeEqual(presented, createHash('sha256').update(registered).digest())) found = transmitter
  }
  return found
}

export async function ssfEventsRoute(app: FastifyInstance, options: SsfEventsRouteOptions): Promise<void> {
  const limit = new KeyedRateLimit(options.limit ?? { ...PROVIDER_PUSH_LIMIT, clock: systemClock })
  app.removeAllContentTypeParsers()
  // Any body is read as text: a wrong media type is the RFC 8935 400 invalid_request, not a 415.
  app.addContentTypeParser('*', { parseAs: 'string', bodyLimit: MAX_BODY_BYTES }, (_req, body, done) => done(null, body))
  app.addHook('onRequest', async (_req, reply) => {
    reply.headers(SECURITY_HEADERS).header('cache-control', 'no-store')
  })

  app.post(SSF_EVENTS_PATH, async (req, reply) => {
    const transmitter = transmitterOf(req.headers.authorization, options.transmitters)
    if (transmitter === undefined) {
      auditRefusal(req.log, 'ssf-revocation', {}, req.ip, 'authentication_failed')
      return refuse(reply.header('www-authenticate', 'Bearer'), 401, 'authentication_failed', 'the Authorization header is missing or not the one registered')
    }
    if (transmitter.config.delivery !== 'push') {
      auditRefusal(req.log, 'ssf-revocation', { provider: transmitter.provider }, req.ip, 'access_denied')
      return refuse(reply, 403, 'access_denied', 'this stream is not delivered by push')
    }
    const retryAfter = limit.take(transmitter.provider)
    if (retryAfter !== undefined) {
      // At warn as well: a transmitter beyond its budget is the operator's to look at (the audit line is at info).
      req.log.warn({ provider: transmitter.provider, outcome: 'refused', err: 'rate_limited' }, 'shared signals event refused')
      auditRefusal(req.log, 'ssf-revocation', { provider: transmitter.provider }, req.ip, 'rate_limited')
      return reply
        .code(429)
        .header('retry-after', String(retryAfter))
        .type('application/json')
        .send({ err: 'rate_limited', description: 'too many events from this transmitter; push again later' })
    }
    const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase()
    const body = typeof req.body === 'string' ? req.body.trim() : ''
    if (type !== SET_MEDIA_TYPE || body === '') {
      auditRefusal(req.log, 'ssf-revocation', { provider: transmitter.provider }, req.ip, 'invalid_request')
      return refuse(reply, 400, 'invalid_request', `the body must be one SET, typed ${SET_MEDIA_TYPE}`)
    }
    const outcome = await options.receiver.receive(transmitter, body, { log: req.log, client: req.ip })
    if (outcome.kind === 'refused') return refuse(reply, 400, outcome.code, outcome.description)
    if (outcome.kind === 'replayed') return refuse(reply, 400, 'invalid_request', 'this SET was already received (jti replayed)')
    return reply.code(202).send()
  })
}
