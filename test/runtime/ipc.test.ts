import t from 'tap'
import { GatewayError } from '#src/contract/errors'
import { answerCall, callPrimary, type Message, type PrimaryHandlers } from '#src/runtime/ipc'

// The calls between a worker and its primary: a defect in the primary is a 500 fault, logged
// there; only a primary that does not answer is an outage (503). The worker's side is driven here
// as the primary's IPC channel would: process.send carries the call, a 'message' event the reply.

const handlers: PrimaryHandlers = {
  'config.text': () => 'server: {}',
  'start.issuers': () => ({}),
  revocations: () => ({ entries: [] }) as never,
  revoke: () => {
    throw new TypeError('a defect in the primary')
  },
  'jti.firstUse': () => true,
  'jti.release': () => null,
  'refresh.begin': () => ({ kind: 'lead' }),
  'refresh.end': () => null,
  'ratelimit.incr': (_worker, { timeWindow }) => ({ current: 1, ttl: timeWindow }),
}

t.test('the primary answers from the table, and reports a throwing handler or an unknown operation as a fault', async (t) => {
  const failures: unknown[] = []
  const failed = (err: unknown): void => void failures.push(err)
  t.same(await answerCall(handlers, 1, 'ratelimit.incr', { key: 'k', timeWindow: 60_000 }, failed), { result: { current: 1, ttl: 60_000 } })
  t.same(failures, [], 'an answer is no failure')
  t.same(await answerCall(handlers, 1, 'revoke', {}, failed), { fault: 'a defect in the primary' })
  t.same(
    await answerCall(handlers, 1, 'toString', null, failed),
    { fault: 'unknown operation toString' },
    'nothing outside the table, inherited names included',
  )
  t.equal(failures.length, 2, 'each fault is reported, for the primary to log as an error')
})

t.test('a worker: an answer resolves, a fault is 500 internal_error (503 session_store_unavailable is kept for a primary that does not answer)', async (t) => {
  const sent: Message[] = []
  const original = process.send
  process.send = ((message: Message) => {
    sent.push(message)
    return true
  }) as typeof process.send
  t.teardown(() => {
    process.send = original
  })
  const reply = (message: Message): boolean => process.emit('message' as never, message as never)

  const answered = callPrimary('jti.firstUse', { issuer: 'https://op', jti: 'j', until: 1 })
  const call = sent.at(-1)
  t.match(call, { ogw: 'call', op: 'jti.firstUse', args: { jti: 'j' } })
  reply({ ogw: 'reply', id: call?.id ?? -1, result: true })
  t.equal(await answered, true)

  const faulted = callPrimary('revoke', { sub: 'alice' } as never)
  reply({ ogw: 'reply', id: sent.at(-1)?.id ?? -1, fault: 'a defect in the primary' })
  const err = await faulted.then(
    () => undefined,
    (e: unknown) => e,
  )
  t.ok(err instanceof GatewayError)
  t.match(err, { code: 'internal_error', status: 500 }, 'a defect, not a store outage')
  t.notMatch(String((err as Error).message), /a defect in the primary/, "the primary's message stays in the primary's log")
})
