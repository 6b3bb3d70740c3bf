import Fastify, { type FastifyInstance } from 'fastify'
import * as jose from 'jose'
import t, { type Test } from 'tap'
import { SSF_EVENTS_PATH } from '#src/contract/endpoints'
import { JtiReplayGuard } from '#src/oidc/jti-replay'
import { Providers, type Provider } from '#src/oidc/providers'
import type { SsfTransmitter } from '#src/oidc/ssf-transmitter'
import { SsfReceiver, ssfEventsRoute } from '#src/routes/ssf-events'
import { MemorySessions, MemorySessionStore } from '#src/session/memory-store'
import { MemoryRevocationList } from '#src/session/revocation'
import type { GatewayCookies } from '#src/session/cookies'
import type { Session, SessionSelector } from '#src/session/types'
import { manualClock, type ManualClock } from '../fixtures/clock.ts'

// The Shared Signals receiver with two providers, staff and partners, both of which have a user
// `alice` (a `sub` is unique only within its issuer). Partners' transmitter speaks for partners
// only (SSF 1.0 4.1.2; RFC 9493 3.2.5): a subject that names staff's issuer, plainly or inside a
// `complex` subject, ends nothing and forces no refresh, and is logged at warn naming both. And an
// event applies at its own time (CAEP 1.0 2 event_timestamp, else the SET's iat), bounded by now:
// a sign-in after it survives it.

const STAFF = 'https://staff.example.com'
const PARTNERS = 'https://partners.example.com'
const TX_ISSUER = 'https://ssf.partners.example.com'
const AUTHORIZATION = 'Bearer partners-push-secret-0123456789'
const SESSION_REVOKED = 'https://schemas.openid.net/secevent/caep/event-type/session-revoked'
const TOKEN_CLAIMS_CHANGE = 'https://schemas.openid.net/secevent/caep/event-type/token-claims-change'
const T0 = 1_800_000_000
const MAX_AGE = 3600

const { privateKey, publicKey } = await jose.generateKeyPair('ES256')

function provider(name: string, issuer: string): Provider {
  return { name, config: { issuer, clientId: 'gateway' } } as unknown as Provider
}

const providers = new Providers([provider('staff', STAFF), provider('partners', PARTNERS)])

const transmitter = {
  provider: 'partners',
  issuer: TX_ISSUER,
  audience: 'gateway',
  clockToleranceSeconds: 30,
  keys: { getKey: async () => publicKey },
  config: { delivery: 'push', authorization: AUTHORIZATION, credentialChange: 'end' },
  status: {},
  verified: () => false,
} as unknown as SsfTransmitter

let jti = 0
function sign(type: string, subId: Record<string, unknown>, c: ManualClock, event: Record<string, unknown> = {}): Promise<string> {
  const iat = Math.floor(c.now() / 1000)
  return new jose.SignJWT({ iss: TX_ISSUER, aud: 'gateway', iat, jti: `jti-${++jti}`, sub_id: subId, events: { [type]: event } })
    .setProtectedHeader({ alg: 'ES256', typ: 'secevent+jwt' })
    .sign(privateKey)
}

function session(id: string, provider: string, sub: string, createdAt: number, sid?: string): Session {
  return { id, provider, claims: sid === undefined ? { sub } : { sub, sid }, accessToken: `at-${id}`, expiresAt: T0 + 600, createdAt }
}

interface Setup {
  app: FastifyInstance
  sessions: Map<string, Session>
  warnings: Array<Record<string, unknown>>
  infos: Array<Record<string, unknown>>
  ended: Array<{ selector: SessionSelector; at: number }>
  revocations: MemoryRevocationList
  clock: ManualClock
}

async function setup(t: Test): Promise<Setup> {
  const clock = manualClock(T0 * 1000)
  const sessions = new MemorySessions([
    ['staff-alice', session('staff-alice', 'staff', 'alice', T0 - 100, 'sid-1')],
    ['partners-alice', session('partners-alice', 'partners', 'alice', T0 - 100)],
  ])
  // end and expireTokens work on the map alone: no cookie is read.
  const store = new MemorySessionStore({} as GatewayCookies, MAX_AGE, { maxSessions: 100, maxSessionsPerUser: 100 }, clock, sessions)
  t.teardown(() => store.close())
  const revocations = new MemoryRevocationList({ maxAgeSeconds: MAX_AGE, clock })
  const warnings: Array<Record<string, unknown>> = []
  const infos: Array<Record<string, unknown>> = []
  const ended: Array<{ selector: SessionSelector; at: number }> = []
  const receiver = new SsfReceiver({
    providers,
    store,
    revocations,
    replay: new JtiReplayGuard({ clock }),
    clock,
    log: { warn: (fields: Record<string, unknown>) => void warnings.push(fields), info: (fields: Record<string, unknown>) => void infos.push(fields) } as never,
    onEnded: (selector, at) => void ended.push({ selector, at }),
  })
  const app = Fastify()
  await app.register(ssfEventsRoute, { receiver, transmitters: [transmitter] })
  t.teardown(() => app.close())
  return { app, sessions, warnings, infos, ended, revocations, clock }
}

