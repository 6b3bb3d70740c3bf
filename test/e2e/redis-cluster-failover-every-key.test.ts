import { randomUUID } from 'node:crypto'
import type { FastifyRequest } from 'fastify'
import pino from 'pino'
import t from 'tap'
import { BACKCHANNEL_LOGOUT_PATH, ENDPOINTS, SSF_EVENTS_PATH } from '#src/contract/endpoints'
import { systemClock } from '#src/lib/clock'
import { BACKCHANNEL_LOGOUT_EVENT } from '#src/oidc/logout-token'
import { DEFAULT_PROVIDER } from '#src/options/types'
import { CookieCipher } from '#src/session/cipher'
import { GatewayCookies } from '#src/session/cookies'
import { connectRedis, firstConnection } from '#src/session/redis-client'
import { RedisKeys } from '#src/session/redis-keys'
import { RedisSessionStore } from '#src/session/redis-store'
import { REFRESH_MS } from '#src/session/revocation'
import type { Browser } from '../fixtures/browser.ts'
import { rawRequest } from '../fixtures/http.ts'
import { eventually } from '../fixtures/poll.ts'
import { startCluster, type Addr, type ClusterTopology } from '../fixtures/redis-cluster.ts'
import { sameAddr } from '../fixtures/redis-node.ts'
import { SESSION_REVOKED, startTransmitter, type Transmitter } from '../fixtures/ssf-transmitter.ts'
import { CLIENT_ID, COOKIE_SECRET, startStack, type Stack, type StackOptions } from '../fixtures/stack.ts'

// A Redis Cluster shard's primary is killed (SIGKILL) and its replica promoted: every family of
// keys the gateway keeps was put on that primary on purpose (the slots asked of the cluster with
// CLUSTER KEYSLOT), and each is used after the promotion by what uses it in production:
// - the session, its sid and sub indexes, the refresh lock and kept result (the user's hash tag):
//   refresh, proxied requests, logout, back-channel logout by sub and by sid;
// - the sid -> user link (a key of its own slot): refresh rewrites it, a logout token naming only
//   the sid reads it; a user whose session is elsewhere but whose link was on the failed primary
//   must refresh like everyone else;
// - the email -> users link: a Shared Signals session-revoked naming an email;
// - the cookie store's revocation list (`{revocations}`): a back-channel logout.
// Each is allowed the failover's window (503, polled for, never slept for), then must answer as
// before the failure: Redis Cluster specification, "MOVED Redirection" (a client follows it and
// refreshes its slot map) and "Replica promotion".

const JSON_ACCEPT = { accept: 'application/json' }
const MAX_AGE_SECONDS = 600
const PUSH_AUTHORIZATION = 'Bearer push-secret-0123456789abcdef'
/** How long an operation may keep answering 503 once the promotion is done: the client follows within 2 s (docs/deploy/high-availability.md), plus a command timeout. */
const RECOVERY_MS = 2000 + 2000

const cookieOf = (browser: Browser): string => `ogw=${browser.cookie('ogw')?.value}`

async function statusOn(gw: string, cookie: string, path = '/x'): Promise<number> {
  return (await rawRequest(gw, path, { headers: { ...JSON_ACCEPT, cookie } })).status
}

/** Runs `attempt` until it answers something else than 503 (the failover's window), at most RECOVERY_MS; that answer. */
async function afterTheWindow(what: string, attempt: () => Promise<number>): Promise<number> {
  let last = 0
  try {
    await eventually(what, async () => (last = await attempt()) !== 503, RECOVERY_MS)
  } catch {
    // Still 503: the assertion on `last` says which operation stayed stuck.
  }
  return last
}

function clusterConfig(cluster: ClusterTopology, keyPrefix: string, store: 'redis' | 'cookie'): Record<string, unknown> {
  return { store, maxAgeSeconds: MAX_AGE_SECONDS, redis: { keyPrefix, cluster: { nodes: cluster.nodes.map((n) => `${n.host}:${n.port}`) } } }
}

