import t from 'tap'
import { startStack, type Stack } from '../fixtures/stack.ts'
import type { Browser } from '../fixtures/browser.ts'
import { parseSetCookie } from '../fixtures/browser.ts'
import { problemCode } from '../fixtures/http.ts'

// POST /api/v1/openid/callback: the form post response mode (provider.responseMode: form_post)
// against the real oidc-provider, whose page posts the response. Every refusal of the GET callback
// holds for the POST, with the same status and code; the form's own rules (content type, a body
// only, its size); the response mode must be the one the sign-in asked for; and the transaction
// cookie alone is SameSite=None; Secure. The cross-site POST of a real browser is
// test/e2e/form-post-browser.test.ts.

type Test = Parameters<Parameters<typeof t.test>[0]>[0]

const FORM = { 'content-type': 'application/x-www-form-urlencoded' }

/** A sign-in started in `browser` (its transaction cookie set), not finished: the state and the authorization URL. */
async function started(stack: Stack, browser: Browser): Promise<{ state: string; authorizationUrl: URL; setCookies: string[] }> {
  const res = await browser.fetch(`${stack.gw}/api/v1/openid/redirect?performRedirect=0`)
  const authorizationUrl = new URL(((await res.json()) as { value: string }).value)
  return { state: authorizationUrl.searchParams.get('state') ?? '', authorizationUrl, setCookies: res.headers.getSetCookie() }
}

function post(
  stack: Stack,
  browser: Browser,
  body: URLSearchParams | string,
  headers: Record<string, string> = FORM,
  path = '/api/v1/openid/callback',
): Promise<Response> {
  return browser.fetch(`${stack.gw}${path}`, { method: 'POST', headers, body })
}

async function assertProblem(t: Test, res: Response, status: number, code: string): Promise<void> {
  t.equal(res.status, status, 'status')
  t.equal(await problemCode(res), code, 'problem code')
}

