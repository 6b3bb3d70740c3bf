import t from 'tap'
import { CLIENT_ID, CLIENT_SECRET, refreshTokenOf, startStack } from '../fixtures/stack.ts'
import type { Problem } from '#src/contract/errors'

t.test('DELETE /api/v1/openid/logout', async (t) => {
  const stack = await startStack(t)
  const logout = `${stack.gw}/api/v1/openid/logout`

  t.test('401 unauthenticated without a session', async (t) => {
    const res = await fetch(logout, { method: 'DELETE' })
    t.equal(res.status, 401)
    t.match(res.headers.get('content-type'), /^application\/problem\+json/)
    t.equal(((await res.json()) as Problem).code, 'unauthenticated')
    const forged = await fetch(logout, { method: 'DELETE', headers: { cookie: 'ogw=forged.value' } })
    t.equal(forged.status, 401, 'a forged cookie is no session')
  })

  t.test('200: every gateway cookie deleted, refresh token revoked, end-session URL returned', async (t) => {
    const browser = await stack.signedIn('alice')
    const oldCookies = browser.cookieHeader(`${stack.gw}/api/v1/openid/refresh`)
    const res = await browser.fetch(logout, { method: 'DELETE' })
    t.equal(res.status, 200)
    t.match(res.headers.get('content-type'), /^application\/json/)
    const { value } = (await res.json()) as { value: string }
    const url = new URL(value)
    t.equal(`${url.origin}${url.pathname}`, `${stack.provider?.issuer}/session/end`)
    t.ok(url.searchParams.get('id_token_hint'), 'id_token_hint')
    t.equal(url.searchParams.get('post_logout_redirect_uri'), `${stack.gw}/`)
    t.match(url.searchParams.get('state'), /^[\w-]{43}$/, 'a fresh state (RP-Initiated Logout 1.0 section 2)')
    t.equal(url.searchParams.get('client_id'), CLIENT_ID)

    const setCookies = res.headers.getSetCookie()
    for (const [name, path] of [
      ['ogw', '/'],
      ['ogw_cred', '/'],
    ] as const) {
      const cleared = setCookies.find((c) => c.startsWith(`${name}=;`))
      t.ok(cleared, `${name} is cleared`)
      t.match(cleared, /Max-Age=0/)
      t.match(cleared, new RegExp(`Path=${path.replaceAll('/', '\\/')}(;|$)`))
    }
    t.same(
      browser.cookies().filter((c) => c.name.startsWith('ogw')),
      [],
      'the browser holds no gateway cookie',
    )

    // The session is gone ...
    const page = await browser.fetch(`${stack.gw}/x`, { headers: { accept: 'application/json' } })
    t.equal(page.status, 401)
    // ... for a copy of the old cookies too: the logout listed the session (its id) ...
    const replay = await fetch(`${stack.gw}/api/v1/openid/refresh`, { headers: { cookie: oldCookies } })
    t.equal(replay.status, 400)
    t.equal(((await replay.json()) as Problem).code, 'refresh_token_missing', 'the copy carries no session')
    // ... and the refresh token was revoked at the provider: redeeming it there fails.
    const grant = await fetch(`${stack.provider?.issuer}/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${CLIENT_ID}:${CLIENT_SECRET}`).toString('base64')}`,
      },
      body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshTokenOf(stack, oldCookies) }),
    })
    t.equal(grant.status, 400)
    t.equal(((await grant.json()) as { error: string }).error, 'invalid_grant', 'revoked at the provider')

    // The end-session URL works at the provider (RP-initiated logout) and comes back to us.
    const done = await browser.confirmProviderLogout(value)
    t.ok(
      done.visited.some((u) => u.startsWith(`${stack.gw}/`)),
      'redirected to post_logout_redirect_uri',
    )
  })

  t.test('405 method_not_allowed with Allow on the wrong method', async (t) => {
    for (const method of ['GET', 'POST', 'PUT']) {
      const res = await fetch(logout, { method })
      t.equal(res.status, 405, method)
      t.equal(res.headers.get('allow'), 'DELETE')
      t.equal(((await res.json()) as Problem).code, 'method_not_allowed')
    }
    for (const path of ['redirect', 'callback', 'refresh']) {
      const res = await fetch(`${stack.gw}/api/v1/openid/${path}`, { method: 'DELETE' })
      t.equal(res.status, 405, path)
      // The callback also takes the form post response mode's POST.
      t.equal(res.headers.get('allow'), path === 'callback' ? 'GET, HEAD, POST' : 'GET, HEAD')
    }
  })

  t.test('404 not_found for unknown paths under /api/v1/openid, never proxied', async (t) => {
    const before = stack.upstream.requests.length
    for (const path of ['/api/v1/openid', '/api/v1/openid/', '/api/v1/openid/nope', '/api/v1/openid/redirect/x']) {
      const res = await fetch(stack.gw + path)
      t.equal(res.status, 404, path)
      t.equal(((await res.json()) as Problem).code, 'not_found')
    }
    t.equal(stack.upstream.requests.length, before)
  })
})

t.test('a failing provider does not fail the logout', async (t) => {
  const stack = await startStack(t)
  const browser = await stack.signedIn('alice')
  await stack.provider?.close()
  const res = await browser.fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE' })
  t.equal(res.status, 200)
  const { value } = (await res.json()) as { value: string }
  // Not the provider's end-session, which the browser could not reach either (test/e2e/sign-out-provider-down.test.ts).
  t.equal(value, `${stack.gw}/api/v1/openid/sign-out?provider=unreachable`)
  t.ok(res.headers.getSetCookie().some((c) => c.startsWith('ogw=;')))
})

t.test('with a server-side store, logout deletes the session itself, not only the cookies', async (t) => {
  const stack = await startStack(t, { config: { session: { store: 'memory' } } })
  const browser = await stack.signedIn('alice')
  // A copy of the cookie, as a stolen one would be: clearing the browser's cookies is not enough.
  const copy = `ogw=${browser.cookie('ogw')?.value}`
  const json = { accept: 'application/json' }
  t.equal((await fetch(`${stack.gw}/x`, { headers: { ...json, cookie: copy } })).status, 200)
  t.equal((await browser.fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE' })).status, 200)
  const replay = await fetch(`${stack.gw}/x`, { headers: { ...json, cookie: copy } })
  t.equal(replay.status, 401)
  t.equal(((await replay.json()) as Problem).code, 'unauthenticated')
  t.equal((await fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE', headers: { cookie: copy } })).status, 401)
})
