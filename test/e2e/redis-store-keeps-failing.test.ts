import t from 'tap'
import { buildManagement } from '#src/ops/management'
import { KEEPS_FAILING, keepsFailing } from '#src/session/redis-store'
import { eventually } from '../fixtures/poll.ts'
import { startRedisSessions } from '../fixtures/redis-sessions.ts'

// /readyz and a Redis store whose operations keep failing while Redis still answers PING: the
// case of a client with a stale Cluster slot map (every write to one shard failed with MOVED),
// here made with `min-replicas-to-write` on a Redis without replicas (every write is refused
// with NOREPLICAS, PING and reads pass). Readiness must name session_store; a success ends it.

t.test('what "keeps failing" means', async (t) => {
  const { failures, forMs, forgetAfterMs } = KEEPS_FAILING
  const run = (count: number, firstAt: number, lastAt: number) => ({ count, firstAt, lastAt })
  t.notOk(keepsFailing(undefined, 1e6), 'no failure since the last success')
  t.notOk(keepsFailing(run(failures - 1, 0, forMs), forMs), 'too few failures in a row')
  t.notOk(keepsFailing(run(failures, 0, 10), forMs - 1), 'not for long enough: a failover PING already reports, one slow command')
  t.ok(keepsFailing(run(failures, 0, forMs), forMs), 'enough failures in a row, for long enough')
  t.ok(keepsFailing(run(failures, 0, forMs), forMs + forgetAfterMs - 1), 'still, until the last failure is old')
  t.notOk(keepsFailing(run(failures, 0, forMs), forMs + forgetAfterMs), 'a replica out of service gets no request to succeed with: it is offered traffic again')
})

t.test('a Redis store whose writes keep failing while Redis answers PING: /readyz names session_store until a write succeeds', async (t) => {
  const { stack, raw } = await startRedisSessions(t)
  const management = await buildManagement({
    metrics: { contentType: 'text/plain', metrics: async () => '' },
    probes: stack.live.probes,
    draining: () => false,
  })
  t.teardown(() => management.close())
  const readyz = async () => {
    const res = await management.inject({ url: '/readyz' })
    return { status: res.statusCode, body: res.json() as Record<string, unknown> }
  }
  const signIn = async (): Promise<number> => (await stack.browser().signIn(`${stack.gw}/api/v1/openid/redirect`, 'alice')).status
  t.equal((await readyz()).status, 200, 'ready')

  await raw.config('SET', 'min-replicas-to-write', '1')
  t.teardown(() => raw.config('SET', 'min-replicas-to-write', '0').catch(() => undefined))
  t.equal(await raw.ping(), 'PONG', 'Redis answers PING')
  const started = performance.now()
  const statuses = new Set<number>()
  const down = await eventually(
    '/readyz answers 503 while sign-ins keep failing',
    async () => {
      statuses.add(await signIn())
      const ready = await readyz()
      return ready.status === 503 ? ready : undefined
    },
    KEEPS_FAILING.forMs + 10_000,
  )
  t.same([...statuses], [503], 'every sign-in failed with 503 (its session cannot be written)')
  t.match(down.body, { status: 'not_ready', failing: ['session_store'] }, 'naming the session store, not redis (PING passes)')
  t.ok(performance.now() - started >= KEEPS_FAILING.forMs, 'not before the failures lasted long enough')

  await raw.config('SET', 'min-replicas-to-write', '0')
  t.equal(await signIn(), 200, 'writes work again: a sign-in succeeds')
  t.equal((await readyz()).status, 200, 'and the store is ready again at once')
})
