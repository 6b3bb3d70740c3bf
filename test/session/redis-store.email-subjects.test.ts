import { randomBytes } from 'node:crypto'
import type { FastifyReply, FastifyRequest } from 'fastify'
import pino from 'pino'
import t from 'tap'
import { systemClock } from '#src/lib/clock'
import { CookieCipher } from '#src/session/cipher'
import { GatewayCookies } from '#src/session/cookies'
import { connectRedis, firstConnection } from '#src/session/redis-client'
import { RedisKeys } from '#src/session/redis-keys'
import { RedisSessionStore } from '#src/session/redis-store'
import type { Session } from '#src/session/types'
import { startRedis } from '../fixtures/redis.ts'

// A Shared Signals event naming its subject by email (RFC 9493 section 3.2.2) ends the sessions
// of every user whose sessions carry that address: with the Redis store, every member of the
// email link is read, however many share the address. Stopping at some of them would leave the
// others signed in after a revocation.

const SECRET = 'redis-email-test-secret-0123456789abcdef'
const USERS = 250

t.test('subjectsByEmail reads every user of an address shared by more than 100', async (t) => {
  const server = await startRedis(t)
  const redis = await connectRedis({ url: server.url, timeoutMs: 2000 }, pino({ level: 'silent' }))
  t.teardown(() => redis.disconnect())
  await firstConnection(redis, 2000)
  const cipher = new CookieCipher([SECRET], systemClock)
  const cookies = new GatewayCookies({ name: 'ogw', secrets: [SECRET], secure: false, sameSite: 'lax', credentialsPath: '/' }, cipher)
  const store = new RedisSessionStore({ redis, keys: new RedisKeys('email:'), cookies, cipher, maxAgeSeconds: 600, clock: systemClock, indexEmail: true })
  const now = Math.floor(Date.now() / 1000)
  const signIn = (sub: string, email: string, provider = 'default'): Promise<void> => {
    const session: Session = {
      id: randomBytes(32).toString('base64url'),
      claims: { sub, email },
      accessToken: 'at',
      expiresAt: now + 60,
      createdAt: now,
      provider,
    }
    const req = { url: '/', cookies: {} } as unknown as FastifyRequest
    const reply = { setCookie: () => undefined } as unknown as FastifyReply
    return store.create(req, reply, session)
  }
  const shared = Array.from({ length: USERS }, (_, i) => `user-${i}`)
  for (const sub of shared) await signIn(sub, i(sub) % 2 === 0 ? 'Team@Example.com' : 'team@example.com')
  await signIn('someone-else', 'other@example.com')
  await signIn('elsewhere', 'team@example.com', 'partners')

  const found = await store.subjectsByEmail('default', 'TEAM@example.com')
  t.equal(found.length, USERS, `all ${USERS} users of the address, not the first 100`)
  t.same([...found].sort(), [...shared].sort(), 'each of them once')
  t.same(await store.subjectsByEmail('partners', 'team@example.com'), ['elsewhere'], "another provider's user only at that provider")
})

function i(sub: string): number {
  return Number(sub.slice('user-'.length))
}
