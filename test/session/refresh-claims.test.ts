import { randomUUID } from 'node:crypto'
import t from 'tap'
import { BACKCHANNEL_LOGOUT_EVENT } from '#src/oidc/logout-token'
import { BACKCHANNEL_LOGOUT_PATH } from '#src/contract/endpoints'
import { refreshedClaims } from '#src/session/lifecycle'
import { startAdversarialStack, SUBJECT } from '../fixtures/adversarial-provider.ts'
import { CLIENT_ID } from '../fixtures/stack.ts'

// A refresh keeps what the sign-in established: OpenID Connect Core 12.2 lets
// a refreshed ID token leave out `sid`, which a back-channel logout then names; and its `sub`
// may not change.

t.test('refreshedClaims: the sign-in sid is kept when the refreshed ID token has none; another sub is refused', async (t) => {
  t.same(refreshedClaims({ sub: 'a', sid: 's1', email: 'old' }, { sub: 'a', email: 'new' }), { sub: 'a', email: 'new', sid: 's1' })
  t.same(refreshedClaims({ sub: 'a', sid: 's1' }, { sub: 'a', sid: 's2' }), { sub: 'a', sid: 's2' }, "the provider's new sid when it sends one")
  t.same(refreshedClaims({ sub: 'a' }, { sub: 'a' }), { sub: 'a' }, 'no sid at all')
  t.throws(() => refreshedClaims({ sub: 'a', sid: 's1' }, { sub: 'b', sid: 's1' }), { code: 'provider_unavailable' })
})

t.test('refreshedClaims: a refresh authenticates no one, so the sign-in acr, amr and auth_time stay when the refreshed ID token leaves them out', async (t) => {
  const signedIn = { sub: 'a', acr: 'mfa', amr: ['pwd', 'otp'], auth_time: 1700000000 }
  t.same(refreshedClaims(signedIn, { sub: 'a' }), signedIn)
  t.same(
    refreshedClaims(signedIn, { sub: 'a', acr: 'pwd', auth_time: 1700000001 }),
    { sub: 'a', acr: 'pwd', auth_time: 1700000001, amr: ['pwd', 'otp'] },
    "the provider's word when it says",
  )
})

for (const store of ['cookie', 'memory'] as const) {
  t.test(`${store} store: a back-channel logout naming the sign-in's sid ends a session whose refresh dropped it`, async (t) => {
    const { stack, provider } = await startAdversarialStack(t, { config: { session: { store } } })
    provider.set({ idTokenClaims: { sid: 'provider-session-1' } })
    const browser = stack.browser()
    const signedIn = await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'unused')
    t.equal(signedIn.status, 200)
    // The refresh's ID token has no sid (Core 12.2 does not require it).
    provider.set({ idTokenClaims: {}, refreshIdToken: true })
    const refreshed = await browser.fetch(`${stack.gw}/api/v1/openid/refresh`)
    t.equal(refreshed.status, 200, 'refreshed')
    const page = await browser.fetch(`${stack.gw}/page`, { headers: { accept: 'application/json' } })
    t.equal(page.status, 200)
    await page.body?.cancel()
    const token = await provider.signJwt(
      { aud: CLIENT_ID, sub: undefined, exp: undefined, sid: 'provider-session-1', jti: randomUUID(), events: { [BACKCHANNEL_LOGOUT_EVENT]: {} } },
      { typ: 'logout+jwt' },
    )
    const logout = await fetch(stack.gw + BACKCHANNEL_LOGOUT_PATH, { method: 'POST', body: new URLSearchParams({ logout_token: token }) })
    t.equal(logout.status, 200, await logout.text())
    const after = await browser.fetch(`${stack.gw}/page`, { headers: { accept: 'application/json' } })
    t.equal(after.status, 401, 'the session is ended')
    await after.body?.cancel()
  })
}

t.test('a refresh whose ID token names another sub is refused (502), and the session keeps its user', async (t) => {
  const { stack, provider } = await startAdversarialStack(t)
  const browser = stack.browser()
  t.equal((await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'unused')).status, 200)
  provider.set({ idTokenClaims: { sub: 'someone-else' }, refreshIdToken: true })
  const refreshed = await browser.fetch(`${stack.gw}/api/v1/openid/refresh`, { headers: { accept: 'application/json' } })
  t.equal(refreshed.status, 502)
  await refreshed.body?.cancel()
  const page = await browser.fetch(`${stack.gw}/page`, { headers: { accept: 'application/json' } })
  t.equal(page.status, 200)
  t.equal(stack.upstream.requests.at(-1)?.headers['x-forwarded-user'], SUBJECT, 'still the sign-in user')
})
