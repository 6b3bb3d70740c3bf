import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { systemClock } from '#src/lib/clock'
import { CookieCipher } from '#src/session/cipher'
import { manualClock } from '../fixtures/clock.ts'
import { rawRequest } from '../fixtures/http.ts'
import { KEY_PREFIX, MAX_AGE_SECONDS, startRedisSessions } from '../fixtures/redis-sessions.ts'
import { COOKIE_SECRET, type Stack } from '../fixtures/stack.ts'

// Two gateway replicas sharing sessions through a real redis-server.

const JSON_ACCEPT = { accept: 'application/json' }

function replicaUrls(stack: Stack): [string, string] {
  return [stack.replicas[0]?.gw ?? '', stack.replicas[1]?.gw ?? '']
}

/** Every refresh token the provider was asked to redeem, in order, and how many it refused. */
function watchRefreshes(stack: Stack): { redeemed: string[]; refused: number } {
  const seen = { redeemed: [] as string[], refused: 0 }
  const params = (ctx: { oidc?: { params?: unknown } }): Record<string, unknown> => (ctx.oidc?.params ?? {}) as Record<string, unknown>
  stack.provider?.provider.on('grant.success', (ctx) => {
    const p = params(ctx)
    if (p.grant_type === 'refresh_token') seen.redeemed.push(String(p.refresh_token))
  })
  stack.provider?.provider.on('grant.error', (ctx) => {
    const p = params(ctx)
    if (p.grant_type === 'refresh_token') {
      seen.redeemed.push(String(p.refresh_token))
      seen.refused++
    }
  })
  return seen
}

t.test('a session made on one replica is used on the other; the browser holds only a sealed id; Redis holds no readable token', async (t) => {
  const { stack, raw } = await startRedisSessions(t, { upstreams: [{ name: 'app', forwardAccessToken: true }] })
  const [a, b] = replicaUrls(stack)
  const browser = await stack.signedIn('alice')
  const res = await browser.fetch(`${b}/on-b`)
  t.equal(res.status, 200, 'replica B serves the session made on A')
  const seen = stack.upstream.requests.at(-1)
  t.equal(seen?.headers['x-forwarded-user'], 'alice')
  const accessToken = String(seen?.headers.authorization).replace(/^Bearer /, '')
  t.ok(accessToken.length > 20, 'the upstream got the access token')

  const gatewayCookies = browser.cookies().filter((c) => c.name.startsWith('ogw'))
  t.same(
    gatewayCookies.map((c) => c.name),
    ['ogw'],
    'one gateway cookie, no credentials cookie',
  )
  const cookie = browser.cookie('ogw')?.value ?? ''
  const opened = new CookieCipher([COOKIE_SECRET], systemClock).open('session:ogw', cookie)
  t.same(Object.keys(opened as object), ['i', 'u'], "the cookie seals the session id and its user's key tag alone")
  const id = (opened as { i: string }).i
  t.match(id, /^[A-Za-z0-9_-]{43}$/, 'the id is 256 random bits (base64url), well over 128')
  t.notMatch(cookie, accessToken.slice(0, 20))

  const keys = await raw.keys('*')
  t.ok(keys.length > 0 && keys.every((k) => k.startsWith(KEY_PREFIX)), 'every key carries the prefix')
  const dump = [...keys, ...(await Promise.all(keys.filter((k) => k.includes(':session:')).map((k) => raw.get(k))))].join('\n')
  for (const [what, secret] of [
    ['the access token', accessToken.slice(-24)],
    ['the session id', id],
    ['the subject', 'alice'],
    ['the email', 'alice@example.com'],
  ]) {
    t.notMatch(dump, secret as string, `a Redis dump does not show ${what}`)
  }

  t.equal((await rawRequest(a, '/on-a', { headers: { ...JSON_ACCEPT, cookie: `ogw=${cookie}` } })).status, 200, 'replica A too')
  const second = await stack.signedIn('alice')
  t.not(second.cookie('ogw')?.value, cookie, 'a new sign-in gets a new id')
})

