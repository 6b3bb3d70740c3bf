import t from 'tap'
import { cookiesCleared, startAdversarialStack, type ProviderOptions } from '../fixtures/adversarial-provider.ts'
import type { Teardown } from '../fixtures/stack.ts'

// DELETE /api/v1/openid/logout against providers with and without the optional endpoints, and
// with a revocation endpoint that fails: the logout itself must always succeed, promptly.

const TIMEOUT_MS = 500

async function signedIn(t: Teardown, options: ProviderOptions) {
  const { stack, provider } = await startAdversarialStack(t, { provider: options, config: { provider: { timeoutMs: TIMEOUT_MS } } })
  const browser = stack.browser()
  const res = await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'unused')
  if (res.status !== 200) throw new Error(`sign-in failed: ${res.status} ${await res.text()}`)
  const logout = async () => {
    const started = Date.now()
    const response = await browser.fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE' })
    return { response, ms: Date.now() - started }
  }
  return { stack, provider, browser, logout, refreshToken: provider.issuedRefreshTokens.at(-1) }
}

type Test = Parameters<Parameters<typeof t.test>[0]>[0]

function assertCookiesDeleted(t: Test, res: Response, browser: { cookies(): Array<{ name: string }> }): void {
  const cleared = cookiesCleared(res, 'ogw')
  t.ok(cleared.includes('ogw'), 'ogw is expired')
  t.ok(cleared.includes('ogw_cred'), 'ogw_cred is expired')
  t.same(
    browser.cookies().filter((c) => c.name.startsWith('ogw')),
    [],
    'the browser holds no gateway cookie',
  )
}

t.test('no end_session_endpoint, no revocation_endpoint: 200 {"value": ""}, nothing revoked', async (t) => {
  const { logout, browser, provider } = await signedIn(t, {})
  const { response } = await logout()
  t.equal(response.status, 200)
  t.match(response.headers.get('content-type'), /^application\/json/)
  t.same(await response.json(), { value: '' })
  t.equal(provider.revocationRequests.length, 0, 'no revocation call to an endpoint the provider does not offer')
  assertCookiesDeleted(t, response, browser)
})

t.test('control: both endpoints offered: the refresh token is revoked, the end-session URL returned', async (t) => {
  const { logout, browser, provider, stack, refreshToken } = await signedIn(t, { endSessionEndpoint: true, revocationEndpoint: true })
  const { response } = await logout()
  t.equal(response.status, 200)
  const { value } = (await response.json()) as { value: string }
  const url = new URL(value)
  t.equal(`${url.origin}${url.pathname}`, `${provider.issuer}/end-session`)
  t.ok(url.searchParams.get('id_token_hint'), 'id_token_hint')
  t.equal(url.searchParams.get('post_logout_redirect_uri'), `${stack.gw}/`)
  t.equal(provider.revocationRequests.length, 1)
  t.equal(provider.revocationRequests[0]?.get('token'), refreshToken)
  t.equal(provider.revocationRequests[0]?.get('token_type_hint'), 'refresh_token')
  assertCookiesDeleted(t, response, browser)
})

t.test('no revocation_endpoint but an end_session_endpoint: 200 with the URL, no revocation call', async (t) => {
  const { logout, provider } = await signedIn(t, { endSessionEndpoint: true })
  const { response } = await logout()
  t.equal(response.status, 200)
  const { value } = (await response.json()) as { value: string }
  t.match(value, new RegExp(`^${provider.issuer}/end-session\\?`))
  t.equal(provider.revocationRequests.length, 0)
})

for (const revocation of ['server_error', 'hang'] as const) {
  t.test(`revocation endpoint ${revocation}: logout still 200 within the timeout`, async (t) => {
    const { logout, browser, provider } = await signedIn(t, {
      revocationEndpoint: true,
      behaviour: { revocation },
    })
    const { response, ms } = await logout()
    t.ok(ms < TIMEOUT_MS + 1500, `answered in ${ms} ms`)
    t.equal(response.status, 200)
    t.same(await response.json(), { value: '' })
    t.equal(provider.revocationRequests.length, 1, 'revocation was attempted')
    assertCookiesDeleted(t, response, browser)
  })
}
