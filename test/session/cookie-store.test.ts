import type { FastifyRequest } from 'fastify'
import t from 'tap'
import type { CookiesConfig } from '#src/options/types'
import { systemClock } from '#src/lib/clock'
import { CookieCipher } from '#src/session/cipher'
import { CookieSessionStore } from '#src/session/cookie-store'
import { GatewayCookies } from '#src/session/cookies'
import type { Session } from '#src/session/types'
import { jarReply } from '../fixtures/cookie-jar.ts'

// The cookie store reads the session on every request with one AES-GCM open; the credentials
// cookie is opened only when asked for (an expired access token, a logout), and only where the
// configured credentials path says the cookie travels.

const SECRET = 'cookie-secret-0123456789abcdef-0123456789'
const NOW = Math.floor(Date.now() / 1000)

class CountingCipher extends CookieCipher {
  opened: string[] = []
  override open(purpose: string, sealed: string): unknown {
    this.opened.push(purpose)
    return super.open(purpose, sealed)
  }
}

function setup(credentialsPath: CookiesConfig['credentialsPath']) {
  const cipher = new CountingCipher([SECRET], systemClock)
  const cookies = new GatewayCookies({ name: 'ogw', secrets: [SECRET], secure: false, sameSite: 'lax', credentialsPath }, cipher)
  const store = new CookieSessionStore(cookies, 3600, systemClock)
  return { cipher, store }
}

async function signedInJar(store: CookieSessionStore): Promise<Record<string, string>> {
  const { jar, reply } = jarReply()
  const session: Session = {
    id: 'sid-1',
    claims: { sub: 'alice' },
    accessToken: 'access',
    expiresAt: NOW - 1,
    createdAt: NOW,
    provider: 'default',
    refreshToken: 'refresh',
    idToken: 'id-token',
  }
  await store.create(request({}, '/'), reply, session)
  return jar
}

function request(jar: Record<string, string>, url: string): FastifyRequest {
  return { cookies: { ...jar }, url } as unknown as FastifyRequest
}

t.test('load opens the session cookie only; withCredentials opens the credentials', async (t) => {
  const { cipher, store } = setup('/')
  const jar = await signedInJar(store)
  t.strictSame(Object.keys(jar).sort(), ['ogw', 'ogw_cred'], 'both cookies are in the request')
  const req = request(jar, '/app/data')
  const session = await store.load(req)
  t.strictSame(cipher.opened, ['session:ogw'], 'one open on the hot path')
  t.equal(session?.refreshToken, undefined)
  t.equal(session?.idToken, undefined)
  if (session === undefined) throw new Error('no session')
  const full = await store.withCredentials(req, session)
  t.strictSame(cipher.opened, ['session:ogw', 'credentials:ogw_cred'])
  t.equal(full?.refreshToken, 'refresh')
  t.equal(full?.idToken, 'id-token')
  t.equal(full?.accessToken, 'access')
})

t.test('credentialsPath /api/v1/openid: the credentials are out of reach on any other path', async (t) => {
  const { cipher, store } = setup('/api/v1/openid')
  const jar = await signedInJar(store)
  for (const url of ['/app/data', '/api/v1/openidx', '/api/v1', '/?/api/v1/openid/']) {
    cipher.opened = []
    const req = request(jar, url)
    const session = await store.load(req)
    if (session === undefined) throw new Error('no session')
    t.equal(await store.withCredentials(req, session), undefined, `${url}: not here, even though the browser sent the cookie`)
    t.strictSame(cipher.opened, ['session:ogw'], `${url}: the credentials cookie is not opened`)
  }
  for (const url of ['/api/v1/openid/refresh?redirectAfter=%2F', '/api/v1/openid/logout', '/api/v1/openid']) {
    const req = request(jar, url)
    const session = await store.load(req)
    if (session === undefined) throw new Error('no session')
    t.equal((await store.withCredentials(req, session))?.refreshToken, 'refresh', `${url}: reachable`)
  }
})
