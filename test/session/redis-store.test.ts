import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyReply, FastifyRequest } from 'fastify'
import pino from 'pino'
import { systemClock } from '#src/lib/clock'
import { CookieCipher } from '#src/session/cipher'
import { GatewayCookies } from '#src/session/cookies'
import { connectRedis, firstConnection, reconnectDelay, redisEndpoint } from '#src/session/redis-client'
import { RedisKeys } from '#src/session/redis-keys'
import { RedisSessionStore } from '#src/session/redis-store'
import { defineScripts, runScript } from '#src/session/redis-scripts'
import type { Session } from '#src/session/types'
import { startRedis } from '../fixtures/redis.ts'

const SECRET = 'redis-store-test-secret-0123456789abcdef'
const PASSWORD = 'redis-test-pa55word'
const cipher = new CookieCipher([SECRET], systemClock)
const cookies = new GatewayCookies({ name: 'ogw', secrets: [SECRET], secure: false, sameSite: 'lax', credentialsPath: '/' }, cipher)

/** A request carrying `cookieValue` as the session cookie, and a reply that records Set-Cookie. */
function exchange(cookieValue?: string) {
  const set: Record<string, string> = {}
  const req = { url: '/', cookies: cookieValue === undefined ? {} : { ogw: cookieValue } } as unknown as FastifyRequest
  const reply = { setCookie: (name: string, value: string) => (set[name] = value) } as unknown as FastifyReply
  return { req, reply, set }
}

function session(id: string, sub: string, sid: string): Session {
  const now = Math.floor(Date.now() / 1000)
  return { id, claims: { sub, sid }, accessToken: `at-${id}`, expiresAt: now + 60, createdAt: now, refreshToken: `rt-${id}`, provider: 'default' }
}

t.test('reconnection never gives up, with a capped backoff', async (t) => {
  t.equal(reconnectDelay(1), 100)
  t.equal(reconnectDelay(5), 500)
  t.equal(reconnectDelay(10_000), 2000, 'capped at 2 s, and a number: ioredis stops reconnecting only on a non-number')
})

t.test('the logged endpoint has no credentials', async (t) => {
  t.equal(redisEndpoint(`rediss://gw:${PASSWORD}@redis.example.com:6380/2`), 'rediss://redis.example.com:6380/2')
  t.equal(redisEndpoint('redis://lone-secret@127.0.0.1'), 'redis://127.0.0.1')
})