t.test('a session expires with session.maxAgeSeconds: its Redis entry ends at createdAt + maxAgeSeconds, a refresh does not extend it', async (t) => {
  const clock = manualClock()
  const { stack, raw, sessionOf } = await startRedisSessions(t, { clock, provider: { accessTokenTtlSeconds: 2 } })
  const [, b] = replicaUrls(stack)
  const browser = await stack.signedIn('alice')
  const cookie = browser.cookie('ogw')?.value ?? ''
  const session = await sessionOf(cookie)
  const [key] = await raw.keys(`${KEY_PREFIX}*:session:*`)
  const endsAt = ((await raw.pexpiretime(key ?? '')) as number) / 1000
  t.equal(endsAt, (session?.createdAt ?? 0) + MAX_AGE_SECONDS, 'Redis expires the entry at the absolute end of the session')
  clock.advance(2300)
  t.equal((await browser.fetch(`${b}/later`)).status, 200, 'refreshed on B')
  t.not((await sessionOf(cookie))?.accessToken, session?.accessToken, 'with a new access token')
  t.equal(((await raw.pexpiretime(key ?? '')) as number) / 1000, endsAt, 'and the same end')
  for (const index of [...(await raw.keys(`${KEY_PREFIX}sid:*`)), ...(await raw.keys(`${KEY_PREFIX}sub:*`))]) {
    t.equal(((await raw.pexpiretime(index)) as number) / 1000, endsAt, 'the index sets expire with their session')
  }
  await raw.del(key ?? '')
  const gone = await rawRequest(b, '/after', { headers: { ...JSON_ACCEPT, cookie: `ogw=${cookie}` } })
  t.equal(gone.status, 401, 'once its entry has expired the session is gone on every replica')
})

t.test('refresh on both replicas at once with a rotating provider: every request passes, each refresh token is redeemed once', async (t) => {
  const clock = manualClock()
  const { stack } = await startRedisSessions(t, {
    clock,
    // A 60-second token: the rotation's result then lives the whole grace (30 s) in Redis's real
    // time, not the 1 to 2 s of a 2-second token, which a request held by a loaded host outlived.
    provider: { accessTokenTtlSeconds: 60, rotateRefreshTokens: true },
    upstreams: [{ name: 'app', forwardAccessToken: true }],
  })
  const [a, b] = replicaUrls(stack)
  const refreshes = watchRefreshes(stack)
  const browser = await stack.signedIn('alice')
  const cookie = `ogw=${browser.cookie('ogw')?.value}`
  for (let round = 1; round <= 2; round++) {
    clock.advance(60_500)
    const results = await Promise.all(
      Array.from({ length: 16 }, (_, i) => rawRequest(i % 2 === 0 ? a : b, `/round-${round}-${i}`, { headers: { ...JSON_ACCEPT, cookie } })),
    )
    t.same(
      results.map((r) => r.status),
      Array(16).fill(200),
      `round ${round}: all 16 requests on A and B pass`,
    )
    t.equal(refreshes.redeemed.length, round, `round ${round}: one refresh for both replicas`)
    const tokens = new Set(stack.upstream.requests.slice(-16).map((r) => r.headers.authorization))
    t.equal(tokens.size, 1, `round ${round}: every request carries the same fresh token`)
  }
  t.equal(new Set(refreshes.redeemed).size, refreshes.redeemed.length, 'the provider never saw a refresh token twice')
  t.equal(refreshes.refused, 0, 'and refused none (the grant was not revoked)')
})

t.test('log out through one replica, refused by the other', async (t) => {
  const { stack, raw } = await startRedisSessions(t)
  const [a, b] = replicaUrls(stack)
  const browser = await stack.signedIn('alice')
  const cookie = `ogw=${browser.cookie('ogw')?.value}`
  t.equal((await rawRequest(b, '/x', { headers: { ...JSON_ACCEPT, cookie } })).status, 200)
  const logout = await rawRequest(a, '/api/v1/openid/logout', { method: 'DELETE', headers: { ...JSON_ACCEPT, cookie } })
  t.equal(logout.status, 200, 'logged out on A')
  t.same(await raw.keys(`${KEY_PREFIX}*:session:*`), [], 'the session is deleted from Redis')
  const after = await rawRequest(b, '/x', { headers: { ...JSON_ACCEPT, cookie } })
  t.equal(after.status, 401, 'B refuses the old cookie')
  t.equal(after.json().code, 'unauthenticated')
})

