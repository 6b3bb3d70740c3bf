import t from 'tap'
import { cookiesCleared, sessionCookiesSet, startAdversarialStack, SUBJECT } from '../fixtures/adversarial-provider.ts'
import { problemCode } from '../fixtures/http.ts'

// Large access tokens against the cookie store (session/cookies.ts): a token that does not fit one
// cookie is split into chunks that browsers accept; one too large for MAX_CHUNKS is refused with
// session_too_large rather than set broken.

/** What browsers accept for one cookie: name, value and attributes together (RFC 6265 6.1). */
const BROWSER_COOKIE_BYTES = 4096

t.test('an access token of 6000 characters: the session cookie is chunked and works', async (t) => {
  const { stack, provider } = await startAdversarialStack(t, { provider: { behaviour: { accessTokenLength: 6000 } } })
  const browser = stack.browser()
  const res = await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'unused')
  t.equal(res.status, 200)
  const { value } = (await res.json()) as { value: string }
  t.equal(value.length, 6000)
  t.equal(value, provider.lastAccessToken)

  const set = sessionCookiesSet(res)
  t.ok(set.includes('ogw'), 'ogw is set')
  t.ok(set.includes('ogw_1'), 'ogw_1 is set: the session is split')
  for (const line of res.headers.getSetCookie()) {
    t.ok(Buffer.byteLength(line) <= BROWSER_COOKIE_BYTES, `${line.slice(0, line.indexOf('='))} fits a browser cookie`)
  }
  const chunks = browser.cookies().filter((c) => c.name === 'ogw' || /^ogw_\d+$/.test(c.name))
  t.same(chunks.map((c) => c.name).sort(), set.filter((n) => n !== 'ogw_cred').sort(), 'the browser kept every chunk')
  t.ok(
    chunks.every((c) => c.path === '/' && c.httpOnly && c.sameSite === 'Lax'),
    'every chunk has the attributes of the session cookie',
  )

  const page = await browser.fetch(`${stack.gw}/chunked`, { headers: { accept: 'application/json' } })
  t.equal(page.status, 200, 'the proxied request is signed in')
  const seen = stack.upstream.requests.at(-1)
  t.equal(seen?.url, '/chunked')
  t.equal(seen?.headers['x-forwarded-user'], SUBJECT)
  t.notMatch(seen?.headers.cookie ?? '', /(^|;\s*)ogw/, 'no gateway cookie (nor chunk) reaches the upstream')

  // The refresh endpoint reads the chunked session too.
  const refreshed = await browser.fetch(`${stack.gw}/api/v1/openid/refresh`)
  t.equal(refreshed.status, 200)
  t.equal(((await refreshed.json()) as { value: string }).value.length, 6000)
})

t.test('an access token of 20000 characters: 502 session_too_large and no session cookie', async (t) => {
  const { stack } = await startAdversarialStack(t, { provider: { behaviour: { accessTokenLength: 20000 } } })
  const browser = stack.browser()
  const res = await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'unused')
  t.equal(res.status, 502)
  const body = await res.clone().text()
  t.equal(await problemCode(res), 'session_too_large')
  t.notMatch(body, /[A-Za-z0-9_-]{200}/, 'no token in the body')
  t.same(sessionCookiesSet(res), [], 'no session cookie is set')
  t.notOk(
    browser.cookies().some((c) => c.name === 'ogw' || /^ogw_(\d+|cred)/.test(c.name)),
    'the browser holds no session cookie',
  )
  t.same(cookiesCleared(res, 'ogw_tx_'), [], 'the transaction is left for a retry, like any 5xx')

  const page = await browser.fetch(`${stack.gw}/x`, { headers: { accept: 'application/json' } })
  t.equal(page.status, 401, 'not signed in')
})

t.test('a smaller session after a chunked one expires the chunks it no longer needs', async (t) => {
  const { stack, provider } = await startAdversarialStack(t, { provider: { behaviour: { accessTokenLength: 6000, refresh: 'keep' } } })
  const browser = stack.browser()
  t.equal((await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'unused')).status, 200)
  t.ok(browser.cookie('ogw_1'), 'chunked')
  provider.set({ accessTokenLength: 43 })
  const res = await browser.fetch(`${stack.gw}/api/v1/openid/refresh`)
  t.equal(res.status, 200)
  t.ok(cookiesCleared(res, 'ogw_1').includes('ogw_1'), 'ogw_1 is expired')
  t.notOk(
    browser.cookies().some((c) => /^ogw_\d+$/.test(c.name)),
    'no chunk is left',
  )
  const page = await browser.fetch(`${stack.gw}/small`, { headers: { accept: 'application/json' } })
  t.equal(page.status, 200, 'the unchunked session works')
})
