import { randomUUID } from 'node:crypto'
import t from 'tap'
import { BACKCHANNEL_LOGOUT_PATH } from '#src/contract/endpoints'
import { BACKCHANNEL_LOGOUT_EVENT } from '#src/oidc/logout-token'
import type { Browser } from '../fixtures/browser.ts'
import { manualClock } from '../fixtures/clock.ts'
import { rawRequest } from '../fixtures/http.ts'
import { eventually } from '../fixtures/poll.ts'
import { startRedisTopology, untilServedAgain } from '../fixtures/redis-sessions.ts'
import { call } from '../fixtures/redis-node.ts'
import type { SentinelTopology } from '../fixtures/redis-sentinel.ts'
import { CLIENT_ID, startStack, type Stack, type Teardown } from '../fixtures/stack.ts'

// Two gateway replicas on a real Redis Sentinel deployment (1 primary, 2 replicas, 3 sentinels,
// test/fixtures/redis-sentinel.ts) through a failover: the primary is killed, the sentinels
// promote a replica, and the gateways follow it by themselves. What a user sees: 503 during the
// window (never 401, which would sign them out, never 500), then the same session as before,
// because every session write waited for a replica (WAIT 1).

const JSON_ACCEPT = { accept: 'application/json' }

async function sentinelStack(
  t: Teardown,
  options: Parameters<typeof startStack>[1] = {},
  passwords: Parameters<typeof startRedisTopology>[2] = {},
): Promise<{ stack: Stack; sentinel: SentinelTopology; a: string; b: string }> {
  const topology = await startRedisTopology(t, 'sentinel', passwords)
  if (topology.kind !== 'sentinel') throw new Error('sentinel expected')
  const stack = await startStack(t, {
    replicas: 2,
    ...options,
    config: { ...options.config, session: { store: 'redis', redis: { ...topology.config, timeoutMs: 1000 } } },
  })
  const [a = '', b = ''] = stack.replicas.map((r) => r.gw)
  return { stack, sentinel: topology.sentinel, a, b }
}

const cookieOf = (browser: Browser): string => `ogw=${browser.cookie('ogw')?.value}`

async function status(gw: string, cookie: string, path = '/x'): Promise<number> {
  return (await rawRequest(gw, path, { headers: { ...JSON_ACCEPT, cookie } })).status
}

t.test('Sentinel failover: sessions survive on both replicas, the window answers 503 (never 401 or 500), back-channel logout works after it', async (t) => {
  const { stack, sentinel, a, b } = await sentinelStack(t, { backchannelLogout: true })
  const alice = await stack.signedIn('alice')
  const bob = await stack.signedIn('bob')
  for (const browser of [alice, bob]) t.same([await status(a, cookieOf(browser)), await status(b, cookieOf(browser))], [200, 200], 'signed in, on both')

  const { old } = await sentinel.killPrimary()
  const seen = new Map<number, number>()
  let unavailable: Record<string, unknown> | undefined
  const ready = { during: [] as string[] }
  await eventually(
    'both replicas serve alice again',
    async () => {
      const answers = await Promise.all([a, b].map((gw) => rawRequest(gw, '/x', { headers: { ...JSON_ACCEPT, cookie: cookieOf(alice) } })))
      for (const res of answers) {
        seen.set(res.status, (seen.get(res.status) ?? 0) + 1)
        if (res.status === 503) unavailable ??= res.json()
      }
      if (answers.some((res) => res.status === 503)) {
        const probes = stack.replicas[0]?.live.probes ?? []
        for (const probe of probes) if (!(await probe.ready())) ready.during.push(probe.name)
      }
      return answers.every((res) => res.status === 200)
    },
    60_000,
  )
  t.ok((seen.get(503) ?? 0) > 0, 'the window was seen: requests answered 503')
  t.same(
    [...seen.keys()].filter((code) => code !== 200 && code !== 503),
    [],
    'and nothing but 200 and 503: no 401, no 500',
  )
  t.equal(unavailable?.code, 'session_store_unavailable')
  t.ok(ready.during.includes('redis'), '/readyz named redis while no primary was reachable')
  const promoted = await sentinel.awaitFailover(old)
  t.not(`${promoted.host}:${promoted.port}`, `${old.host}:${old.port}`, 'a replica was promoted')

  for (const browser of [alice, bob])
    t.same([await status(a, cookieOf(browser)), await status(b, cookieOf(browser))], [200, 200], 'the same sessions, on both replicas, after the failover')
  const carol = await stack.signedIn('carol')
  t.equal(await status(b, cookieOf(carol)), 200, 'a sign-in after the failover works')
  for (const replica of stack.replicas) {
    t.match(await replica.live.app.management.metrics.metrics(), /openid_gateway_redis_failovers_total [1-9]/, 'the failover was counted')
  }

  const token = await stack.provider!.signJwt(
    { aud: CLIENT_ID, sub: 'alice', jti: randomUUID(), events: { [BACKCHANNEL_LOGOUT_EVENT]: {} } },
    { typ: 'logout+jwt' },
  )
  const logout = await fetch(a + BACKCHANNEL_LOGOUT_PATH, { method: 'POST', body: new URLSearchParams({ logout_token: token }) })
  t.equal(logout.status, 200, 'back-channel logout after the failover')
  if (logout.status !== 200) t.comment(await logout.text())
  t.same([await status(a, cookieOf(alice)), await status(b, cookieOf(alice))], [401, 401], "ends alice's session on both replicas")
  t.same([await status(a, cookieOf(bob)), await status(b, cookieOf(bob))], [200, 200], "and leaves bob's")
})