t.test('provider.responseMode: form_post', async (t) => {
  const stack = await startStack(t, { config: { provider: { responseMode: 'form_post' } } })
  const callback = `${stack.gw}/api/v1/openid/callback`

  t.test("a sign-in completes through the provider's form post; no code in any URL", async (t) => {
    const browser = stack.browser()
    const res = await browser.signIn(`${stack.gw}/api/v1/openid/redirect?redirectAfter=${encodeURIComponent('/app?x=1')}`, 'alice')
    t.equal(res.status, 302)
    t.equal(res.headers.get('location'), '/app?x=1')
    t.equal(res.headers.get('cache-control'), 'no-store')
    t.equal(res.headers.get('referrer-policy'), 'no-referrer')
    t.ok(browser.cookie('ogw'), 'signed in')
    const authorization = browser.history.find((u) => u.startsWith(`${stack.provider?.issuer}/auth?`))
    t.equal(new URL(authorization ?? 'http://x').searchParams.get('response_mode'), 'form_post', 'the authorization request asks for a form post')
    t.equal(browser.history.at(-1), callback, 'the callback was posted, its URL bare')
    t.notOk(
      browser.history.some((u) => u.startsWith(callback) && u.includes('code=')),
      'the code was never in a URL',
    )
    const lines = res.headers.getSetCookie()
    const session = lines.find((l) => l.startsWith('ogw='))
    t.match(session, /SameSite=Lax/, 'the session cookie keeps cookies.sameSite')
    t.notMatch(session, /SameSite=None/)
    const cleared = lines.map((l) => parseSetCookie(l, callback)).find((c) => c?.name.startsWith('ogw_tx_'))
    t.match(
      cleared,
      { deletes: true, sameSite: 'None', secure: true, path: '/api/v1/openid/callback' },
      'the transaction cookie is cleared with the attributes it was set with',
    )
  })

  t.test('the transaction cookie alone is SameSite=None; Secure', async (t) => {
    const { setCookies } = await started(stack, stack.browser())
    const tx = setCookies.map((l) => parseSetCookie(l, `${stack.gw}/api/v1/openid/redirect`)).filter((c) => c?.name.startsWith('ogw_tx_'))
    t.equal(tx.length, 1)
    t.match(tx[0], { sameSite: 'None', secure: true, httpOnly: true, path: '/api/v1/openid/callback', maxAge: 600 })
    t.notOk(
      setCookies.some((l) => !l.startsWith('ogw_tx_') && !l.startsWith('ogw_txb=') && /SameSite=None/i.test(l)),
      'no other cookie is SameSite=None',
    )
  })

  t.test("400 code_missing, checked first; the provider's error is echoed as JSON strings", async (t) => {
    const browser = stack.browser()
    const { state } = await started(stack, browser)
    for (const body of ['', `state=${state}`, `code=&state=${state}`]) await assertProblem(t, await post(stack, browser, body), 400, 'code_missing')
    const res = await post(stack, browser, new URLSearchParams({ error: 'access_denied', error_description: '<b>no</b>', state }))
    t.equal(res.status, 400)
    t.match(await res.json(), { code: 'code_missing', error: 'access_denied', error_description: '<b>no</b>' })
    const bare = await fetch(callback, { method: 'POST' })
    await assertProblem(t, bare, 400, 'code_missing')
  })

  t.test('403 state_mismatch: unknown state, no transaction cookie, a replayed post', async (t) => {
    const browser = stack.browser()
    const { state } = await started(stack, browser)
    await assertProblem(t, await post(stack, browser, `code=abc&state=${state}x`), 403, 'state_mismatch')
    await assertProblem(t, await post(stack, stack.browser(), `code=abc&state=${state}`), 403, 'state_mismatch')

    const signedIn = stack.browser()
    await signedIn.signIn(`${stack.gw}/api/v1/openid/redirect`, 'bob')
    const posted = signedIn.history.length
    t.equal(signedIn.history[posted - 1], callback)
    // The form the provider posted, replayed: the transaction is gone.
    const replayed = await post(stack, signedIn, `code=any&state=${state}`)
    await assertProblem(t, replayed, 403, 'state_mismatch')
  })

  t.test('400 bad_request: a parameter twice, a query string, another content type', async (t) => {
    const browser = stack.browser()
    const { state } = await started(stack, browser)
    await assertProblem(t, await post(stack, browser, `code=a&code=b&state=${state}`), 400, 'bad_request')
    await assertProblem(t, await post(stack, browser, `code=a&state=${state}&state=${state}`), 400, 'bad_request')
    await assertProblem(t, await post(stack, browser, `code=a&state=${state}`, FORM, `/api/v1/openid/callback?code=b`), 400, 'bad_request')
    await assertProblem(t, await post(stack, browser, JSON.stringify({ code: 'a', state }), { 'content-type': 'application/json' }), 400, 'bad_request')
    await assertProblem(t, await post(stack, browser, `code=a&state=${state}`, { 'content-type': 'text/plain' }), 400, 'bad_request')
    await assertProblem(t, await post(stack, browser, `code=a&state=${state}`, { 'content-type': 'multipart/form-data; boundary=x' }), 400, 'bad_request')
    // The transaction is still there: a malformed post is refused before it is looked at.
    t.ok(browser.cookies().some((c) => c.name.startsWith('ogw_tx_')))
  })

  t.test('413 for a body over 8 KiB', async (t) => {
    const browser = stack.browser()
    const { state } = await started(stack, browser)
    const res = await post(stack, browser, `code=a&state=${state}&error_description=${'x'.repeat(9000)}`)
    t.equal(res.status, 413)
  })

  t.test('403 authorization_response_invalid: the response in the URL of a form post sign-in, or another iss', async (t) => {
    const browser = stack.browser()
    const { state } = await started(stack, browser)
    // With the provider's own iss (RFC 9207), so that only the response mode is wrong.
    const iss = encodeURIComponent(stack.provider?.issuer ?? '')
    const res = await browser.fetch(`${callback}?code=abc&state=${state}&iss=${iss}`)
    await assertProblem(t, res, 403, 'authorization_response_invalid')
    t.ok(
      res.headers.getSetCookie().some((l) => l.startsWith('ogw_tx_') && /Max-Age=0/.test(l)),
      'the transaction ends',
    )

    const other = stack.browser()
    const second = await started(stack, other)
    await assertProblem(
      t,
      await post(stack, other, new URLSearchParams({ code: 'abc', state: second.state, iss: 'https://evil.example' })),
      403,
      'authorization_response_invalid',
    )
  })

  t.test('405 on another method names POST in Allow', async (t) => {
    const res = await fetch(callback, { method: 'PUT' })
    t.equal(res.status, 405)
    t.equal(res.headers.get('allow'), 'GET, HEAD, POST')
  })
})

t.test('provider.responseMode: query (the default): a POST callback is refused, the transaction cookie keeps cookies.sameSite', async (t) => {
  const stack = await startStack(t)
  const browser = stack.browser()
  const { state, authorizationUrl, setCookies } = await started(stack, browser)
  t.equal(authorizationUrl.searchParams.get('response_mode'), null, 'no response_mode: the query default')
  const tx = setCookies.map((l) => parseSetCookie(l, `${stack.gw}/api/v1/openid/redirect`)).find((c) => c?.name.startsWith('ogw_tx_'))
  t.match(tx, { sameSite: 'Lax', secure: false })
  const iss = encodeURIComponent(stack.provider?.issuer ?? '')
  await assertProblem(t, await post(stack, browser, `code=abc&state=${state}&iss=${iss}`), 403, 'authorization_response_invalid')
})

t.test('the sign-in rate limit counts form posts', async (t) => {
  const stack = await startStack(t, { config: { provider: { responseMode: 'form_post' }, rateLimit: { signIn: { max: 2, windowSeconds: 60 } } } })
  const statuses = []
  for (let i = 0; i < 3; i++)
    statuses.push((await fetch(`${stack.gw}/api/v1/openid/callback`, { method: 'POST', headers: FORM, body: 'code=a&state=b' })).status)
  t.same(statuses, [403, 403, 429])
})
