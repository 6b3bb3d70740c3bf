import t from 'tap'
import { startStack } from '../fixtures/stack.ts'
import type { Problem } from '#src/contract/errors'

t.test('GET /api/v1/openid/callback', async (t) => {
  const stack = await startStack(t)
  const callback = `${stack.gw}/api/v1/openid/callback`
  const start = `${stack.gw}/api/v1/openid/redirect`

  /** Signs in and returns the callback URL the provider sent the browser to. */
  function callbackUrlOf(history: string[]): string {
    const url = history.find((u) => u.startsWith(callback))
    if (url === undefined) throw new Error('no callback in history')
    return url
  }

  t.test('success without redirectAfter: 200 with the access token, session cookies set, transaction cleared', async (t) => {
    const browser = stack.browser()
    const res = await browser.signIn(start, 'alice')
    t.equal(res.status, 200)
    t.match(res.headers.get('content-type'), /^application\/json/)
    t.equal(res.headers.get('cache-control'), 'no-store')
    const body = (await res.json()) as { value: string }
    t.same(Object.keys(body), ['value'])
    t.ok(body.value.length > 10, 'an access token')
    const setCookies = res.headers.getSetCookie()
    const session = setCookies.find((c) => c.startsWith('ogw='))
    const credentials = setCookies.find((c) => c.startsWith('ogw_cred='))
    t.ok(session, 'session cookie set')
    t.ok(credentials, 'credentials cookie set')
    t.match(session, /; Path=\/;/)
    t.match(session, /; HttpOnly/)
    t.match(session, /; SameSite=Lax/)
    t.match(credentials, /; Path=\/;/, 'the refresh token cookie travels on every path (opened only on expiry)')
    t.match(credentials, /; HttpOnly/)
    t.notMatch(setCookies.join('\n'), body.value, 'the access token is not readable in any cookie')
    const tx = setCookies.find((c) => c.startsWith('ogw_tx_'))
    t.match(tx, /Max-Age=0/, 'the transaction cookie is cleared')
    t.notOk(browser.cookies().some((c) => c.name.startsWith('ogw_tx_')))
  })

  t.test('success with redirectAfter: 302 to it', async (t) => {
    const browser = stack.browser()
    const res = await browser.signIn(`${start}?redirectAfter=${encodeURIComponent('/app/page?x=1')}`, 'bob')
    t.equal(res.status, 302)
    t.equal(res.headers.get('location'), '/app/page?x=1')
    t.ok(browser.cookie('ogw'))
  })

  t.test('400 code_missing when the code is missing or empty, checked first', async (t) => {
    for (const query of ['', '?state=abc', '?code=&state=abc', '?code']) {
      const res = await fetch(callback + query)
      t.equal(res.status, 400, query)
      t.match(res.headers.get('content-type'), /^application\/problem\+json/)
      t.equal(((await res.json()) as Problem).code, 'code_missing')
    }
  })

  t.test("the provider's error and error_description are echoed as JSON strings, never as HTML (for this browser's live sign-in)", async (t) => {
    const description = '<script>alert(1)</script> "quoted"'
    const browser = stack.browser()
    const started = await browser.fetch(`${start}?performRedirect=false`)
    const state = new URL(((await started.json()) as { value: string }).value).searchParams.get('state') ?? ''
    const res = await browser.fetch(`${callback}?error=access_denied&error_description=${encodeURIComponent(description)}&state=${state}`)
    t.equal(res.status, 400)
    t.match(res.headers.get('content-type'), /^application\/problem\+json/)
    const body = (await res.json()) as Problem
    t.equal(body.code, 'code_missing')
    t.equal(body.error, 'access_denied')
    t.equal(body.error_description, description)
  })

  t.test('403 state_mismatch: state missing, unknown, or from another browser', async (t) => {
    const res1 = await fetch(`${callback}?code=abc`)
    t.equal(res1.status, 403)
    t.equal(((await res1.json()) as Problem).code, 'state_mismatch')
    const res2 = await fetch(`${callback}?code=abc&state=unknownstate0123456789`)
    t.equal(res2.status, 403)
    t.equal(((await res2.json()) as Problem).code, 'state_mismatch')

    // Browser A starts a sign-in; its callback URL is delivered to browser B (login CSRF).
    const a = stack.browser()
    const started = await a.fetch(start)
    const state = new URL(started.headers.get('location') ?? '').searchParams.get('state')
    const b = stack.browser()
    const res3 = await b.fetch(`${callback}?code=abc&state=${state}`)
    t.equal(res3.status, 403)
    t.equal(((await res3.json()) as Problem).code, 'state_mismatch')
    t.same(
      res3.headers.getSetCookie().filter((c) => !c.includes('Max-Age=0')),
      [],
      'no session cookie is set',
    )
  })

  t.test('a transaction cookie only opens for its own state', async (t) => {
    const browser = stack.browser()
    const started = await browser.fetch(start)
    const state = new URL(started.headers.get('location') ?? '').searchParams.get('state') ?? ''
    // Same 16-character prefix (same cookie name), different state.
    const forged = state.slice(0, 16) + 'x'.repeat(state.length - 16)
    const res = await browser.fetch(`${callback}?code=abc&state=${forged}`)
    t.equal(res.status, 403)
    t.equal(((await res.json()) as Problem).code, 'state_mismatch')
  })

  t.test('replaying a callback URL is 403', async (t) => {
    const browser = stack.browser()
    t.equal((await browser.signIn(start, 'alice')).status, 200)
    const url = callbackUrlOf(browser.history)
    const replay = await browser.fetch(url)
    t.equal(replay.status, 403)
    t.equal(((await replay.json()) as Problem).code, 'state_mismatch', 'the transaction is gone')
  })

  t.test('a code redeemed once is refused by the provider: 403 code_invalid', async (t) => {
    const browser = stack.browser()
    t.equal((await browser.signIn(start, 'alice')).status, 200)
    const used = new URL(callbackUrlOf(browser.history)).searchParams.get('code')
    // A fresh transaction in the same browser, completed with the already-used code.
    const started = await browser.fetch(start)
    const state = new URL(started.headers.get('location') ?? '').searchParams.get('state')
    const res = await browser.fetch(`${callback}?code=${used}&state=${state}&iss=${encodeURIComponent(stack.provider?.issuer ?? '')}`)
    t.equal(res.status, 403)
    const body = (await res.json()) as Problem
    t.equal(body.code, 'code_invalid')
    t.notMatch(JSON.stringify(body), used ?? 'x', 'the code is not echoed')
    t.notOk(
      res.headers.getSetCookie().some((c) => c.startsWith('ogw=') && !c.includes('Max-Age=0')),
      'no session',
    )
  })

  t.test('a forged code is 403 code_invalid', async (t) => {
    const browser = stack.browser()
    const started = await browser.fetch(start)
    const state = new URL(started.headers.get('location') ?? '').searchParams.get('state')
    const res = await browser.fetch(`${callback}?code=forged-code&state=${state}&iss=${encodeURIComponent(stack.provider?.issuer ?? '')}`)
    t.equal(res.status, 403)
    t.equal(((await res.json()) as Problem).code, 'code_invalid')
  })

  t.test('duplicated code or state parameters are refused', async (t) => {
    const res = await fetch(`${callback}?code=a&code=b&state=x`)
    t.equal(res.status, 400)
    t.equal(((await res.json()) as Problem).code, 'bad_request')
    const res2 = await fetch(`${callback}?code=a&state=x&state=y`)
    t.equal(res2.status, 400)
  })

  t.test('two sign-ins started in parallel (two tabs) both complete', async (t) => {
    const browser = stack.browser()
    const first = await browser.fetch(`${start}?redirectAfter=/tab1`)
    const second = await browser.fetch(`${start}?redirectAfter=/tab2`)
    t.equal(first.status, 302)
    t.equal(second.status, 302)
    // Finish the second tab first, then the first one.
    const res2 = await browser.signIn(second.headers.get('location') ?? '', 'alice', { gatewayOrigin: stack.gw })
    t.equal(res2.status, 302)
    t.equal(res2.headers.get('location'), '/tab2')
    const res1 = await browser.signIn(first.headers.get('location') ?? '', 'alice', { gatewayOrigin: stack.gw })
    t.equal(res1.status, 302)
    t.equal(res1.headers.get('location'), '/tab1', 'the first transaction survived the second')
  })
})
