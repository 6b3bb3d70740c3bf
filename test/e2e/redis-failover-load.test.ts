import t from 'tap'
import type { Browser } from '../fixtures/browser.ts'
import { eventually } from '../fixtures/poll.ts'
import { startRedisTopology } from '../fixtures/redis-sessions.ts'
import { startStack } from '../fixtures/stack.ts'

// Load while failing over: two gateway replicas on Redis Sentinel, 50 connections of signed-in
// clients, and the primary killed in the middle. What is measured: every answer is 200 or 503
// (a 401 would be a user signed out by the failover, a 500 a crash), how long the 503 window
// lasts, and that every client is still signed in afterwards. Bounded in requests and time.

const CLIENTS = 20
const CONNECTIONS = 50
/** Requests sent before the primary is killed, and at most in all. */
const BEFORE_KILL = 500
const MAX_REQUESTS = 20_000
const MAX_MS = 60_000
/** Answers of 200 in a row on every connection after the failover that end the load. */
const SETTLED = 25

t.test('50 connections through a Sentinel failover: only 200 and 503, no session lost', async (t) => {
  const topology = await startRedisTopology(t, 'sentinel')
  if (topology.kind !== 'sentinel') throw new Error('sentinel expected')
  const stack = await startStack(t, { replicas: 2, config: { session: { store: 'redis', redis: { ...topology.config, timeoutMs: 1000 } } } })
  const gateways = stack.replicas.map((r) => r.gw)
  const browsers: Browser[] = []
  for (let i = 0; i < CLIENTS; i++) browsers.push(await stack.signedIn(i % 2 === 0 ? 'alice' : 'bob'))
  const cookies = browsers.map((b) => `ogw=${b.cookie('ogw')?.value}`)

  const statuses = new Map<number, number>()
  const unavailableAt: number[] = []
  const codes = new Set<string>()
  let sent = 0
  let killedAt: number | undefined
  let failedOver = false
  const start = performance.now()
  const kill = async (): Promise<void> => {
    killedAt = performance.now()
    const { old } = await topology.sentinel.killPrimary()
    await topology.sentinel.awaitFailover(old)
    failedOver = true
  }
  let killing: Promise<void> | undefined
  const connection = async (n: number): Promise<void> => {
    let streak = 0
    while (sent < MAX_REQUESTS && performance.now() - start < MAX_MS && !(failedOver && streak >= SETTLED)) {
      const i = sent++
      if (i === BEFORE_KILL) killing = kill()
      const res = await fetch(`${gateways[n % gateways.length]}/load/${i}`, { headers: { accept: 'application/json', cookie: cookies[n % CLIENTS] ?? '' } })
      if (res.status === 503) codes.add(((await res.json()) as { code?: string }).code ?? '')
      else await res.body?.cancel()
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
      if (res.status === 503) unavailableAt.push(performance.now())
      streak = res.status === 200 ? streak + 1 : 0
    }
  }
  await Promise.all(Array.from({ length: CONNECTIONS }, (_, n) => connection(n)))
  await killing
  t.ok(failedOver, 'the failover happened under load')

  const summary = Object.fromEntries([...statuses].sort(([x], [y]) => x - y))
  t.comment(`requests: ${sent} in ${Math.round(performance.now() - start)} ms; statuses: ${JSON.stringify(summary)}`)
  const window = unavailableAt.length === 0 ? 0 : Math.round((unavailableAt.at(-1) as number) - Math.min(unavailableAt[0] as number, killedAt ?? Infinity))
  t.comment(`503 codes: ${[...codes].join(', ')}`)
  t.comment(`503 window: ${window} ms from the kill to the last 503; 503 answers: ${unavailableAt.length}`)
  t.same(
    Object.keys(summary).filter((code) => code !== '200' && code !== '503'),
    [],
    'no answer but 200 and 503: no 401, no 500, no other 5xx',
  )
  t.ok((statuses.get(503) ?? 0) > 0, 'the window was seen (503 answers)')

  let lost = 0
  for (const cookie of cookies) {
    for (const gw of gateways) {
      await eventually(
        'the gateway serves again',
        async () => {
          const res = await fetch(`${gw}/after`, { headers: { accept: 'application/json', cookie } })
          await res.body?.cancel()
          if (res.status === 401) lost++
          return res.status !== 503
        },
        30_000,
      )
    }
  }
  t.comment(`sessions lost: ${lost}`)
  t.equal(lost, 0, 'every client is still signed in, on both replicas')
})