t.test('store.end by sid and by sub ends those sessions on every replica, and only those', async (t) => {
  const { stack, store, sessionOf } = await startRedisSessions(t, { backchannelLogout: true })
  const [a, b] = replicaUrls(stack)
  const status = async (browserCookie: string, origin: string): Promise<number> =>
    (await rawRequest(origin, '/x', { headers: { ...JSON_ACCEPT, cookie: `ogw=${browserCookie}` } })).status
  const alice1 = (await stack.signedIn('alice')).cookie('ogw')?.value ?? ''
  const alice2 = (await stack.signedIn('alice')).cookie('ogw')?.value ?? ''
  const bob = (await stack.signedIn('bob')).cookie('ogw')?.value ?? ''
  const sid = (await sessionOf(alice1))?.claims.sid
  t.type(sid, 'string', 'the session keeps the provider session id')
  t.not((await sessionOf(alice2))?.claims.sid, sid, 'each browser has its own provider session')

  await store.end({ provider: 'default', sid: sid as string })
  t.same([await status(alice1, a), await status(alice1, b)], [401, 401], 'the session of that sid is ended on A and B')
  t.same([await status(alice2, a), await status(alice2, b)], [200, 200], "alice's other session is not")

  await store.end({ provider: 'default', sid: (await sessionOf(alice2))?.claims.sid as string, sub: 'bob' })
  t.same([await status(alice2, a), await status(alice2, b)], [200, 200], 'a sid with another sub ends nothing')

  await store.end({ provider: 'default', sub: 'alice' })
  t.same([await status(alice2, a), await status(alice2, b)], [401, 401], 'by sub: every session of alice is ended')
  t.same([await status(bob, a), await status(bob, b)], [200, 200], "bob's is not")
})

t.test('Redis stopped mid-test: 503 session_store_unavailable on both replicas, no crash; back by itself when Redis returns', async (t) => {
  const { stack, redisServer } = await startRedisSessions(t)
  const [a, b] = replicaUrls(stack)
  const browser = await stack.signedIn('alice')
  const cookie = `ogw=${browser.cookie('ogw')?.value}`
  await redisServer.stop()

  for (const origin of [a, b]) {
    const res = await rawRequest(origin, '/x', { headers: { ...JSON_ACCEPT, cookie } })
    t.equal(res.status, 503, 'a request with a session answers 503')
    t.match(res.headers['content-type'], /^application\/problem\+json/)
    t.equal(res.json().code, 'session_store_unavailable')
  }
  const page = await browser.fetch(`${b}/page`, { headers: { accept: 'text/html' } })
  t.equal(page.status, 503, 'a browser navigation gets 503 too, not a redirect to sign-in')
  for (const [method, path] of [
    ['GET', '/api/v1/openid/refresh'],
    ['DELETE', '/api/v1/openid/logout'],
  ] as const) {
    const res = await rawRequest(a, path, { method, headers: { ...JSON_ACCEPT, cookie } })
    t.equal(res.status, 503, `${method} ${path} answers 503`)
    t.equal(res.json().code, 'session_store_unavailable')
  }
  const signIn = await stack.browser().signIn(`${b}/api/v1/openid/redirect`, 'carol')
  t.equal(signIn.status, 503, 'a sign-in cannot be stored: 503')
  t.equal((await rawRequest(a, '/x', { headers: JSON_ACCEPT })).status, 401, 'a request without a session needs no store')

  await redisServer.start()
  let resumed = 0
  for (let i = 0; i < 100 && resumed === 0; i++) {
    const res = await stack.browser().signIn(`${b}/api/v1/openid/redirect`, 'carol')
    if (res.status === 200) resumed = i + 1
    else await sleep(100)
  }
  t.ok(resumed > 0, 'a new sign-in works again without a restart of the gateway')
  const fresh = await stack.signedIn('dave')
  t.equal((await fresh.fetch(`${b}/x`)).status, 200, 'and is served by the other replica')
  const old = await rawRequest(a, '/x', { headers: { ...JSON_ACCEPT, cookie } })
  t.equal(old.status, 401, 'the old session is gone: this Redis had no persistence')
})