async function logoutToken(stack: Stack, claims: Record<string, unknown>): Promise<string> {
  return stack.provider!.signJwt({ aud: CLIENT_ID, jti: randomUUID(), events: { [BACKCHANNEL_LOGOUT_EVENT]: {} }, ...claims }, { typ: 'logout+jwt' })
}

/** A back-channel logout, a fresh token at each attempt (a replayed jti is refused). */
async function backchannelLogout(stack: Stack, gw: string, claims: Record<string, unknown>): Promise<number> {
  const res = await fetch(gw + BACKCHANNEL_LOGOUT_PATH, { method: 'POST', body: new URLSearchParams({ logout_token: await logoutToken(stack, claims) }) })
  await res.body?.cancel()
  return res.status
}

function ssfReachable(stack: Stack, replica: number): boolean {
  const probe = stack.replicas[replica]?.app.management.probes.find((p) => p.name === 'shared_signals')
  return (probe?.detail?.() as Record<string, Record<string, unknown>> | undefined)?.default?.reachable === true
}

async function pushTo(gw: string, tx: Transmitter, email: string): Promise<number> {
  const { token } = await tx.sign(SESSION_REVOKED, { subId: { format: 'email', email } })
  const res = await rawRequest(gw, SSF_EVENTS_PATH, {
    method: 'POST',
    headers: { 'content-type': 'application/secevent+jwt', authorization: PUSH_AUTHORIZATION },
    body: token,
  })
  return res.status
}

