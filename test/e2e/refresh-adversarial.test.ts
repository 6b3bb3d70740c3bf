import t from 'tap'
import { cookiesCleared, sessionCookiesSet, startAdversarialStack, SUBJECT, type Behaviour, type Problem } from '../fixtures/adversarial-provider.ts'

// GET /api/v1/openid/refresh against a provider whose answers the test chooses: which refresh
// token is sent, what a refusal and a fault do to the session.

const JSON_ACCEPT = { accept: 'application/json' }

t.test('refresh', async (t) => {
  const timeoutMs = 500
  const lines: Array<Record<string, unknown>> = []
  const { stack, provider } = await startAdversarialStack(t, {
    config: { provider: { timeoutMs }, log: { level: 'warn' } },
    logStream: { write: (line) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  })
  const refusals = () => lines.filter((l) => l.msg === 'ID token refused')
  const refresh = `${stack.gw}/api/v1/openid/refresh`
  t.beforeEach(() => provider.reset())

  async function signedIn() {
    const browser = stack.browser()
    const res = await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'unused')
    if (res.status !== 200) throw new Error(`sign-in failed: ${res.status} ${await res.text()}`)
    const refreshToken = provider.issuedRefreshTokens.at(-1)
    if (refreshToken === undefined) throw new Error('no refresh token issued')
    return { browser, refreshToken }
  }

  t.test('success without a new refresh token: the old one is kept and sent again', async (t) => {
    provider.set({ refresh: 'keep' })
    const { browser, refreshToken } = await signedIn()
    const issued = provider.issuedRefreshTokens.length
    const first = await browser.fetch(refresh)
    t.equal(first.status, 200)
    t.equal(((await first.json()) as { value: string }).value, provider.lastAccessToken, 'the new access token')
    t.equal(provider.lastTokenRequest?.get('grant_type'), 'refresh_token')
    t.equal(provider.lastTokenRequest?.get('refresh_token'), refreshToken)
    t.equal(provider.issuedRefreshTokens.length, issued, 'the provider issued no new refresh token')
    const second = await browser.fetch(refresh)
    t.equal(second.status, 200)
    t.equal(provider.lastTokenRequest?.get('refresh_token'), refreshToken, 'the second refresh sends the same refresh token')
  })

  t.test('success with a rotated refresh token: the next refresh sends the new one', async (t) => {
    provider.set({ refresh: 'rotate' })
    const { browser, refreshToken } = await signedIn()
    const first = await browser.fetch(refresh)
    t.equal(first.status, 200)
    t.equal(provider.lastTokenRequest?.get('refresh_token'), refreshToken)
    const rotated = provider.issuedRefreshTokens.at(-1)
    t.not(rotated, refreshToken, 'the provider rotated')
    const second = await browser.fetch(refresh)
    // The provider has forgotten the first refresh token: only the rotated one can succeed.
    t.equal(second.status, 200)
    t.equal(provider.lastTokenRequest?.get('refresh_token'), rotated, 'the second refresh sends the rotated token')
    const access = ((await second.json()) as { value: string }).value
    t.equal(access, provider.lastAccessToken)
    const page = await browser.fetch(`${stack.gw}/after-rotation`, { headers: JSON_ACCEPT })
    t.equal(page.status, 200, 'the session still works')
  })

  t.test('invalid_grant: 409 refresh_token_invalid and the session cookies are cleared', async (t) => {
    const { browser } = await signedIn()
    provider.set({ refresh: 'invalid_grant' })
    const res = await browser.fetch(refresh)
    t.equal(res.status, 409)
    t.match(res.headers.get('content-type'), /^application\/problem\+json/)
    t.equal(((await res.json()) as Problem).code, 'refresh_token_invalid')
    const cleared = cookiesCleared(res, 'ogw')
    t.ok(cleared.includes('ogw'), 'ogw is expired')
    t.ok(cleared.includes('ogw_cred'), 'ogw_cred is expired')
    t.same(sessionCookiesSet(res), [], 'no session cookie is set')
    t.same(
      browser.cookies().filter((c) => c.name.startsWith('ogw')),
      [],
      'the browser holds no gateway cookie',
    )
    const page = await browser.fetch(`${stack.gw}/x`, { headers: JSON_ACCEPT })
    t.equal(page.status, 401, 'signed out')
  })

  for (const fault of ['server_error', 'hang'] as const) {
    t.test(`${fault}: 502 provider_unavailable within the timeout, the session is kept`, async (t) => {
      const { browser, refreshToken } = await signedIn()
      provider.set({ refresh: fault })
      const started = Date.now()
      const res = await browser.fetch(refresh)
      const ms = Date.now() - started
      t.ok(ms < timeoutMs + 1500, `answered in ${ms} ms`)
      t.equal(res.status, 502)
      t.match(res.headers.get('content-type'), /^application\/problem\+json/)
      t.equal(((await res.json()) as Problem).code, 'provider_unavailable')
      t.same(res.headers.getSetCookie(), [], 'no cookie is touched')
      const page = await browser.fetch(`${stack.gw}/still-signed-in`, { headers: JSON_ACCEPT })
      t.equal(page.status, 200, 'the session still works')
      // Once the provider is back, the same refresh token still refreshes.
      provider.set({ refresh: 'keep' })
      const retry = await browser.fetch(refresh)
      t.equal(retry.status, 200)
      t.equal(provider.lastTokenRequest?.get('refresh_token'), refreshToken)
    })
  }

  t.test('control: a refreshed ID token of the same subject updates the claims', async (t) => {
    const { browser } = await signedIn()
    provider.set({ refresh: 'keep', refreshIdToken: true, idTokenClaims: { email: 'renamed@example.com' } })
    const res = await browser.fetch(refresh)
    t.equal(res.status, 200)
    const page = await browser.fetch(`${stack.gw}/claims`, { headers: JSON_ACCEPT })
    t.equal(page.status, 200)
    const seen = stack.upstream.requests.at(-1)
    t.equal(seen?.headers['x-forwarded-user'], SUBJECT)
    t.equal(seen?.headers['x-forwarded-email'], 'renamed@example.com')
  })

  // A refresh response that fails validation is a provider fault for the refresh grant
  // (client.ts maps it to provider_unavailable): 502, and the session must stay exactly as it was.
  // The third member is the check the log line names.
  const badRefreshIdTokens: Array<[string, Partial<Behaviour>, string]> = [
    // OpenID Connect Core 12.2: the refreshed ID token's sub MUST equal the original one.
    ['an ID token for another subject', { idTokenClaims: { sub: 'mallory' } }, 'sub'],
    ['an unsigned (alg none) ID token', { idToken: 'alg-none' }, 'alg'],
    ['an ID token from another issuer', { idTokenClaims: { iss: 'http://127.0.0.1:1/evil' } }, 'iss'],
  ]
  for (const [name, behaviour, check] of badRefreshIdTokens) {
    t.test(`refresh response with ${name}: 502, the identity never changes`, async (t) => {
      const { browser } = await signedIn()
      provider.set({ refresh: 'keep', refreshIdToken: true, ...behaviour })
      const logged = refusals().length
      const res = await browser.fetch(refresh)
      t.equal(res.status, 502)
      t.match(refusals().slice(logged), [{ check, grant: 'refresh' }], 'the log names the failed check')
      t.equal(((await res.json()) as Problem).code, 'provider_unavailable')
      t.same(sessionCookiesSet(res), [], 'the session is not rewritten')
      const page = await browser.fetch(`${stack.gw}/who`, { headers: JSON_ACCEPT })
      t.equal(page.status, 200, 'still signed in')
      t.equal(stack.upstream.requests.at(-1)?.headers['x-forwarded-user'], SUBJECT, 'still the original subject')
    })
  }

  t.test('provider faults and refusals are not logged as refused ID tokens', async (t) => {
    t.same(
      refusals().map((l) => l.grant),
      ['refresh', 'refresh', 'refresh'],
      'only the three bad ID tokens above',
    )
  })
})