t.test('against a real redis-server with a password', async (t) => {
  const server = await startRedis(t, { requirePass: PASSWORD })
  const lines: string[] = []
  const log = pino({ level: 'info' }, { write: (line: string) => lines.push(line) })
  const unhandled: string[] = []
  const consoleError = console.error
  console.error = (...args: unknown[]) => unhandled.push(args.map(String).join(' '))
  t.teardown(() => (console.error = consoleError))
  const url = `redis://:${PASSWORD}@127.0.0.1:${server.port}`
  const redis = await connectRedis({ url, timeoutMs: 500 }, log)
  t.teardown(() => redis.disconnect())
  await firstConnection(redis, 2000)
  const store = new RedisSessionStore({ redis, keys: new RedisKeys('unit:'), cookies, cipher, maxAgeSeconds: 600, clock: systemClock })
  defineScripts(redis)

  t.test('save, load, end; a refresh finishing after end does not bring the session back', async (t) => {
    t.ok(await store.ping(), 'ping: reachable')
    const signIn = exchange()
    const alice = session('id-alice-1', 'alice', 'sid-1')
    await store.create(signIn.req, signIn.reply, alice)
    const cookie = signIn.set.ogw
    t.type(cookie, 'string', 'a new session sets the reference cookie')
    const loaded = await store.load(exchange(cookie).req)
    t.same(loaded, alice, 'the session round-trips with its credentials')
    t.equal(await store.load(exchange('garbage').req), undefined, 'a foreign cookie is no session')

    const refresh = exchange(cookie)
    t.equal(await store.update(refresh.req, refresh.reply, { ...alice, accessToken: 'at-2' }), true)
    t.same(refresh.set, {}, 'an update sets no cookie')
    t.equal((await store.load(exchange(cookie).req))?.accessToken, 'at-2')

    await store.end({ provider: 'default', sub: 'alice' })
    t.equal(await store.load(exchange(cookie).req), undefined, 'ended')
    const late = exchange(cookie)
    t.equal(await store.update(late.req, late.reply, { ...alice, accessToken: 'at-3' }), false, 'not stored')
    t.equal(await store.load(exchange(cookie).req), undefined, 'a late refresh does not recreate it')
    t.equal(late.set.ogw, '', 'and signs the browser out')
  })

  t.test('expireTokens replaces a session only if it still holds the value read: a refresh stored meanwhile is kept', async (t) => {
    const signIn = exchange()
    const dave = session('id-dave-1', 'dave', 'sid-4')
    await store.create(signIn.req, signIn.reply, dave)
    const keys = new RedisKeys('unit:')
    const key = keys.session(keys.userTag({ provider: 'default', sub: 'dave' }), keys.ref(dave.id))
    const read = await redis.get(key)
    // A refresh stores new tokens after expireTokens read the session, before it writes.
    const refresh = exchange(signIn.set.ogw)
    t.equal(await store.update(refresh.req, refresh.reply, { ...dave, accessToken: 'at-refreshed' }), true)
    const refreshed = await redis.get(key)
    t.equal(await runScript(redis, 'ogwReplaceSessions', [key], [String(read), 'stale-write', dave.createdAt + 600]), 0, 'not replaced')
    t.equal(await redis.get(key), refreshed, 'the refresh is kept')
    await store.expireTokens({ provider: 'default', sub: 'dave' })
    t.match(await store.load(exchange(signIn.set.ogw).req), { accessToken: 'at-refreshed', expiresAt: 0 }, 'read again, it is expired')
  })

  t.test('subjectsByEmail: through the email link, kept only with indexEmail; a changed claim no longer matches', async (t) => {
    const keys = new RedisKeys('email:')
    const indexed = new RedisSessionStore({ redis, keys, cookies, cipher, maxAgeSeconds: 600, clock: systemClock, indexEmail: true })
    const withEmail = (id: string, sub: string, email: string, provider = 'default'): Session => ({
      ...session(id, sub, `sid-${id}`),
      claims: { sub, sid: `sid-${id}`, email },
      provider,
    })
    const erin = exchange()
    await indexed.create(erin.req, erin.reply, withEmail('id-erin-1', 'erin', 'Erin@Example.com'))
    await indexed.create(exchange().req, exchange().reply, withEmail('id-erin-2', 'erin', 'erin@example.com'))
    await indexed.create(exchange().req, exchange().reply, withEmail('id-frank-1', 'frank', 'frank@example.com'))
    await indexed.create(exchange().req, exchange().reply, withEmail('id-erin-other', 'erin-at-other', 'erin@example.com', 'other'))
    t.same(await indexed.subjectsByEmail('default', 'ERIN@example.COM'), ['erin'], 'case-insensitive, at that provider only')
    t.same(await indexed.subjectsByEmail('other', 'erin@example.com'), ['erin-at-other'])
    t.same(await indexed.subjectsByEmail('default', 'nobody@example.com'), [])
    const link = keys.emailUsers('default', 'erin@example.com')
    const ttl = await redis.ttl(link)
    t.ok(ttl > 0 && ttl <= 600, 'the link expires with its sessions')
    t.notMatch((await redis.keys('email:*')).join(' '), /erin|example/i, 'no address in a key name')
    // The provider changed the address: the old one names nobody any more.
    const refresh = exchange(erin.set.ogw)
    await indexed.update(refresh.req, refresh.reply, withEmail('id-erin-1', 'erin', 'erin@new.example.com'))
    await indexed.end({ provider: 'default', sid: 'sid-id-erin-2' })
    t.same(await indexed.subjectsByEmail('default', 'erin@example.com'), [], 'the old address no longer matches')
    t.same(await indexed.subjectsByEmail('default', 'erin@new.example.com'), ['erin'], 'the new one does')

    const plainKeys = new RedisKeys('plain:')
    const plain = new RedisSessionStore({ redis, keys: plainKeys, cookies, cipher, maxAgeSeconds: 600, clock: systemClock })
    await plain.create(exchange().req, exchange().reply, withEmail('id-gina-1', 'gina', 'gina@example.com'))
    t.equal(await redis.exists(plainKeys.emailUsers('default', 'gina@example.com')), 0, 'without indexEmail a sign-in writes no link')
    t.same(await plain.subjectsByEmail('default', 'gina@example.com'), [])
  })

  t.test('Redis down: operations fail with 503 and are counted, ping is false, nothing unhandled; back by itself', async (t) => {
    const signIn = exchange()
    await store.create(signIn.req, signIn.reply, session('id-bob', 'bob', 'sid-2'))
    const errorsBefore = store.errors
    await server.stop()
    t.notOk(await store.ping(), 'ping: unreachable')
    const operations: Array<[string, () => Promise<unknown>]> = [
      ['load', () => store.load(exchange(signIn.set.ogw).req)],
      ['create', () => store.create(exchange().req, exchange().reply, session('id-carol', 'carol', 'sid-3'))],
      ['destroy', () => store.destroy(exchange(signIn.set.ogw).req, exchange().reply)],
      ['end', () => store.end({ provider: 'default', sub: 'bob' })],
    ]
    for (const [name, operation] of operations) {
      await t.rejects(operation(), { code: 'session_store_unavailable', status: 503 }, `${name} fails closed`)
    }
    t.equal(store.errors, errorsBefore + 4, 'store.errors counts every failed operation')

    // An outage that outlasts several reconnection attempts (100, 200, ... ms): none is the last.
    // Real time: ioredis' reconnection timers are what is waited for, not an expiry.
    await sleep(2500)
    await server.start()
    let back = false
    for (let i = 0; i < 60 && !back; i++) {
      back = await store.ping()
      if (!back) await sleep(100)
    }
    t.ok(back, 'ping is true again without any action')
    t.equal(await store.load(exchange(signIn.set.ogw).req), undefined, 'the data is gone (no persistence), a miss is no error')
    const messages = lines.map((line) => (JSON.parse(line) as { msg: string }).msg)
    t.ok(messages.includes('redis connection lost; reconnecting'), 'the loss is logged')
    t.ok(messages.includes('redis connection back'), 'and the return')
    t.ok(messages.filter((m) => m === 'redis connection lost; reconnecting').length === 1, 'once, not per attempt')
    t.notMatch(lines.join('\n'), PASSWORD, 'never with the password')
    t.same(unhandled, [], 'ioredis printed no unhandled error event')
  })
})