t.test(
  'a Redis Cluster primary holding every key family is killed: after the promotion, refresh, logout, back-channel logout and Shared Signals revocation all work',
  async (t) => {
    const cluster = await startCluster(t)
    const tx = await startTransmitter({ audience: CLIENT_ID })
    t.teardown(() => tx.close())

    const keys = new RedisKeys('failover:')
    // The primary to kill is the one of the revocation list's slot; every other key family is put
    // there by choosing users (and waiting for provider sessions) whose keys hash to its slots.
    const doomed = await cluster.primaryForKey(keys.revocations())
    const on = async (key: string, node: Addr = doomed): Promise<boolean> => sameAddr(await cluster.primaryForKey(key), node)
    const tagOf = (sub: string): string => keys.userTag({ provider: DEFAULT_PROVIDER, sub })
    const userKey = (sub: string): string => keys.bySub(tagOf(sub))
    const taken = new Set<string>()
    /** A new username whose keys are (or, with `elsewhere`, are not) on the doomed primary, and whose email link is there when asked. */
    const userOnDoomed = async (options: { elsewhere?: boolean; email?: boolean } = {}): Promise<string> => {
      for (let i = 0; ; i++) {
        const name = `user${i}`
        if (taken.has(name)) continue
        if ((await on(userKey(name))) === (options.elsewhere === true)) continue
        if (options.email === true && !(await on(keys.emailUsers(DEFAULT_PROVIDER, `${name}@example.com`)))) continue
        taken.add(name)
        return name
      }
    }

    const stackOptions = (store: 'redis' | 'cookie', prefix: string): StackOptions => ({
      replicas: 2,
      backchannelLogout: true,
      provider: { rotateRefreshTokens: true },
      config: {
        session: clusterConfig(cluster, prefix, store),
        ...(store === 'redis' ? { provider: { ssf: { configurationUrl: tx.configurationUrl, delivery: 'push', authorization: PUSH_AUTHORIZATION } } } : {}),
      },
    })
    // A view of the cluster as a third replica sees it: the sessions' sid (the provider chooses it).
    const redis = await connectRedis(
      { topology: { kind: 'cluster', nodes: cluster.nodes, passthroughDns: false, tls: false }, timeoutMs: 2000 },
      pino({ level: 'silent' }),
    )
    t.teardown(() => redis.disconnect())
    await firstConnection(redis, 5000)
    // The cookie store's revocation list refuses sessions created before it started, and a gateway
    // whose first write of that start is lost (its Cluster client not ready yet, on a loaded
    // machine) starts it at its first check instead, which can come a second after a sign-in: it
    // is started here, as an earlier deployment would have, so that only the failover is tested.
    const cookieKeys = new RedisKeys('failover-cookie:')
    await redis.set(cookieKeys.revocationsSince(), String(Math.floor(Date.now() / 1000) - 1), 'NX')
    const redisStack = await startStack(t, stackOptions('redis', 'failover:'))
    const cookieStack = await startStack(t, stackOptions('cookie', 'failover-cookie:'))
    const [a, b] = redisStack.replicas.map((r) => r.gw) as [string, string]
    const [c, d] = cookieStack.replicas.map((r) => r.gw) as [string, string]
    for (const i of redisStack.replicas.keys()) await eventually(`replica ${i} has read the transmitter`, () => ssfReachable(redisStack, i))

    const cipher = new CookieCipher([COOKIE_SECRET], systemClock)
    const store = new RedisSessionStore({
      redis,
      keys,
      cookies: new GatewayCookies(redisStack.config.cookies, cipher),
      cipher,
      maxAgeSeconds: MAX_AGE_SECONDS,
      clock: systemClock,
    })
    const sidOf = async (browser: Browser): Promise<string> =>
      String((await store.load({ cookies: { ogw: browser.cookie('ogw')?.value }, url: '/' } as unknown as FastifyRequest))?.claims.sid)
    /** Signs `name` in until the provider session's sid -> user link is on the doomed primary. */
    const signedInWithLinkOnDoomed = async (name: string): Promise<{ browser: Browser; sid: string }> => {
      for (let i = 0; i < 40; i++) {
        const browser = await redisStack.signedIn(name)
        const sid = await sidOf(browser)
        if (await on(keys.sidUser(DEFAULT_PROVIDER, sid))) return { browser, sid }
      }
      throw new Error('no sid landed on the doomed primary')
    }

    // Redis store: who does what after the failover.
    const linked = await userOnDoomed({ elsewhere: true })
    const { browser: linkedBrowser, sid: linkedSid } = await signedInWithLinkOnDoomed(linked)
    const refresher = await userOnDoomed()
    const refresherBrowser = await redisStack.signedIn(refresher)
    const bySub = await userOnDoomed()
    const bySubBrowser = await redisStack.signedIn(bySub)
    const bySid = await userOnDoomed()
    const { browser: bySidBrowser, sid: bySidSid } = await signedInWithLinkOnDoomed(bySid)
    const byEmail = await userOnDoomed({ email: true })
    const byEmailBrowser = await redisStack.signedIn(byEmail)
    const bystander = await userOnDoomed()
    const bystanderBrowser = await redisStack.signedIn(bystander)
    // Cookie store: the revocation list is on the doomed primary.
    const revoked = await cookieStack.signedIn('alice')
    const kept = await cookieStack.signedIn('bob')
    const everyone = [linkedBrowser, refresherBrowser, bySubBrowser, bySidBrowser, byEmailBrowser, bystanderBrowser]
    for (const browser of everyone) t.same([await statusOn(a, cookieOf(browser)), await statusOn(b, cookieOf(browser))], [200, 200])
    t.equal(await statusOn(d, revoked.cookieHeader(d)), 200)
    t.ok(
      !(await on(userKey(linked))) && (await on(keys.sidUser(DEFAULT_PROVIDER, linkedSid))),
      "the linked user's session is elsewhere, its sid -> user link on the doomed primary",
    )

    const { old } = await cluster.killPrimary(doomed)
    const promoted = await cluster.awaitFailover(old)
    t.ok(await on(keys.revocations(), promoted), 'the replica serves the doomed slots')

    // The sid -> user link's user first, before anything else touches the failed shard's slots.
    t.equal(
      await afterTheWindow(
        'the linked user refreshes',
        async () => (await rawRequest(a, ENDPOINTS.refresh.path, { headers: { ...JSON_ACCEPT, cookie: cookieOf(linkedBrowser) } })).status,
      ),
      200,
      'refresh of a user whose sid -> user link was on the failed primary (it rewrites the link)',
    )
    t.equal(await statusOn(b, cookieOf(linkedBrowser)), 200, 'and that session is served on the other replica')

    for (const [gw, round] of [
      [b, 1],
      [a, 2],
    ] as const) {
      t.equal(
        await afterTheWindow(
          'the refresher refreshes',
          async () => (await rawRequest(gw, ENDPOINTS.refresh.path, { headers: { ...JSON_ACCEPT, cookie: cookieOf(refresherBrowser) } })).status,
        ),
        200,
        `refresh ${round} of a session on the failed primary (its lock, kept result, session and indexes)`,
      )
    }
    t.equal(
      await afterTheWindow(
        'the refresher logs out',
        async () => (await rawRequest(a, ENDPOINTS.logout.path, { method: 'DELETE', headers: { ...JSON_ACCEPT, cookie: cookieOf(refresherBrowser) } })).status,
      ),
      200,
      'logout of it',
    )
    t.equal(await statusOn(b, cookieOf(refresherBrowser)), 401, 'refused on the other replica after the logout')

    t.equal(
      await afterTheWindow('a back-channel logout by sub', () => backchannelLogout(redisStack, b, { sub: bySub })),
      200,
      'back-channel logout naming the sub (the sub index)',
    )
    t.same([await statusOn(a, cookieOf(bySubBrowser)), await statusOn(b, cookieOf(bySubBrowser))], [401, 401], 'that user is signed out on both replicas')

    t.equal(
      await afterTheWindow('a back-channel logout by sid', () => backchannelLogout(redisStack, a, { sid: bySidSid })),
      200,
      'back-channel logout naming only the sid (the link and the sid index)',
    )
    t.same([await statusOn(a, cookieOf(bySidBrowser)), await statusOn(b, cookieOf(bySidBrowser))], [401, 401], 'that session is ended on both replicas')

    t.equal(
      await afterTheWindow('a session-revoked by email', () => pushTo(b, tx, `${byEmail}@example.com`)),
      202,
      'Shared Signals session-revoked naming the email (the email link)',
    )
    t.same([await statusOn(a, cookieOf(byEmailBrowser)), await statusOn(b, cookieOf(byEmailBrowser))], [401, 401], 'that user is signed out on both replicas')

    t.equal(
      await afterTheWindow('a back-channel logout by the linked sid', () => backchannelLogout(redisStack, b, { sid: linkedSid })),
      200,
      'back-channel logout of the linked user by sid, through the rewritten link',
    )
    t.same(
      [await statusOn(a, cookieOf(linkedBrowser)), await statusOn(b, cookieOf(linkedBrowser))],
      [401, 401],
      'the linked user is signed out on both replicas',
    )
    t.same(
      [await statusOn(a, cookieOf(bystanderBrowser)), await statusOn(b, cookieOf(bystanderBrowser))],
      [200, 200],
      'a user nobody ended, whose keys were on the failed primary, is still signed in',
    )

    t.equal(
      await afterTheWindow('a back-channel logout on the cookie store', () => backchannelLogout(cookieStack, c, { sub: 'alice' })),
      200,
      'back-channel logout with the cookie store (the revocation list)',
    )
    t.equal(await statusOn(c, revoked.cookieHeader(c)), 401, 'refused on the replica that received it')
    await eventually('the other replica refuses alice', async () => (await statusOn(d, revoked.cookieHeader(d))) === 401, REFRESH_MS + 4000)
    t.equal(await statusOn(d, kept.cookieHeader(d)), 200, 'bob is still signed in')
  },
)
