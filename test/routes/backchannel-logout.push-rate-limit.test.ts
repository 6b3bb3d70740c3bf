import { randomUUID } from 'node:crypto'
import Fastify, { type FastifyInstance } from 'fastify'
import * as jose from 'jose'
import t, { type Test } from 'tap'
import { BACKCHANNEL_LOGOUT_PATH, SSF_EVENTS_PATH } from '#src/contract/endpoints'
import { JtiReplayGuard } from '#src/oidc/jti-replay'
import { BACKCHANNEL_LOGOUT_EVENT } from '#src/oidc/logout-token'
import { Providers, type Provider } from '#src/oidc/providers'
import type { SsfTransmitter } from '#src/oidc/ssf-transmitter'
import { backchannelLogoutRoute } from '#src/routes/backchannel-logout'
import { SsfReceiver, ssfEventsRoute } from '#src/routes/ssf-events'
import type { SessionSelector, SessionStore } from '#src/session/types'
import { manualClock } from '../fixtures/clock.ts'

// Back-channel logouts and Shared Signals pushes are limited per provider: beyond the budget, 429
// with Retry-After and nothing ended; the refused token may be sent again (its jti is not spent).
// Only requests shown to be the provider's count: tokens that do not verify, or pushes without the
// transmitter's Authorization, cannot spend its budget. One provider's budget is not another's.

const T0 = 1_800_000_000
const LIMIT = { burst: 2, perSecond: 1 }
const { privateKey, publicKey } = await jose.generateKeyPair('ES256')
const other = await jose.generateKeyPair('ES256')

function provider(name: string): Provider {
  return {
    name,
    config: { issuer: `https://${name}.example.com`, clientId: 'gateway', clockToleranceSeconds: 30 },
    client: { idTokenAlgorithms: ['ES256'], keys: { getKey: async () => publicKey } },
  } as unknown as Provider
}

function recordingStore(ended: SessionSelector[]): SessionStore {
  return { end: async (selector: SessionSelector) => void ended.push(selector) } as unknown as SessionStore
}

function logoutToken(name: string, key: jose.CryptoKey = privateKey): Promise<string> {
  return new jose.SignJWT({
    iss: `https://${name}.example.com`,
    aud: 'gateway',
    iat: Math.floor(Date.now() / 1000),
    sub: 'alice',
    jti: randomUUID(),
    events: { [BACKCHANNEL_LOGOUT_EVENT]: {} },
  })
    .setProtectedHeader({ alg: 'ES256', typ: 'logout+jwt' })
    .sign(key)
}

async function logout(app: FastifyInstance, token: string): Promise<{ status: number; retryAfter: string | undefined }> {
  const res = await app.inject({
    method: 'POST',
    url: BACKCHANNEL_LOGOUT_PATH,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({ logout_token: token }).toString(),
  })
  return { status: res.statusCode, retryAfter: res.headers['retry-after'] as string | undefined }
}

t.test('back-channel logout: a budget per provider, counted for verified tokens only', async (t: Test) => {
  const clock = manualClock(T0 * 1000)
  const ended: SessionSelector[] = []
  const app = Fastify()
  await app.register(backchannelLogoutRoute, {
    providers: new Providers([provider('staff'), provider('partners')]),
    store: recordingStore(ended),
    replay: new JtiReplayGuard({ clock: manualClock() }),
    limit: { ...LIMIT, clock },
  })
  t.teardown(() => app.close())

  for (let i = 0; i < 5; i++)
    t.equal((await logout(app, await logoutToken('partners', other.privateKey))).status, 400, 'a forged token is refused, and spends nothing')
  const first = await logoutToken('partners')
  t.equal((await logout(app, first)).status, 200)
  for (let i = 0; i < 5; i++) t.equal((await logout(app, first)).status, 400, 'a copy sent again is a replay, and spends nothing')
  t.equal((await logout(app, await logoutToken('partners'))).status, 200)
  const held = await logoutToken('partners')
  const refused = await logout(app, held)
  t.equal(refused.status, 429, 'beyond the burst: 429')
  t.equal(refused.retryAfter, '1', 'with Retry-After')
  t.equal(ended.length, 2, 'nothing ended by the refused token')
  t.equal((await logout(app, await logoutToken('staff'))).status, 200, "another provider's budget is its own")
  clock.advance(1000)
  t.equal((await logout(app, held)).status, 200, 'the same token, sent again later, is accepted (its jti was not spent)')
  t.equal(ended.length, 4)
})

t.test('Shared Signals push: a budget per transmitter, counted once its Authorization matched', async (t: Test) => {
  const clock = manualClock(T0 * 1000)
  const ended: SessionSelector[] = []
  const transmitter = {
    provider: 'partners',
    issuer: 'https://ssf.partners.example.com',
    audience: 'gateway',
    clockToleranceSeconds: 30,
    keys: { getKey: async () => publicKey },
    config: { delivery: 'push', authorization: 'Bearer push-secret-0123456789abcdef', credentialChange: 'end' },
    status: {},
    verified: () => false,
  } as unknown as SsfTransmitter
  const receiver = new SsfReceiver({
    providers: new Providers([provider('partners')]),
    store: recordingStore(ended),
    replay: new JtiReplayGuard({ clock }),
    clock,
    log: { info: () => undefined, warn: () => undefined } as never,
  })
  const app = Fastify()
  await app.register(ssfEventsRoute, { receiver, transmitters: [transmitter], limit: { ...LIMIT, clock } })
  t.teardown(() => app.close())
  const set = (): Promise<string> =>
    new jose.SignJWT({
      iss: 'https://ssf.partners.example.com',
      aud: 'gateway',
      iat: T0,
      jti: randomUUID(),
      sub_id: { format: 'opaque', id: 'alice' },
      events: { 'https://schemas.openid.net/secevent/caep/event-type/session-revoked': {} },
    })
      .setProtectedHeader({ alg: 'ES256', typ: 'secevent+jwt' })
      .sign(privateKey)
  const push = async (token: string, authorization = 'Bearer push-secret-0123456789abcdef'): Promise<{ status: number; retryAfter: unknown }> => {
    const res = await app.inject({
      method: 'POST',
      url: SSF_EVENTS_PATH,
      headers: { authorization, 'content-type': 'application/secevent+jwt' },
      payload: token,
    })
    return { status: res.statusCode, retryAfter: res.headers['retry-after'] }
  }
  for (let i = 0; i < 5; i++) t.equal((await push(await set(), 'Bearer guessed')).status, 401, 'another Authorization spends nothing')
  t.equal((await push(await set())).status, 202)
  t.equal((await push(await set())).status, 202)
  const held = await set()
  t.match(await push(held), { status: 429, retryAfter: '1' }, 'beyond the burst: 429 with Retry-After')
  t.equal(ended.length, 2)
  clock.advance(1000)
  t.equal((await push(held)).status, 202, 'pushed again later, it is accepted (not a replay)')
  t.equal(ended.length, 3)
})
