import { randomUUID } from 'node:crypto'
import type { FastifyRequest } from 'fastify'
import pino from 'pino'
import t from 'tap'
import { BACKCHANNEL_LOGOUT_PATH, ENDPOINTS } from '#src/contract/endpoints'
import { systemClock, type Clock } from '#src/lib/clock'
import { BACKCHANNEL_LOGOUT_EVENT } from '#src/oidc/logout-token'
import { DEFAULT_PROVIDER } from '#src/options/types'
import { CookieCipher } from '#src/session/cipher'
import { GatewayCookies } from '#src/session/cookies'
import { connectRedis, firstConnection, type RedisClient, type RedisTopology } from '#src/session/redis-client'
import { RedisKeys } from '#src/session/redis-keys'
import { RedisSessionStore } from '#src/session/redis-store'
import type { Browser } from '../fixtures/browser.ts'
import { manualClock } from '../fixtures/clock.ts'
import { rawRequest } from '../fixtures/http.ts'
import { eventually } from '../fixtures/poll.ts'
import { startCluster, type ClusterTopology } from '../fixtures/redis-cluster.ts'
import { untilServedAgain } from '../fixtures/redis-sessions.ts'
import { CONTRACT_MAX_AGE, CONTRACT_SECRET, storeContract } from '../fixtures/store-contract.ts'
import { CLIENT_ID, COOKIE_SECRET, startStack, type Stack, type StackOptions, type Teardown } from '../fixtures/stack.ts'

// The Redis store's replica suite against a real Redis Cluster (3 primaries with a replica each,
// test/fixtures/redis-cluster.ts). Redis Cluster refuses any command, transaction or script whose
// keys hash to more than one slot (CROSSSLOT): every operation here would fail with 503 if one of
// the gateway's did. Then a shard's primary is killed, and a slot is moved under a client's feet.

const JSON_ACCEPT = { accept: 'application/json' }
const MAX_AGE_SECONDS = 600

const cookieOf = (browser: Browser): string => `ogw=${browser.cookie('ogw')?.value}`

async function status(gw: string, cookie: string, path = '/x'): Promise<number> {
  return (await rawRequest(gw, path, { headers: { ...JSON_ACCEPT, cookie } })).status
}

function topologyOf(cluster: ClusterTopology): RedisTopology {
  return { kind: 'cluster', nodes: cluster.nodes, passthroughDns: false, tls: false }
}

async function clusterClient(t: Teardown, cluster: ClusterTopology): Promise<RedisClient> {
  const client = await connectRedis({ topology: topologyOf(cluster), timeoutMs: 2000 }, pino({ level: 'silent' }))
  t.teardown(() => client.disconnect())
  await firstConnection(client, 5000)
  return client
}

let prefixes = 0

/** Two gateway replicas on the cluster, under a key prefix of their own; and a store on the cluster, as a third replica sees it. */
async function clusterStack(t: Teardown, cluster: ClusterTopology, options: StackOptions & { store?: 'redis' | 'cookie' } = {}) {
  const keyPrefix = `cluster${++prefixes}:`
  const stack = await startStack(t, {
    replicas: 2,
    ...options,
    config: {
      ...options.config,
      session: {
        store: options.store ?? 'redis',
        maxAgeSeconds: MAX_AGE_SECONDS,
        redis: { keyPrefix, cluster: { nodes: cluster.nodes.map((n) => `${n.host}:${n.port}`) } },
      },
    },
  })
  const [a = '', b = ''] = stack.replicas.map((r) => r.gw)
  const clock = options.clock ?? systemClock
  const cipher = new CookieCipher([COOKIE_SECRET], clock)
  const keys = new RedisKeys(keyPrefix)
  const store = new RedisSessionStore({
    redis: await clusterClient(t, cluster),
    keys,
    cookies: new GatewayCookies(stack.config.cookies, cipher),
    cipher,
    maxAgeSeconds: MAX_AGE_SECONDS,
    clock,
  })
  const sessionOf = (browser: Browser) => store.load({ cookies: { ogw: browser.cookie('ogw')?.value }, url: '/' } as unknown as FastifyRequest)
  return { stack, a, b, keys, keyPrefix, sessionOf }
}

