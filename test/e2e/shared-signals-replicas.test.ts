import t from 'tap'
import { REFRESH_MS } from '#src/session/revocation'
import { SSF_EVENTS_PATH } from '#src/contract/endpoints'
import type { Browser } from '../fixtures/browser.ts'
import { rawRequest } from '../fixtures/http.ts'
import { eventually } from '../fixtures/poll.ts'
import { startRedis } from '../fixtures/redis.ts'
import { KEY_PREFIX, startRedisSessions } from '../fixtures/redis-sessions.ts'
import { CLIENT_ID, startStack, type Stack } from '../fixtures/stack.ts'
import { SESSION_REVOKED, startTransmitter, TOKEN_CLAIMS_CHANGE, type Transmitter } from '../fixtures/ssf-transmitter.ts'

// A CAEP session-revoked pushed to one of two gateway replicas ends the subject's sessions on
// both, as back-channel logout does (backchannel-logout-replicas.test.ts): with the Redis store the
// sessions are deleted from the shared Redis (both refuse at once); with the cookie store the
// subject goes on the revocation list shared in Redis, which the other replica reads again at most
// every REFRESH_MS (polled for, never slept for).

const JSON_ACCEPT = { accept: 'application/json' }
const PUSH_AUTHORIZATION = 'Bearer push-secret-0123456789abcdef'
const LIST_REFRESH_BOUND_MS = REFRESH_MS + 4000

function ssfDetail(stack: Stack, replica: number): Record<string, unknown> | undefined {
  const probe = stack.replicas[replica]?.app.management.probes.find((p) => p.name === 'shared_signals')
  return (probe?.detail?.() as Record<string, Record<string, unknown>> | undefined)?.default
}

/** The transmitter, and each replica having read it (its keys loaded: a push is judged, not 503). */
async function withTransmitter(stack: Stack): Promise<void> {
  for (const i of stack.replicas.keys()) await eventually(`replica ${i} has read the transmitter`, () => ssfDetail(stack, i)?.reachable === true)
}

/** POSTs a SET to `gw`'s push endpoint, as the transmitter does, on a connection of its own. */
async function pushTo(gw: string, token: string): Promise<number> {
  const res = await rawRequest(gw, SSF_EVENTS_PATH, {
    method: 'POST',
    headers: { 'content-type': 'application/secevent+jwt', authorization: PUSH_AUTHORIZATION },
    body: token,
  })
  return res.status
}

const ssfConfig = (tx: Transmitter): Record<string, unknown> => ({
  provider: { ssf: { configurationUrl: tx.configurationUrl, delivery: 'push', authorization: PUSH_AUTHORIZATION } },
})

t.test("redis store, two replicas: session-revoked pushed to one ends the subject's sessions on both, and only those", async (t) => {
  const tx = await startTransmitter({ audience: CLIENT_ID })
  t.teardown(() => tx.close())
  const { stack, raw } = await startRedisSessions(t, { config: ssfConfig(tx) })
  await withTransmitter(stack)
  const [a, b] = stack.replicas.map((r) => r.gw) as [string, string]
  const cookieOf = (browser: Browser): string => `ogw=${browser.cookie('ogw')?.value}`
  const statusOn = async (gw: string, browser: Browser): Promise<number> =>
    (await rawRequest(gw, '/hello', { headers: { ...JSON_ACCEPT, cookie: cookieOf(browser) } })).status
  const alice1 = await stack.signedIn('alice')
  const alice2 = await stack.signedIn('alice')
  const bob = await stack.signedIn('bob')
  for (const gw of [a, b]) for (const browser of [alice1, alice2, bob]) t.equal(await statusOn(gw, browser), 200, `signed in on ${gw}`)
  const before = (await raw.keys(`${KEY_PREFIX}*:session:*`)).length

  const { token } = await tx.sign(SESSION_REVOKED, { subId: { format: 'iss_sub', iss: stack.provider?.issuer, sub: 'alice' } })
  t.equal(await pushTo(b, token), 202, 'replica B accepts the SET')
  for (const [gw, name] of [
    [a, 'A'],
    [b, 'B'],
  ] as const) {
    t.equal(await statusOn(gw, alice1), 401, `alice's first session refused on ${name}`)
    t.equal(await statusOn(gw, alice2), 401, `alice's second session refused on ${name}`)
    t.equal(await statusOn(gw, bob), 200, `bob is left alone on ${name}`)
  }
  t.equal((await raw.keys(`${KEY_PREFIX}*:session:*`)).length, before - 2, "alice's two sessions were deleted from Redis")
  t.equal(await pushTo(a, token), 400, 'the replay, to the other replica, is refused: the jti guard is shared in Redis')
})

