import t from 'tap'
import type { Problem } from '#src/contract/errors'
import { startStack } from '../fixtures/stack.ts'

// Sign-out for people: GET /api/v1/openid/sign-out is a page, POST its form (a page without
// script cannot send the contract's DELETE logout). The form is refused from another site
// (sign-out CSRF), ends the session like DELETE does, and continues at the provider's end-session.

const NAVIGATE = { accept: 'text/html', 'sec-fetch-mode': 'navigate' }

t.test('POST /api/v1/openid/sign-out', async (t) => {
  const stack = await startStack(t, { config: { redirects: { allowedHosts: ['app.example.com'] } } })
  const signOut = `${stack.gw}/api/v1/openid/sign-out`
  const form = { 'content-type': 'application/x-www-form-urlencoded' }

  t.test('from this site: session ended, refresh token revoked, on to the provider end-session', async (t) => {
    const browser = await stack.signedIn('alice')
    const oldCookies = browser.cookieHeader(`${stack.gw}/api/v1/openid/refresh`)
    const res = await browser.fetch(signOut, { method: 'POST', body: '', headers: { ...form, origin: stack.gw } })
    t.equal(res.status, 303)
    const location = new URL(res.headers.get('location') ?? '')
    t.equal(`${location.origin}${location.pathname}`, `${stack.provider?.issuer}/session/end`)
    t.ok(location.searchParams.get('id_token_hint'), 'with id_token_hint, like DELETE')
    t.equal(res.headers.get('cache-control'), 'no-store')
    t.same(
      browser.cookies().filter((c) => c.name.startsWith('ogw')),
      [],
      'no gateway cookie left',
    )
    const replay = await fetch(`${stack.gw}/api/v1/openid/refresh`, { headers: { cookie: oldCookies } })
    t.equal(replay.status, 400, 'a copy of the cookies is no session any more (the refresh token is revoked too: test/e2e/logout.test.ts)')
  })

  t.test('from an allowed host too (forward-auth apps on other hosts)', async (t) => {
    const browser = await stack.signedIn('alice')
    const res = await browser.fetch(signOut, { method: 'POST', headers: { origin: 'https://app.example.com' } })
    t.equal(res.status, 303)
  })

  t.test('no session: already signed out, back to the sign-out page', async (t) => {
    const res = await fetch(signOut, { method: 'POST', headers: { ...form, origin: stack.gw }, body: '', redirect: 'manual' })
    t.equal(res.status, 303)
    t.equal(res.headers.get('location'), '/api/v1/openid/sign-out')
  })

  t.test('sign-out CSRF: another site, an opaque origin or none is refused, the session kept', async (t) => {
    const browser = await stack.signedIn('alice')
    for (const origin of ['https://evil.example', 'null', undefined, `${stack.gw}.evil.example`]) {
      const headers: Record<string, string> = { ...form, ...(origin === undefined ? {} : { origin }) }
      const res = await browser.fetch(signOut, { method: 'POST', body: '', headers })
      t.equal(res.status, 400, `Origin ${origin}`)
      t.equal(((await res.json()) as Problem).code, 'bad_request')
      t.equal(res.headers.getSetCookie().length, 0, 'no cookie touched')
    }
    const still = await browser.fetch(`${stack.gw}/x`, { headers: { accept: 'application/json' } })
    t.equal(still.status, 200, 'still signed in')
  })

  t.test('DELETE logout is unchanged (Allow still names DELETE only)', async (t) => {
    const res = await fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'POST' })
    t.equal(res.status, 405)
    t.equal(res.headers.get('allow'), 'DELETE')
  })
})

t.test('GET /api/v1/openid/sign-out: a page that tells the truth', async (t) => {
  const stack = await startStack(t, { postLogoutPath: '/api/v1/openid/sign-out' })
  const page = `${stack.gw}/api/v1/openid/sign-out`
  const out = await fetch(page, { headers: NAVIGATE })
  t.equal(out.status, 200)
  t.match(out.headers.get('content-type'), /^text\/html/)
  t.match(out.headers.get('content-security-policy'), /^default-src 'none'; style-src 'sha256-/)
  const outHtml = await out.text()
  t.match(outHtml, 'You are signed out')
  t.match(outHtml, `href="${stack.gw}/api/v1/openid/redirect?redirectAfter=%2F">Sign in again</a>`)
  t.notMatch(outHtml, '<form')

  const browser = await stack.signedIn('bob')
  const signedIn = await browser.fetch(page, { navigate: true })
  const html = await signedIn.text()
  t.match(html, 'Signed in as <strong>bob</strong>')
  t.match(html, `<form method="post" action="${stack.gw}/api/v1/openid/sign-out">`)

  // The whole walk: the page's form, the provider's confirmation, back to the page, signed out.
  const done = await browser.follow(page, { method: 'POST', headers: { origin: stack.gw } })
  t.equal(new URL(done.response.url).pathname, '/session/end', 'at the provider')
  const confirmed = await browser.confirmProviderLogout(done.response.url)
  t.equal(confirmed.response.url.split('?')[0], page, 'back at the sign-out page (post_logout_redirect_uri)')
  t.match(new URL(confirmed.response.url).search, /^\?state=[\w-]{43}$/, 'with the state of the logout request (RP-Initiated Logout 1.0 section 2)')
  t.equal(confirmed.response.status, 200)
  t.match(await confirmed.response.text(), 'You are signed out')
})
