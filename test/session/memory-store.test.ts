import type { FastifyReply, FastifyRequest } from 'fastify'
import t from 'tap'
import { CookieCipher } from '#src/session/cipher'
import { GatewayCookies } from '#src/session/cookies'
import { MemorySessionStore } from '#src/session/memory-store'
import type { Session } from '#src/session/types'
import { manualClock } from '../fixtures/clock.ts'
import { jarReply } from '../fixtures/cookie-jar.ts'

// The memory store's bound: sign-ins are created by clients, so their number must not decide
// the gateway's memory. When full, the oldest sign-in goes first, and each eviction is counted.

const SECRET = 'cookie-secret-0123456789abcdef-0123456789'
const MAX_AGE = 3600

function setup(maxSessions: number) {
  const clock = manualClock()
  const cipher = new CookieCipher([SECRET], clock)
  const cookies = new GatewayCookies({ name: 'ogw', secrets: [SECRET], secure: false, sameSite: 'lax', credentialsPath: '/' }, cipher)
  const store = new MemorySessionStore(cookies, MAX_AGE, { maxSessions, maxSessionsPerUser: maxSessions }, clock)
  t.teardown(() => store.close())
  /** Saves a session and returns the browser's cookie jar for it. */
  async function signIn(id: string, createdAt = Math.floor(clock.now() / 1000)): Promise<Record<string, string>> {
    const { jar, reply } = jarReply()
    const session: Session = { id, claims: { sub: id }, accessToken: `at-${id}`, expiresAt: createdAt + 300, createdAt, provider: 'default' }
    await store.create(request(jar), reply, session)
    return jar
  }
  return { store, signIn, clock }
}

function request(jar: Record<string, string>): FastifyRequest {
  return { cookies: { ...jar }, url: '/x' } as unknown as FastifyRequest
}

t.test('at most maxSessions sessions; the oldest sign-in is evicted first and counted', async (t) => {
  const { store, signIn } = setup(3)
  const jars = [await signIn('s1'), await signIn('s2'), await signIn('s3')]
  t.equal(store.evictions.store_full, 0)
  for (const jar of jars) t.ok(await store.load(request(jar)), 'all three are kept')

  jars.push(await signIn('s4'))
  t.equal(store.evictions.store_full, 1)
  t.equal(await store.load(request(jars[0] ?? {})), undefined, 'the oldest (s1) is gone')
  for (const jar of jars.slice(1)) t.ok(await store.load(request(jar)), 's2, s3 and s4 are kept')

  jars.push(await signIn('s5'), await signIn('s6'))
  t.equal(store.evictions.store_full, 3)
  t.same(
    await Promise.all(jars.map(async (jar) => (await store.load(request(jar)))?.id)),
    [undefined, undefined, undefined, 's4', 's5', 's6'],
    'evicted in sign-in order',
  )
})

t.test('a refresh (saving a known session) neither evicts nor makes a session younger', async (t) => {
  const { store, signIn } = setup(2)
  const a = await signIn('a')
  await signIn('b')
  const session = await store.load(request(a))
  if (session === undefined) throw new Error('no session a')
  const noCookies = { setCookie: () => noCookies } as unknown as FastifyReply
  await store.update(request(a), noCookies, { ...session, accessToken: 'refreshed' })
  t.equal(store.evictions.store_full, 0, 'saving a known session takes no new room')
  t.equal((await store.load(request(a)))?.accessToken, 'refreshed')
  await signIn('c')
  t.equal(await store.load(request(a)), undefined, 'a, signed in first, is still the oldest')
  t.equal(store.evictions.store_full, 1)
})

t.test('ended sessions make room first and are not counted as evictions', async (t) => {
  const { store, signIn, clock } = setup(2)
  const old = await signIn('old')
  clock.advance(MAX_AGE * 1000)
  const live = await signIn('live')
  const next = await signIn('next')
  t.equal(store.evictions.store_full, 0, 'the ended session made the room')
  t.equal(await store.load(request(old)), undefined)
  t.ok(await store.load(request(live)))
  t.ok(await store.load(request(next)))
})