t.test('cookie store, two replicas sharing the revocation list in Redis: session-revoked pushed to one ends the session on both', async (t) => {
  const tx = await startTransmitter({ audience: CLIENT_ID })
  t.teardown(() => tx.close())
  const redis = await startRedis(t)
  const stack = await startStack(t, { replicas: 2, config: { ...ssfConfig(tx), session: { redisUrl: redis.url } } })
  await withTransmitter(stack)
  const [a, b] = stack.replicas.map((r) => r.gw) as [string, string]
  const statusOn = async (gw: string, browser: Browser): Promise<number> => {
    const res = await browser.fetch(`${gw}/hello`, { headers: JSON_ACCEPT })
    await res.body?.cancel()
    return res.status
  }
  const alice = await stack.signedIn('alice')
  const bob = await stack.signedIn('bob')
  t.equal(await statusOn(a, alice), 200)
  t.equal(await statusOn(b, alice), 200)

  const { token } = await tx.sign(SESSION_REVOKED, { subId: { format: 'iss_sub', iss: stack.provider?.issuer, sub: 'alice' } })
  t.equal(await pushTo(a, token), 202, 'replica A accepts the SET')
  t.equal(await statusOn(a, alice), 401, 'replica A refuses at once')
  t.equal(
    await eventually('replica B refuses the session', async () => (await statusOn(b, alice)) === 401, LIST_REFRESH_BOUND_MS),
    true,
    'replica B refuses it once it has read the list again',
  )
  t.equal(await stack.app.revocations?.size(), 1, 'one entry in the shared list')
  t.equal(await statusOn(b, bob), 200, 'bob is left alone')
  t.equal(await pushTo(b, token), 400, 'the replay, to the other replica, is refused')
})

t.test(
  "redis store, two replicas: token-claims-change pushed to one makes the subject's sessions refresh at their next request, on the other; an email subject is found",
  async (t) => {
    const tx = await startTransmitter({ audience: CLIENT_ID })
    t.teardown(() => tx.close())
    const { stack, sessionOf } = await startRedisSessions(t, { config: ssfConfig(tx) })
    await withTransmitter(stack)
    const [a, b] = stack.replicas.map((r) => r.gw) as [string, string]
    const alice = await stack.signedIn('alice')
    const bob = await stack.signedIn('bob')
    const valueOf = (browser: Browser): string => String(browser.cookie('ogw')?.value)
    const statusOn = async (gw: string, browser: Browser): Promise<number> =>
      (await rawRequest(gw, '/hello', { headers: { ...JSON_ACCEPT, cookie: `ogw=${valueOf(browser)}` } })).status
    const refreshesOnA = async (): Promise<string> =>
      (await stack.replicas[0]?.app.management.metrics.getSingleMetricAsString('openid_gateway_refreshes_total')) ?? ''
    t.equal(await statusOn(a, alice), 200)
    const before = await sessionOf(valueOf(alice))
    t.ok((before?.expiresAt ?? 0) > 0, 'a fresh access token')
    t.notMatch(await refreshesOnA(), /code="ok"\} [1-9]/, 'no refresh yet')
    const bobExpiresAt = (await sessionOf(valueOf(bob)))?.expiresAt
    t.ok((bobExpiresAt ?? 0) > 0)

    const { token } = await tx.sign(TOKEN_CLAIMS_CHANGE, {
      subId: { format: 'iss_sub', iss: stack.provider?.issuer, sub: 'alice' },
      event: { claims: { role: 'admin' } },
    })
    t.equal(await pushTo(b, token), 202, 'replica B accepts the SET')
    t.equal((await sessionOf(valueOf(alice)))?.expiresAt, 0, "alice's session in Redis counts its access token expired")
    t.equal((await sessionOf(valueOf(bob)))?.expiresAt, bobExpiresAt, "bob's is left alone")
    t.equal(await statusOn(a, alice), 200, 'the session is kept: replica A serves it')
    t.match(await refreshesOnA(), /openid_gateway_refreshes_total\{code="ok"\} 1/, 'after running the refresh grant')
    const after = await sessionOf(valueOf(alice))
    t.ok((after?.expiresAt ?? 0) > 0, 'with a new access token')
    t.not(after?.accessToken, before?.accessToken, 'another access token')
    t.equal(after?.id, before?.id, 'the same session')
    t.equal(await statusOn(b, bob), 200, 'bob is served')

    // An email subject: found through the email link the Redis store keeps with ssf.
    const email = stack.upstream.requests.find((r) => r.headers['x-forwarded-user'] === 'alice')?.headers['x-forwarded-email']
    t.ok(email, "alice's session has an email claim")
    const byEmail = await tx.sign(SESSION_REVOKED, { subId: { format: 'email', email: String(email).toUpperCase() } })
    t.equal(await pushTo(a, byEmail.token), 202)
    t.equal(await statusOn(b, alice), 401, 'a session-revoked naming the email (case-insensitive) ends the session, on the other replica too')
    t.equal(await statusOn(a, bob), 200, 'bob is left alone')
  },
)
