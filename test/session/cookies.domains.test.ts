import type { CookieSerializeOptions } from '@fastify/cookie'
import t from 'tap'
import type { CookiesConfig } from '#src/options/types'
import { systemClock } from '#src/lib/clock'
import { CookieCipher } from '#src/session/cipher'
import { SIGN_IN_PATH } from '#src/contract/endpoints'
import { GatewayCookies, sessionCookieName } from '#src/session/cookies'
import type { SessionReply, SessionRequest } from '#src/session/types'
import { jarReply } from '../fixtures/cookie-jar.ts'
import { problems, resolve } from '../fixtures/config/base.ts'

// Several cookie domains at the cookie level (session/cookies.ts): which Domain each cookie gets
// for a request's host (the longest configured domain it is in, else host-only), that the single
// cookies.domain keeps its meaning, that a session ending expires every variant, and that a
// session's cookies handed over (routes/handoff.ts) open on the other domain. And `check`.

const SECRET = 'cookie-secret-0123456789abcdef-0123456789'
const LATER = Math.floor(Date.now() / 1000) + 3600

function codec(config: Partial<CookiesConfig> = {}): GatewayCookies {
  const cipher = new CookieCipher([SECRET], systemClock)
  return new GatewayCookies({ name: 'ogw', secrets: [SECRET], secure: true, sameSite: 'lax', credentialsPath: SIGN_IN_PATH, ...config }, cipher)
}

function at(host: string | undefined, jar: Record<string, string> = {}): SessionRequest {
  return { url: '/', cookies: jar, host }
}

/** A reply recording each Set-Cookie with its attributes. */
function recorder(): { reply: SessionReply; set: Array<{ name: string; value: string; options: CookieSerializeOptions }> } {
  const set: Array<{ name: string; value: string; options: CookieSerializeOptions }> = []
  return { reply: { setCookie: (name, value, options) => set.push({ name, value, options }) }, set }
}

t.test('the longest configured domain the host is in, on a dot boundary; host-only in none', async (t) => {
  const cookies = codec({ domains: ['example.org', 'eu.example.org', 'example.com'] })
  t.equal(cookies.domainFor('shop.eu.example.org'), 'eu.example.org', 'the longer of two matches')
  t.equal(cookies.domainFor('eu.example.org:8443'), 'eu.example.org', 'the domain itself, port ignored')
  t.equal(cookies.domainFor('shop.example.org'), 'example.org')
  t.equal(cookies.domainFor('APP.Example.COM'), 'example.com', 'case-insensitive')
  t.equal(cookies.domainFor('notexample.org'), undefined, 'a bare suffix is no match (oauth2-proxy would take example.org)')
  t.equal(cookies.domainFor('example.org.evil.net'), undefined, 'a domain inside another name is no match')
  t.equal(cookies.domainFor('[::1]:8080'), undefined, 'an IP literal is in no domain')
  t.equal(cookies.domainFor(undefined), undefined, 'no host: host-only')
  t.equal(cookies.configuredDomainOf('shop.example.org'), 'example.org')
})

t.test('the single cookies.domain is set whatever the host, as before', async (t) => {
  const cookies = codec({ domain: 'example.com' })
  t.equal(cookies.domainFor('gateway.internal:4180'), 'example.com', 'a forward-auth call from the ingress keeps the domain')
  t.equal(cookies.domainFor(undefined), 'example.com')
  t.equal(cookies.configuredDomainOf('app.example.com'), undefined, 'no hand-off with the single domain')
  const { reply, set } = recorder()
  cookies.clear(reply, 'session')
  t.same([...new Set(set.map((c) => c.options.domain))], ['example.com'], 'cleared on its domain only')
})

t.test('names: __Secure- with domains (no Domain on a __Host- cookie, RFC 6265bis 4.1.3.2), the same on every domain', async (t) => {
  t.equal(sessionCookieName({ name: 'ogw', secure: true, domains: ['example.com'] }), '__Secure-ogw')
  t.equal(sessionCookieName({ name: 'ogw', secure: true }), '__Host-ogw')
  const cookies = codec({ domains: ['example.com', 'example.org'] })
  const { reply, set } = recorder()
  cookies.write(at('a.example.com'), reply, 'session', { x: 1 }, LATER)
  cookies.write(at('b.example.org'), reply, 'session', { x: 1 }, LATER)
  cookies.write(at('elsewhere.net'), reply, 'session', { x: 1 }, LATER)
  t.same(
    set.map((c) => [c.name, c.options.domain]),
    [
      ['__Secure-ogw', 'example.com'],
      ['__Secure-ogw', 'example.org'],
      ['__Secure-ogw', undefined],
    ],
  )
})

