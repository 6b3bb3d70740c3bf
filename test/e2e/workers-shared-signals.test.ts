import t from 'tap'
import { SESSION_REVOKED, startTransmitter } from '../fixtures/ssf-transmitter.ts'
import { eventually } from '../fixtures/poll.ts'
import { CLIENT_ID } from '../fixtures/stack.ts'
import { page, signedIn, startWorkers } from '../fixtures/workers.ts'

// server.workers: 2 with a polled Shared Signals stream: only the first worker slot manages the
// stream and polls (one stream, one verification, one poller), and a session-revoked it polls
// ends the subject's sessions on every worker (the cookie store's revocation list, shared through
// the primary), whether it names a sub or an email.

t.test('poll with two workers: one poller; a polled session-revoked ends the session on every worker', async (t) => {
  const tx = await startTransmitter({ audience: CLIENT_ID })
  t.teardown(() => tx.close())
  const gateway = await startWorkers(t, { providerConfig: { ssf: { configurationUrl: tx.configurationUrl, delivery: 'poll', pollIntervalSeconds: 1 } } })
  await eventually('the stream is verified', () => gateway.lines().some((l) => l.msg === 'shared signals event' && l.outcome === 'verified'), 20_000)
  const alice = await signedIn(gateway, 'alice')
  const bob = await signedIn(gateway, 'bob')
  t.equal((await page(gateway, alice)).status, 200)

  const { token, jti } = await tx.sign(SESSION_REVOKED, { subId: { format: 'iss_sub', iss: gateway.provider.issuer, sub: 'alice' } })
  tx.queue(token, jti)
  await eventually('the SET is acknowledged', () => tx.polls.some((p) => p.ack.includes(jti)), 20_000)
  // A connection each (rawRequest): cluster hands out connections, so both workers answer.
  const after = []
  for (let i = 0; i < 10; i++) after.push((await page(gateway, alice, `/after${i}`)).status)
  t.same(after, Array(10).fill(401), 'refused by both workers')
  t.equal((await page(gateway, bob)).status, 200, 'bob is left alone')

  t.equal(tx.streams.length, 1, 'one stream: only the first slot manages it')
  t.equal(tx.verificationStates.length, 1, 'one verification asked for')
  const lines = gateway.lines()
  t.equal(lines.filter((l) => l.msg === 'shared signals stream ready').length, 1, 'one worker made the stream ready')
  const pollers = new Set(lines.filter((l) => l.msg === 'shared signals event').map((l) => l.pid))
  t.notOk(pollers.has(undefined), 'each line names its process')
  t.equal(pollers.size, 1, 'every polled event was judged by the same worker')
  t.equal(lines.filter((l) => l.msg === 'shared signals event' && l.outcome === 'ended').length, 1, 'the event was processed once')

  // An email subject: the poller's worker sends the primary an email entry, which every worker applies.
  const carol = await signedIn(gateway, 'carol')
  t.equal((await page(gateway, carol)).status, 200)
  const byEmail = await tx.sign(SESSION_REVOKED, { subId: { format: 'email', email: 'CAROL@example.com' } })
  tx.queue(byEmail.token, byEmail.jti)
  await eventually('the email SET is acknowledged', () => tx.polls.some((p) => p.ack.includes(byEmail.jti)), 20_000)
  const carolAfter = []
  for (let i = 0; i < 10; i++) carolAfter.push((await page(gateway, carol, `/email${i}`)).status)
  t.same(carolAfter, Array(10).fill(401), 'the email subject is refused by both workers')
  t.equal((await page(gateway, bob)).status, 200, 'bob is still left alone')
})
