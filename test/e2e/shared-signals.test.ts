import t from 'tap'
import type { Browser } from '../fixtures/browser.ts'
import { eventually } from '../fixtures/poll.ts'
import { CLIENT_ID, startStack, type Stack, type Teardown } from '../fixtures/stack.ts'
import { CREDENTIAL_CHANGE, SESSION_REVOKED, startTransmitter, TOKEN_CLAIMS_CHANGE, VERIFICATION, type Transmitter } from '../fixtures/ssf-transmitter.ts'
import { buildManagement } from '#src/ops/management'

// The Shared Signals receiver against a transmitter written as a fixture (test/fixtures/
// ssf-transmitter.ts) and the real oidc-provider for sign-in: the gateway reads the transmitter,
// creates its stream, asks for a verification; a pushed or polled CAEP session-revoked ends the
// subject's sessions; every refused SET answers its RFC 8935 error code and ends nothing.

const PUSH_AUTHORIZATION = 'Bearer push-secret-0123456789abcdef'
const MANAGEMENT_TOKEN = 'management-token-0123'

async function status(stack: Stack, browser: Browser): Promise<number> {
  const res = await browser.fetch(`${stack.gw}/hello`, { headers: { accept: 'application/json' } })
  await res.body?.cancel()
  return res.status
}

interface Setup {
  stack: Stack
  tx: Transmitter
  lines: string[]
}

async function setup(test: Teardown, ssf: Record<string, unknown>, store = 'memory'): Promise<Setup> {
  const tx = await startTransmitter({ audience: CLIENT_ID, requireToken: MANAGEMENT_TOKEN })
  test.teardown(() => tx.close())
  const lines: string[] = []
  const stack = await startStack(test, {
    config: {
      provider: { ssf: { configurationUrl: tx.configurationUrl, bearerToken: MANAGEMENT_TOKEN, ...ssf } },
      session: { store },
      log: { level: 'info' },
    },
    logStream: { write: (line: string) => void lines.push(line) },
  })
  await eventually('the stream is created and verified', () => {
    const detail = ssfStatus(stack)
    return detail?.verification === 'verified' ? detail : undefined
  })
  return { stack, tx, lines }
}

function ssfStatus(stack: Stack): Record<string, unknown> | undefined {
  const probe = stack.app.management.probes.find((p) => p.name === 'shared_signals')
  const detail = probe?.detail?.() as Record<string, Record<string, unknown>> | undefined
  return detail?.default
}

const alice = (issuer: string | undefined): Record<string, unknown> => ({ format: 'iss_sub', iss: issuer, sub: 'alice' })

t.test("push: the stream is created with the registered Authorization, verified; session-revoked ends the subject's sessions only", async (t) => {
  const { stack, tx, lines } = await setup(t, { delivery: 'push', authorization: PUSH_AUTHORIZATION, required: true })
  t.equal(tx.streams.length, 1, 'one stream created')
  t.match(tx.streams[0], {
    delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: `${stack.gw}/api/v1/openid/ssf/events`, authorization_header: PUSH_AUTHORIZATION },
    events_requested: [SESSION_REVOKED, CREDENTIAL_CHANGE, TOKEN_CLAIMS_CHANGE],
  })
  t.ok(
    tx.managementAuthorizations.every((a) => a === `Bearer ${MANAGEMENT_TOKEN}`),
    'the management calls carry the bearer token',
  )
  t.equal(ssfStatus(stack)?.status, 'enabled')

  const a1 = await stack.signedIn('alice')
  const a2 = await stack.signedIn('alice')
  const bob = await stack.signedIn('bob')
  const { token } = await tx.sign(SESSION_REVOKED, { subId: alice(stack.provider?.issuer) })
  const res = await tx.push(token)
  t.equal(res.status, 202)
  t.equal(res.body, undefined, 'no body')
  t.equal(await status(stack, a1), 401, 'alice is signed out')
  t.equal(await status(stack, a2), 401, 'in every browser')
  t.equal(await status(stack, bob), 200, 'bob is left alone')
  t.notMatch(lines.join('\n'), /eyJ|push-secret/, 'never the token or the Authorization in the log')

  const again = await tx.push(token)
  t.same(again, { status: 400, body: { err: 'invalid_request', description: 'this SET was already received (jti replayed)' } }, 'a replay is refused')
})

