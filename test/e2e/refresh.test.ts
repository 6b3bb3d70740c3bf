import t from 'tap'
import { revokeAtProvider, startStack } from '../fixtures/stack.ts'
import type { Problem } from '#src/contract/errors'

const JSON_ACCEPT = { accept: 'application/json' }

t.test('GET /api/v1/openid/refresh', async (t) => {
  const stack = await startStack(t, { provider: { rotateRefreshTokens: true } })
  const refresh = `${stack.gw}/api/v1/openid/refresh`

  t.test('400 refresh_token_missing without a session', async (t) => {
    const res = await fetch(refresh)
    t.equal(res.status, 400)
    t.match(res.headers.get('content-type'), /^application\/problem\+json/)
    t.equal(((await res.json()) as Problem).code, 'refresh_token_missing')
  })

  t.test('200 with a new access token; the session is updated; rotation is kept', async (t) => {
    const browser = await stack.signedIn('alice')
    const before = browser.cookie('ogw_cred')?.value
    const first = await browser.fetch(refresh)
    t.equal(first.status, 200)
    t.equal(first.headers.get('cache-control'), 'no-store')
    const token1 = ((await first.json()) as { value: string }).value
    t.type(token1, 'string')
    t.not(browser.cookie('ogw_cred')?.value, before, 'the rotated refresh token replaced the old one')
    // With rotation, the old refresh token is spent: a second refresh only works with the new one.
    const second = await browser.fetch(refresh)
    t.equal(second.status, 200)
    const token2 = ((await second.json()) as { value: string }).value
    t.not(token2, token1)
    // The proxied request now uses the session with the new token.
    const page = await browser.fetch(`${stack.gw}/x`, { headers: JSON_ACCEPT })
    t.equal(page.status, 200)
  })

  t.test('409 refresh_token_invalid when the provider refuses it, and the cookies are cleared', async (t) => {
    const browser = await stack.signedIn('alice')
    const cookies = browser.cookieHeader(refresh)
    // The provider revokes the refresh token (a logout elsewhere, an administrator).
    await revokeAtProvider(stack, cookies)
    const res = await browser.fetch(refresh)
    t.equal(res.status, 409)
    t.match(res.headers.get('content-type'), /^application\/problem\+json/)
    t.equal(((await res.json()) as Problem).code, 'refresh_token_invalid')
    const cleared = res.headers.getSetCookie()
    t.ok(
      cleared.some((c) => /^ogw=;.*Max-Age=0.*Path=\//.test(c) || (/^ogw=;/.test(c) && /Max-Age=0/.test(c))),
      'session cookie cleared',
    )
    t.ok(
      cleared.some((c) => /^ogw_cred=;/.test(c) && /Max-Age=0/.test(c) && /Path=\/(;|$)/.test(c)),
      'credentials cleared',
    )
  })

  t.test('with redirectAfter (browser navigation): 302 back on success, to sign-in when refused', async (t) => {
    const browser = await stack.signedIn('bob')
    const ok = await browser.fetch(`${refresh}?redirectAfter=${encodeURIComponent('/page?a=1')}`)
    t.equal(ok.status, 302)
    t.equal(ok.headers.get('location'), '/page?a=1')
    const none = await fetch(`${refresh}?redirectAfter=%2Fpage`, { redirect: 'manual' })
    t.equal(none.status, 302)
    t.equal(none.headers.get('location'), '/api/v1/openid/redirect?redirectAfter=%2Fpage')
    const bad = await fetch(`${refresh}?redirectAfter=${encodeURIComponent('//evil.com')}`)
    t.equal(bad.status, 400)
  })
})

t.test('400 when the provider issued no refresh token', async (t) => {
  const stack = await startStack(t, { config: { provider: { scopes: ['openid', 'email'], offlineAccess: false } } })
  const browser = await stack.signedIn('alice')
  const res = await browser.fetch(`${stack.gw}/api/v1/openid/refresh`)
  t.equal(res.status, 400)
  t.equal(((await res.json()) as Problem).code, 'refresh_token_missing')
})

t.test('502 provider_unavailable when the provider is down; the session is kept', async (t) => {
  const stack = await startStack(t)
  const browser = await stack.signedIn('alice')
  await stack.provider?.close()
  const res = await browser.fetch(`${stack.gw}/api/v1/openid/refresh`)
  t.equal(res.status, 502)
  t.match(res.headers.get('content-type'), /^application\/problem\+json/)
  t.equal(((await res.json()) as Problem).code, 'provider_unavailable')
  t.same(res.headers.getSetCookie(), [], 'no cookie is touched')
  const page = await browser.fetch(`${stack.gw}/still-signed-in`, { headers: JSON_ACCEPT })
  t.equal(page.status, 200, 'the session still works')
})

t.test("one sign-in's credentials cookie is never combined with another's session", async (t) => {
  const stack = await startStack(t)
  const alice = await stack.signedIn('alice')
  const bob = await stack.signedIn('bob')
  const mixed = `ogw=${alice.cookie('ogw')?.value}; ogw_cred=${bob.cookie('ogw_cred')?.value}`
  const res = await fetch(`${stack.gw}/api/v1/openid/refresh`, { headers: { cookie: mixed } })
  t.equal(res.status, 400, "alice's session has no refresh token of its own here")
  t.equal(((await res.json()) as Problem).code, 'refresh_token_missing')
  const logout = await fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE', headers: { cookie: mixed } })
  t.equal(logout.status, 200)
  const { value } = (await logout.json()) as { value: string }
  t.equal(new URL(value).searchParams.get('id_token_hint'), null, "bob's ID token is not used as alice's hint")
  t.equal((await bob.fetch(`${stack.gw}/api/v1/openid/refresh`)).status, 200, "bob's refresh token was not revoked by alice's logout")
})