async function push(app: FastifyInstance, token: string): Promise<number> {
  const res = await app.inject({
    method: 'POST',
    url: SSF_EVENTS_PATH,
    headers: { authorization: AUTHORIZATION, 'content-type': 'application/secevent+jwt' },
    payload: token,
  })
  return res.statusCode
}

const staffAlice = { format: 'iss_sub', iss: STAFF, sub: 'alice' }

t.test("partners' transmitter cannot end staff's alice: iss_sub naming staff's issuer is ignored and logged", async (t) => {
  const { app, sessions, warnings, ended, revocations, clock } = await setup(t)
  t.equal(await push(app, await sign(SESSION_REVOKED, staffAlice, clock)), 202, 'accepted (RFC 8935 2.2), not acted upon')
  t.ok(sessions.has('staff-alice'), "staff's alice is still signed in")
  t.ok(sessions.has('partners-alice'), "nor is partners' alice touched: the subject named staff's")
  t.same(ended, [], 'nothing ended')
  t.notOk(
    await revocations.isRevoked({ provider: 'staff', claims: { sub: 'alice', iat: T0 - 10 }, createdAt: T0 - 10 }),
    "staff alice's Bearer tokens are not refused",
  )
  t.match(
    warnings,
    [{ provider: 'partners', issuer: STAFF, outcome: 'ignored', reason: 'foreign_issuer' }],
    "logged at warn, naming the transmitter's provider and the foreign issuer",
  )
})

t.test('the same inside a complex subject', async (t) => {
  const { app, sessions, warnings, clock } = await setup(t)
  const complex = { format: 'complex', user: staffAlice, session: { format: 'opaque', id: 'sid-1' } }
  t.equal(await push(app, await sign(SESSION_REVOKED, complex, clock)), 202)
  t.ok(sessions.has('staff-alice'), "staff's alice is still signed in")
  t.equal(warnings.length, 1)
})

t.test("token-claims-change naming staff's alice forces no refresh of her sessions", async (t) => {
  const { app, sessions, warnings, clock } = await setup(t)
  t.equal(await push(app, await sign(TOKEN_CLAIMS_CHANGE, staffAlice, clock, { claims: { role: 'admin' } })), 202)
  t.equal(sessions.get('staff-alice')?.expiresAt, T0 + 600, "staff alice's access token is not expired")
  t.equal(warnings.length, 1)
})

t.test("partners' own alice is ended, and the log names partners as the provider whose sessions ended", async (t) => {
  const { app, sessions, infos, ended, clock } = await setup(t)
  t.equal(await push(app, await sign(SESSION_REVOKED, { format: 'iss_sub', iss: PARTNERS, sub: 'alice' }, clock)), 202)
  t.notOk(sessions.has('partners-alice'), "partners' alice is signed out")
  t.ok(sessions.has('staff-alice'), "staff's is not")
  t.same(
    ended.map((e) => e.selector),
    [{ provider: 'partners', sub: 'alice' }],
  )
  t.match(infos.at(-1), { provider: 'partners', outcome: 'ended', sessions: 1 })
})

t.test('an event applies at its own time: a sign-in after it survives a late (polled) delivery', async (t) => {
  const { app, sessions, ended, revocations, clock } = await setup(t)
  const partnersAlice = { format: 'iss_sub', iss: PARTNERS, sub: 'alice' }
  // Happened at T0 - 50; alice signed in again at T0 - 20; the event arrives at T0.
  sessions.set('partners-alice-later', session('partners-alice-later', 'partners', 'alice', T0 - 20))
  t.equal(await push(app, await sign(SESSION_REVOKED, partnersAlice, clock, { event_timestamp: T0 - 50 })), 202)
  t.notOk(sessions.has('partners-alice'), 'the session signed in before the event is ended')
  t.ok(sessions.has('partners-alice-later'), 'the sign-in after the event survives it')
  t.same(ended, [{ selector: { provider: 'partners', sub: 'alice' }, at: T0 - 50 }], 'its WebSockets are judged at the event time too')
  t.ok(await revocations.isRevoked({ provider: 'partners', claims: { sub: 'alice' }, createdAt: T0 - 50 }), 'a Bearer token issued by then is refused')
  t.notOk(await revocations.isRevoked({ provider: 'partners', claims: { sub: 'alice' }, createdAt: T0 - 49 }), 'one issued after is not')
})

t.test("without event_timestamp the SET's iat is the time; a time in the future is taken as now", async (t) => {
  const { app, sessions, ended, clock } = await setup(t)
  const partnersAlice = { format: 'iss_sub', iss: PARTNERS, sub: 'alice' }
  t.equal(await push(app, await sign(SESSION_REVOKED, partnersAlice, clock, { event_timestamp: T0 + 3600 })), 202)
  t.same(
    ended.map((e) => e.at),
    [T0],
    'bounded by now',
  )
  sessions.set('partners-alice-later', session('partners-alice-later', 'partners', 'alice', T0 + 10))
  clock.advance(20_000)
  const iatOnly = await sign(SESSION_REVOKED, partnersAlice, manualClock((T0 + 5) * 1000))
  t.equal(await push(app, iatOnly), 202)
  t.same(
    ended.map((e) => e.at),
    [T0, T0 + 5],
    'the iat, when the event has no time',
  )
  t.ok(sessions.has('partners-alice-later'), 'a sign-in after the iat survives')
})