/** Every refresh token the provider was asked to redeem, and how many it refused. */
function watchRefreshes(stack: Stack): { redeemed: string[]; refused: number } {
  const seen = { redeemed: [] as string[], refused: 0 }
  const params = (ctx: { oidc?: { params?: unknown } }): Record<string, unknown> => (ctx.oidc?.params ?? {}) as Record<string, unknown>
  stack.provider?.provider.on('grant.success', (ctx) => {
    if (params(ctx).grant_type === 'refresh_token') seen.redeemed.push(String(params(ctx).refresh_token))
  })
  stack.provider?.provider.on('grant.error', (ctx) => {
    if (params(ctx).grant_type !== 'refresh_token') return
    seen.redeemed.push(String(params(ctx).refresh_token))
    seen.refused++
  })
  return seen
}

async function backchannelLogout(stack: Stack, gw: string, claims: Record<string, unknown>): Promise<Response> {
  const token = await stack.provider!.signJwt(
    { aud: CLIENT_ID, jti: randomUUID(), events: { [BACKCHANNEL_LOGOUT_EVENT]: {} }, ...claims },
    { typ: 'logout+jwt' },
  )
  return fetch(gw + BACKCHANNEL_LOGOUT_PATH, { method: 'POST', body: new URLSearchParams({ logout_token: token }) })
}

