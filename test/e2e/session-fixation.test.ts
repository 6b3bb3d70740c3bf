import t from 'tap'
import { systemClock } from '#src/lib/clock'
import { CookieCipher } from '#src/session/cipher'
import type { Browser } from '../fixtures/browser.ts'
import { rawRequest } from '../fixtures/http.ts'
import { COOKIE_SECRET, startStack, type Stack } from '../fixtures/stack.ts'

// No session fixation: a sign-in never adopts the session the browser arrived with. It gets a
// fresh session id, and with a server-side store the old session is ended.

const JSON_ACCEPT = { accept: 'application/json' }

/**
 * Signs the browser in again as `username`. The provider's own cookies are dropped first (or it
 * would silently sign the same user in again); the gateway's cookies stay, as in a browser where
 * someone else signs in, or where an attacker planted a session cookie.
 */
async function signInAgain(stack: Stack, browser: Browser, username: string): Promise<void> {
  const kept = browser.cookies().filter((c) => c.name.startsWith('ogw'))
  browser.clearCookies()
  for (const { name, value, ...attributes } of kept) browser.setCookie(name, value, attributes)
  const res = await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, username)
  if (res.status !== 200) throw new Error(`sign-in as ${username} failed with ${res.status}`)
}

async function userOf(stack: Stack, sessionCookie: string): Promise<string | number> {
  const res = await rawRequest(stack.gw, '/whoami', { headers: { ...JSON_ACCEPT, cookie: `ogw=${sessionCookie}` } })
  if (res.status !== 200) return res.status
  const seen = stack.upstream.requests.at(-1)
  return typeof seen?.headers['x-forwarded-user'] === 'string' ? seen.headers['x-forwarded-user'] : 'no user'
}

t.test('session.store: memory: signing in again ends the old session', async (t) => {
  const stack = await startStack(t, { config: { session: { store: 'memory' } } })
  const browser = await stack.signedIn('alice')
  const alice = browser.cookie('ogw')?.value ?? ''
  t.equal(await userOf(stack, alice), 'alice', 'alice is signed in')

  await signInAgain(stack, browser, 'bob')
  const bob = browser.cookie('ogw')?.value ?? ''
  t.not(bob, alice, 'a new session cookie')
  t.equal(await userOf(stack, bob), 'bob', 'the new cookie is bob')
  t.equal(await userOf(stack, alice), 401, 'the old cookie authenticates nobody any more')
  const refresh = await rawRequest(stack.gw, '/api/v1/openid/refresh', { headers: { cookie: `ogw=${alice}` } })
  t.equal(refresh.status, 400, 'not on the sign-in endpoints either')
})

t.test('session.store: memory: a planted session cookie is never adopted by the victim', async (t) => {
  const stack = await startStack(t, { config: { session: { store: 'memory' } } })
  const attacker = await stack.signedIn('mallory')
  const planted = attacker.cookie('ogw')?.value ?? ''
  const victim = stack.browser()
  victim.setCookie('ogw', planted, { path: '/', httpOnly: true })
  await signInAgain(stack, victim, 'bob')
  const bob = victim.cookie('ogw')?.value ?? ''
  t.not(bob, planted)
  t.equal(await userOf(stack, bob), 'bob')
  t.not(await userOf(stack, planted), 'bob', "the planted value does not give the attacker bob's session")
})

t.test('session.store: cookie: a fresh sign-in sets a new session id', async (t) => {
  const stack = await startStack(t)
  const cipher = new CookieCipher([COOKIE_SECRET], systemClock)
  const browser = await stack.signedIn('alice')
  const alice = browser.cookie('ogw')?.value ?? ''
  const before = cipher.open('session:ogw', alice) as { i: string; c: { sub: string } }
  t.equal(before.c.sub, 'alice')

  await signInAgain(stack, browser, 'bob')
  const bob = browser.cookie('ogw')?.value ?? ''
  const after = cipher.open('session:ogw', bob) as { i: string; c: { sub: string } }
  t.not(bob, alice, 'the ogw value changed')
  t.equal(after.c.sub, 'bob')
  t.not(after.i, before.i, 'a new session id')
  t.equal(await userOf(stack, bob), 'bob')

  // The credentials cookie follows the new session: bob's refresh uses bob's refresh token.
  const refresh = await browser.fetch(`${stack.gw}/api/v1/openid/refresh`)
  t.equal(refresh.status, 200)
  t.equal(cipher.open('session:ogw', browser.cookie('ogw')?.value ?? '') !== undefined, true)
  t.equal((cipher.open('session:ogw', browser.cookie('ogw')?.value ?? '') as { c: { sub: string } }).c.sub, 'bob')
})