t.test('push: refused SETs answer their RFC 8935 code and end nothing', async (t) => {
  const { stack, tx } = await setup(t, { delivery: 'push', authorization: PUSH_AUTHORIZATION })
  const browser = await stack.signedIn('alice')
  const subId = alice(stack.provider?.issuer)
  const cases: Array<[string, Promise<{ status: number; body: unknown }>, number, string]> = [
    ['bad signature', tx.sign(SESSION_REVOKED, { subId, foreignKey: true }).then(({ token }) => tx.push(token)), 400, 'invalid_key'],
    ['wrong audience', tx.sign(SESSION_REVOKED, { subId, aud: 'someone-else' }).then(({ token }) => tx.push(token)), 400, 'invalid_audience'],
    ['wrong issuer', tx.sign(SESSION_REVOKED, { subId, iss: 'https://evil.example' }).then(({ token }) => tx.push(token)), 400, 'invalid_issuer'],
    ['wrong typ', tx.sign(SESSION_REVOKED, { subId, typ: 'JWT' }).then(({ token }) => tx.push(token)), 400, 'invalid_request'],
    ['not a SET', tx.push('not-a-jwt'), 400, 'invalid_request'],
    ['wrong media type', tx.sign(SESSION_REVOKED, { subId }).then(({ token }) => tx.push(token, undefined, 'text/plain')), 400, 'invalid_request'],
    ['no Authorization', tx.sign(SESSION_REVOKED, { subId }).then(({ token }) => tx.push(token, null)), 401, 'authentication_failed'],
    [
      'wrong Authorization',
      tx.sign(SESSION_REVOKED, { subId }).then(({ token }) => tx.push(token, 'Bearer push-secret-0123456789abcdeX')),
      401,
      'authentication_failed',
    ],
  ]
  for (const [name, answer, code, err] of cases) {
    const res = await answer
    t.equal(res.status, code, name)
    t.match(res.body, { err, description: String }, `${name}: ${err}`)
  }
  // Well-formed, but nothing the gateway acts on: accepted (202) and ignored.
  const unknown = await tx.sign('https://schemas.example.com/event/unknown', { subId })
  t.equal((await tx.push(unknown.token)).status, 202, 'an unknown event type is accepted')
  const otherFormat = await tx.sign(SESSION_REVOKED, { subId: { format: 'phone_number', phone_number: '+12065550100' } })
  t.equal((await tx.push(otherFormat.token)).status, 202, 'an unknown subject format is accepted')
  const otherIssuer = await tx.sign(SESSION_REVOKED, { subId: { format: 'iss_sub', iss: 'https://other.example', sub: 'alice' } })
  t.equal((await tx.push(otherIssuer.token)).status, 202, "another issuer's alice is accepted")
  t.equal(await status(stack, browser), 200, 'none of them ended the session')
})

t.test('push: subject formats email and opaque; credential-change ends; token-claims-change refreshes', async (t) => {
  const { stack, tx } = await setup(t, { delivery: 'push', authorization: PUSH_AUTHORIZATION })
  const byEmail = await stack.signedIn('alice')
  t.equal(await status(stack, byEmail), 200)
  const claimed = stack.upstream.requests.at(-1)?.headers['x-forwarded-email']
  t.ok(claimed, 'the session has an email claim')
  const r1 = await tx.push((await tx.sign(SESSION_REVOKED, { subId: { format: 'email', email: String(claimed).toUpperCase() } })).token)
  t.equal(r1.status, 202)
  t.equal(await status(stack, byEmail), 401, 'email: ended (case-insensitive)')

  const opaque = await stack.signedIn('alice')
  await tx.push(
    (await tx.sign(CREDENTIAL_CHANGE, { subId: { format: 'opaque', id: 'alice' }, event: { credential_type: 'password', change_type: 'update' } })).token,
  )
  t.equal(await status(stack, opaque), 401, 'opaque is the sub; credential-change ends the sessions by default')

  const claims = await stack.signedIn('alice')
  const refreshes = async (): Promise<string> => await stack.app.management.metrics.getSingleMetricAsString('openid_gateway_refreshes_total')
  const before = await refreshes()
  t.equal(await status(stack, claims), 200)
  t.equal(await refreshes(), before, 'no refresh before the event')
  const pushed = await tx.push((await tx.sign(TOKEN_CLAIMS_CHANGE, { subId: alice(stack.provider?.issuer), event: { claims: { role: 'admin' } } })).token)
  t.equal(pushed.status, 202)
  t.equal(await status(stack, claims), 200, 'token-claims-change keeps the session')
  t.match(await refreshes(), /openid_gateway_refreshes_total\{code="ok"\} 1/, 'its next request ran the refresh grant')
})

t.test('cookie store: an email subject ends the sessions carrying that address through the revocation list, and only those', async (t) => {
  const { stack, tx, lines } = await setup(t, { delivery: 'push', authorization: PUSH_AUTHORIZATION }, 'cookie')
  const a1 = await stack.signedIn('alice')
  const a2 = await stack.signedIn('alice')
  const bob = await stack.signedIn('bob')
  t.equal(await status(stack, a1), 200)
  const email = stack.upstream.requests.at(-1)?.headers['x-forwarded-email']
  t.ok(email, 'the session has an email claim')
  t.equal(await status(stack, bob), 200)
  const res = await tx.push((await tx.sign(SESSION_REVOKED, { subId: { format: 'email', email: String(email).toUpperCase() } })).token)
  t.equal(res.status, 202)
  t.equal(await status(stack, a1), 401, 'ended (the address compared case-insensitively)')
  t.equal(await status(stack, a2), 401, 'in every browser')
  t.equal(await status(stack, bob), 200, 'another user is left alone')
  t.equal(await stack.app.revocations?.size(), 1, "one entry in the cookie store's revocation list")
  const ssfLines = lines.filter((l) => l.includes('shared signals'))
  const line = ssfLines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'shared signals event' && l.event === SESSION_REVOKED)
  t.match(line, { outcome: 'ended', email: String }, 'logged as ended, the address digested')
  t.notOk(ssfLines.join('\n').toLowerCase().includes(String(email).toLowerCase()), 'never the address in its log line')
})