t.test('a session ending expires each cookie host-only and on every configured domain', async (t) => {
  const cookies = codec({ domains: ['example.com', 'example.org'] })
  const { reply, set } = recorder()
  cookies.clear(reply, 'session')
  const first = set.filter((c) => c.name === '__Secure-ogw')
  t.same(
    first.map((c) => c.options.domain),
    [undefined, 'example.com', 'example.org'],
  )
  t.ok(
    first.every((c) => c.options.maxAge === 0),
    'each one expired',
  )
})

t.test("a session's cookies handed over open on the other domain, with that domain", async (t) => {
  const cookies = codec({ domains: ['example.com', 'example.org'] })
  const { jar, reply } = jarReply()
  cookies.write(at('auth.example.com'), reply, 'session', { who: 'alice' }, LATER)
  cookies.write(at('auth.example.com'), reply, 'credentials', { refresh: 'r'.repeat(5000) }, LATER)
  const handed = cookies.handOver(at('auth.example.com', jar))
  t.ok(handed, 'handed over')
  t.same(
    handed?.cookies.map(([name]) => name).sort(),
    ['__Secure-ogw', '__Secure-ogw_cred', '__Secure-ogw_cred_1'],
    'the credentials in two chunks, and the session',
  )
  const { reply: there, set } = recorder()
  if (handed === undefined) return
  cookies.receive(at('shop.example.org'), there, handed, LATER)
  t.ok(
    set.every((c) => c.options.domain === 'example.org'),
    "set for the host's domain",
  )
  t.same(set.find((c) => c.name === '__Secure-ogw_cred')?.options.path, SIGN_IN_PATH, "each on its role's path")
  const received = Object.fromEntries(set.map((c) => [c.name, c.value]))
  t.same(cookies.read(at('shop.example.org', received), 'session'), { who: 'alice' }, 'the session opens there')
  t.same(cookies.read(at('shop.example.org', received), 'credentials'), { refresh: 'r'.repeat(5000) })
  t.equal(cookies.handOver(at('auth.example.com', {})), undefined, 'nothing to hand without a session cookie')
  const { reply: stale, set: staleSet } = recorder()
  cookies.receive(at('shop.example.org', { '__Secure-ogw_1': 'old chunk' }), stale, handed, LATER)
  t.ok(
    staleSet.some((c) => c.name === '__Secure-ogw_1' && c.options.maxAge === 0 && c.options.domain === 'example.org'),
    'a chunk of an earlier, larger session there is expired',
  )
  const { reply: other, set: none } = recorder()
  cookies.receive(at('shop.example.org'), other, { cookies: [['app_cookie', 'x']] }, LATER)
  t.same(none, [], "a name that is not the session's is never set")
})

t.test('hand-off seals open for their own step and host only', async (t) => {
  const cookies = codec({ domains: ['example.com', 'example.org'] })
  const sealed = cookies.sealHandoff('token', 'a.example.org', { v: 1 }, LATER)
  t.same(cookies.openHandoff('token', 'a.example.org', sealed), { v: 1 })
  t.equal(cookies.openHandoff('token', 'b.example.org', sealed), undefined, 'another host')
  t.equal(cookies.openHandoff('request', 'a.example.org', sealed), undefined, 'another step')
  t.equal(cookies.read(at('a.example.org', { '__Secure-ogw': sealed }), 'session'), undefined, 'never a session cookie')
})

t.test('check: cookies.domains is validated, naming the key', async (t) => {
  t.same(resolve({ cookies: { domains: ['.Example.COM', 'example.org'] } }).cookies.domains, ['example.com', 'example.org'], 'lowercased, leading dot dropped')
  t.strictSame(problems({ cookies: { domains: ['example.com', 'https://example.org'] } }), [
    'cookies.domains[1]: must be a domain name (no scheme, port or path)',
  ])
  t.strictSame(problems({ cookies: { domains: 'example.com' } }), ['cookies.domains: must be a list'])
  t.strictSame(problems({ cookies: { domains: [] } }), ['cookies.domains: must not be empty'])
  t.strictSame(problems({ cookies: { domain: 'example.com', domains: ['example.org'] } }), [
    'cookies.domains: cannot be used with cookies.domain: list every domain here',
  ])
  t.strictSame(problems({ cookies: { domains: ['example.com', 'example.org'], sameSite: 'strict' } }), [
    'cookies.sameSite: strict cannot be used with several cookies.domains: the hand-off between domains is cross-site',
  ])
  t.strictSame(problems({ cookies: { domains: ['example.com'], sameSite: 'strict' } }), [], 'strict with one domain: no hand-off')
  t.strictSame(problems({ cookies: { domains: Array.from({ length: 11 }, (_, i) => `d${i}.example`) } }), [
    'cookies.domains: at most 10 domains (each costs a Set-Cookie line when a session ends)',
  ])
})
