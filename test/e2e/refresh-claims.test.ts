import { randomUUID } from 'node:crypto'
import t from 'tap'
import { BACKCHANNEL_LOGOUT_EVENT } from '#src/oidc/logout-token'
import { BACKCHANNEL_LOGOUT_PATH } from '#src/contract/endpoints'
import { startAdversarialStack, SUBJECT } from '../fixtures/adversarial-provider.ts'
import { CLIENT_ID } from '../fixtures/stack.ts'

// A refresh keeps what the sign-in established: OpenID Connect Core 12.2 lets
// a refreshed ID token leave out `sid`, which a back-channel logout then names; and its `sub`
// may not change. (refreshedClaims on its own: test/session/lifecycle.test.ts.)

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