t.test('credentialChange: ignore leaves the sessions', async (t) => {
  const { stack, tx } = await setup(t, { delivery: 'push', authorization: PUSH_AUTHORIZATION, credentialChange: 'ignore' })
  const browser = await stack.signedIn('alice')
  const res = await tx.push((await tx.sign(CREDENTIAL_CHANGE, { subId: alice(stack.provider?.issuer) })).token)
  t.equal(res.status, 202)
  t.equal(await status(stack, browser), 200)
})

t.test('poll: a queued session-revoked ends the session; the jti is acknowledged, a refused SET reported in setErrs', async (t) => {
  const { stack, tx } = await setup(t, { delivery: 'poll', pollIntervalSeconds: 1 })
  t.equal(tx.streams[0]?.delivery.method, 'urn:ietf:rfc:8936')
  const browser = await stack.signedIn('alice')
  const good = await tx.sign(SESSION_REVOKED, { subId: alice(stack.provider?.issuer) })
  const forged = await tx.sign(SESSION_REVOKED, { subId: alice(stack.provider?.issuer), foreignKey: true })
  tx.queue(good.token, good.jti)
  tx.queue(forged.token, forged.jti)
  await eventually('both reported', () => tx.polls.find((p) => p.ack.includes(good.jti)) && tx.polls.find((p) => forged.jti in p.setErrs))
  t.equal(tx.polls.find((p) => forged.jti in p.setErrs)?.setErrs[forged.jti]?.err, 'invalid_key')
  t.equal(await status(stack, browser), 401, 'the polled event ended the session')
  // A push to a poll stream's Authorization is refused: nothing to push to.
  const res = await fetch(`${stack.gw}/api/v1/openid/ssf/events`, { method: 'POST', headers: { 'content-type': 'application/secevent+jwt' }, body: good.token })
  t.equal(res.status, 401)
})

t.test('/readyz with required: 503 while the transmitter is down, ready once it is up and enabled', async (t) => {
  const tx = await startTransmitter({ audience: CLIENT_ID })
  t.teardown(() => tx.close())
  tx.up = false
  const stack = await startStack(t, {
    config: { provider: { ssf: { configurationUrl: tx.configurationUrl, delivery: 'push', authorization: PUSH_AUTHORIZATION, required: true } } },
  })
  const management = await buildManagement({
    metrics: { contentType: 'text/plain', metrics: async () => '' },
    probes: stack.live.probes,
    draining: () => false,
  })
  t.teardown(() => management.close())
  const down = await management.inject({ url: '/readyz' })
  t.equal(down.statusCode, 503, 'the gateway runs, but is not ready')
  t.match(down.json(), { status: 'not_ready', failing: ['shared_signals'], details: { shared_signals: { default: { reachable: false } } } })
  tx.up = true
  await eventually('ready', async () => ((await management.inject({ url: '/readyz' })).statusCode === 200 ? true : undefined), 15_000)
  t.match((await management.inject({ url: '/readyz' })).json(), {
    status: 'ready',
    details: { shared_signals: { default: { status: 'enabled', reachable: true } } },
  })
})

t.test('verification: an event with another state than the one asked for does not verify the stream', async (t) => {
  const tx = await startTransmitter({ audience: CLIENT_ID, verificationState: () => 'not-the-state-asked-for' })
  t.teardown(() => tx.close())
  const lines: string[] = []
  const stack = await startStack(t, {
    config: { provider: { ssf: { configurationUrl: tx.configurationUrl, delivery: 'push', authorization: PUSH_AUTHORIZATION } }, log: { level: 'info' } },
    logStream: { write: (line: string) => void lines.push(line) },
  })
  const refused = await eventually('the wrong state is logged', () =>
    lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'shared signals event' && l.reason === 'state'),
  )
  t.match(refused, { event: VERIFICATION, outcome: 'ignored' })
  t.equal(ssfStatus(stack)?.verification, 'pending', 'not verified')
  const stream = tx.streams[0]
  const asked = tx.verificationStates[0]
  t.ok(stream !== undefined && asked !== undefined)
  // The state the gateway asked for, delivered late: now the stream is verified.
  const right = await tx.sign(VERIFICATION, { subId: { format: 'opaque', id: String(stream?.stream_id) }, event: { state: asked } })
  t.equal((await tx.push(right.token)).status, 202)
  t.equal(ssfStatus(stack)?.verification, 'verified')
})