t.test('Redis Cluster', async (t) => {
  const cluster = await startCluster(t)

  t.test('the session store contract', async (t) => {
    const redis = await clusterClient(t, cluster)
    const cookiesOn = (clock: Clock) => {
      const cipher = new CookieCipher([CONTRACT_SECRET], clock)
      return { cipher, cookies: new GatewayCookies({ name: 'ogw', secrets: [CONTRACT_SECRET], secure: false, sameSite: 'lax', credentialsPath: '/' }, cipher) }
    }
    storeContract(
      t,
      async (_t, clock) =>
        new RedisSessionStore({ redis, keys: new RedisKeys(`contract${++prefixes}:`), ...cookiesOn(clock), maxAgeSeconds: CONTRACT_MAX_AGE, clock }),
    )
  })

  t.test(
    'two replicas: a session made on one is used on the other; refresh with a rotating provider redeems each token once; logout on one is refused by the other',
    async (t) => {
      const clock = manualClock()
      // The rotation's result is kept in Redis, in its real time, for the grace period or until the
      // new access token expires, whichever comes first: a 60-second token keeps it the whole grace
      // (30 s). With a 2-second one it lived 1 to 2 s, and a request of the round that a loaded
      // host held longer found no result, redeemed the spent token, and the provider refused it.
      const { stack, a, b } = await clusterStack(t, cluster, { clock, provider: { accessTokenTtlSeconds: 60, rotateRefreshTokens: true } })
      const refreshes = watchRefreshes(stack)
      const alice = await stack.signedIn('alice')
      t.same([await status(a, cookieOf(alice)), await status(b, cookieOf(alice))], [200, 200], 'served by both replicas')
      for (let round = 1; round <= 2; round++) {
        clock.advance(60_500)
        const results = await Promise.all(Array.from({ length: 12 }, (_, i) => status(i % 2 === 0 ? a : b, cookieOf(alice), `/round-${round}-${i}`)))
        t.same(results, Array(12).fill(200), `round ${round}: every request on A and B passes`)
        t.equal(refreshes.redeemed.length, round, `round ${round}: one redemption for both replicas`)
      }
      t.equal(refreshes.refused, 0, 'no refresh token was redeemed twice')
      const explicit = await rawRequest(b, ENDPOINTS.refresh.path, { headers: { ...JSON_ACCEPT, cookie: cookieOf(alice) } })
      t.equal(explicit.status, 200, 'GET /refresh')
      const logout = await rawRequest(a, ENDPOINTS.logout.path, { method: 'DELETE', headers: { ...JSON_ACCEPT, cookie: cookieOf(alice) } })
      t.equal(logout.status, 200, 'logged out on A')
      t.equal(await status(b, cookieOf(alice)), 401, 'refused on B')
    },
  )

  t.test('back-channel logout by sid and by sub ends those sessions on both replicas, and only those; a replayed token is refused', async (t) => {
    const { stack, a, b, sessionOf } = await clusterStack(t, cluster, { backchannelLogout: true })
    const alice1 = await stack.signedIn('alice')
    const alice2 = await stack.signedIn('alice')
    const bob = await stack.signedIn('bob')
    const sid = (await sessionOf(alice1))?.claims.sid
    t.type(sid, 'string', 'the session keeps its provider session id')

    const bySid = await backchannelLogout(stack, a, { sid })
    t.equal(bySid.status, 200, 'a logout token naming only the sid')
    t.same([await status(a, cookieOf(alice1)), await status(b, cookieOf(alice1))], [401, 401], 'ends that session on both (found through the sid -> user link)')
    t.same([await status(a, cookieOf(alice2)), await status(b, cookieOf(alice2))], [200, 200], "alice's other session is not")

    const claims = { sub: 'alice', jti: randomUUID() }
    const bySub = await backchannelLogout(stack, b, claims)
    t.equal(bySub.status, 200, 'a logout token naming the sub')
    t.same([await status(a, cookieOf(alice2)), await status(b, cookieOf(alice2))], [401, 401], 'ends every session of alice, on both')
    t.same([await status(a, cookieOf(bob)), await status(b, cookieOf(bob))], [200, 200], "bob's is not")

    const replay = await backchannelLogout(stack, a, claims)
    t.equal(replay.status, 400, 'the same jti again, at the other replica: refused (replay)')
  })

  t.test('cookie store: the revocation list on the cluster ends a session on both replicas', async (t) => {
    const { stack, a, b } = await clusterStack(t, cluster, { backchannelLogout: true, store: 'cookie' })
    const alice = await stack.signedIn('alice')
    const bob = await stack.signedIn('bob')
    const cookies = (browser: Browser): string => browser.cookieHeader(a)
    t.same([await status(a, cookies(alice)), await status(b, cookies(alice))], [200, 200])
    t.equal((await backchannelLogout(stack, a, { sub: 'alice' })).status, 200)
    await eventually('both replicas refuse alice', async () => (await status(a, cookies(alice))) === 401 && (await status(b, cookies(alice))) === 401, 10_000)
    t.same([await status(a, cookies(bob)), await status(b, cookies(bob))], [200, 200], 'bob is still signed in')
  })

  t.test("a shard's primary dies: its replica takes over, the sessions on that shard survive, the window answers 503", async (t) => {
    const { stack, a, b, keys, keyPrefix } = await clusterStack(t, cluster)
    const alice = await stack.signedIn('alice')
    const bob = await stack.signedIn('bob')
    const aliceKey = keys.session(keys.userTag({ provider: DEFAULT_PROVIDER, sub: 'alice' }), 'x')
    t.ok(aliceKey.startsWith(keyPrefix))
    const primary = await cluster.primaryForKey(aliceKey)
    const { old } = await cluster.killPrimary(primary)
    const seen = await untilServedAgain([a, b], cookieOf(alice))
    await cluster.awaitFailover(old)
    t.same(
      [...seen].filter((code) => code !== 200 && code !== 503),
      [],
      'nothing but 200 and 503 during the failover',
    )
    t.same([await status(a, cookieOf(bob)), await status(b, cookieOf(bob))], [200, 200], "bob's session too")
    const carol = await stack.signedIn('carol')
    t.equal(await status(b, cookieOf(carol)), 200, 'sign-ins work after the failover')
  })

  t.test('a slot moved to another primary: the gateway follows the MOVED redirection, and counts it', async (t) => {
    const { stack, a, keys } = await clusterStack(t, cluster)
    const dave = await stack.signedIn('dave')
    t.equal(await status(a, cookieOf(dave)), 200)
    const key = keys.session(keys.userTag({ provider: DEFAULT_PROVIDER, sub: 'dave' }), 'x')
    const owner = await cluster.primaryForKey(key)
    const target = (await cluster.primaries()).find((p) => p.host !== owner.host || p.port !== owner.port)
    if (target === undefined) throw new Error('no other primary')
    const raw = await clusterClient(t, cluster)
    await cluster.moveSlot(Number(await raw.cluster('KEYSLOT', key)), target)
    t.equal(await status(a, cookieOf(dave)), 200, 'the session is read from its new primary')
    const metrics = await stack.replicas[0]!.live.app.management.metrics.metrics()
    t.match(metrics, /openid_gateway_redis_redirections_total\{kind="moved"\} [1-9]/, 'the redirection was counted')
    t.match(metrics, /openid_gateway_redis_command_duration_seconds_count\{command="get"\} [1-9]/, 'and the latency of the reads, by command')
    t.match(metrics, /openid_gateway_redis_command_duration_seconds_count\{command="evalsha"\} [1-9]/, 'and of the scripts')
  })
})