t.test('Sentinel failover during a refresh: the rotating refresh token is redeemed once, and the session goes on with the new one', async (t) => {
  const clock = manualClock()
  const { stack, sentinel, a, b } = await sentinelStack(t, { clock, provider: { accessTokenTtlSeconds: 60, rotateRefreshTokens: true } })
  const redeemed: string[] = []
  let refused = 0
  const params = (ctx: { oidc?: { params?: unknown } }): Record<string, unknown> => (ctx.oidc?.params ?? {}) as Record<string, unknown>
  let killed: Promise<{ old: { host: string; port: number } }> | undefined
  stack.provider?.provider.on('grant.success', (ctx) => {
    if (params(ctx).grant_type !== 'refresh_token') return
    redeemed.push(String(params(ctx).refresh_token))
    // The provider has spent the old token; the gateway has yet to keep the new one.
    killed ??= sentinel.killPrimary()
  })
  stack.provider?.provider.on('grant.error', (ctx) => {
    if (params(ctx).grant_type === 'refresh_token') refused++
  })
  const alice = await stack.signedIn('alice')
  // The rotation's result is kept for the grace period or until the new access token expires,
  // whichever comes first, in Redis's real time. A 60-second token keeps it the whole grace
  // (30 s): the failover and the gateways' reconnection must fit in it when the request that
  // refreshed lost its session write to the failover (503) and the next request needs the result.
  clock.advance(60_500)
  const first = await rawRequest(a, '/refreshing', { headers: { ...JSON_ACCEPT, cookie: cookieOf(alice) } })
  t.ok(killed !== undefined, 'the primary was killed while the refresh was under way')
  // Whether the refresh's result was kept before the primary died or after the failover (the
  // coordinator retries until it can), the request itself may end in the window.
  t.ok([200, 503].includes(first.status), `the request that refreshed answered 200 or 503 (${first.status}), never 401 or 500`)
  await sentinel.awaitFailover((await killed!).old)
  await eventually(
    'the gateways reach the new primary',
    async () => (await status(a, cookieOf(alice))) === 200 && (await status(b, cookieOf(alice))) === 200,
    30_000,
  )
  t.pass('the refreshed session serves on both replicas')
  t.equal(redeemed.length, 1, 'the refresh token was redeemed once')
  t.equal(refused, 0, 'and the provider refused nothing (no reuse detected)')
  clock.advance(60_500)
  t.equal(await status(b, cookieOf(alice)), 200, 'the next refresh uses the rotated token the failover kept')
  t.equal(redeemed.length, 2)
  t.equal(new Set(redeemed).size, 2, 'two different refresh tokens')
  t.equal(refused, 0)
})

t.test(
  'Sentinel with passwords, a primary that stops answering (DEBUG SLEEP) instead of dying: the gateways follow the new primary, and nothing written after the failover is lost when the old one wakes',
  async (t) => {
    const { stack, sentinel, a, b } = await sentinelStack(t, {}, { data: 'data-secret-0123', sentinel: 'sentinel-secret-0123' })
    const alice = await stack.signedIn('alice')
    t.same([await status(a, cookieOf(alice)), await status(b, cookieOf(alice))], [200, 200], 'signed in through password-protected sentinels and data nodes')
    const { old, awake } = await sentinel.sleepPrimary(6)
    const seen = await untilServedAgain([a, b], cookieOf(alice))
    await sentinel.awaitFailover(old)
    t.same(
      [...seen].filter((code) => code !== 200 && code !== 503),
      [],
      'nothing but 200 and 503 while the primary slept',
    )
    const bob = await stack.signedIn('bob')
    t.same([await status(a, cookieOf(bob)), await status(b, cookieOf(bob))], [200, 200], "a sign-in during the stale primary's sleep is on the new primary")
    await awake
    // The woken node still believes it is the primary until the sentinels turn it into a replica
    // of the new one (and it drops what it has): a write sent to it would be lost.
    await eventually(
      'the woken primary is a replica again',
      async () => {
        // The sentinels that turn it into a replica close its clients' connections (CLIENT KILL TYPE
        // normal with the REPLICAOF, sentinel.c sentinelSendSlaveOf): asked again on the next look.
        const role = await call(old, ['ROLE'], { password: 'data-secret-0123' }).catch(() => undefined)
        return Array.isArray(role) && role[0] === 'slave'
      },
      30_000,
    )
    for (const browser of [alice, bob])
      t.same([await status(a, cookieOf(browser)), await status(b, cookieOf(browser))], [200, 200], 'every session is still there')
    t.match(
      await stack.replicas[0]!.live.app.management.metrics.metrics(),
      /openid_gateway_redis_errors_total\{kind="(timeout|connection)"\} [1-9]/,
      'the failed commands were counted by kind',
    )
  },
)
