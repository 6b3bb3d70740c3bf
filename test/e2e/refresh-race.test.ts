import { randomUUID } from 'node:crypto'
import t from 'tap'
import { BACKCHANNEL_LOGOUT_EVENT } from '#src/oidc/logout-token'
import { BACKCHANNEL_LOGOUT_PATH } from '#src/contract/endpoints'
import { startAdversarialStack, SUBJECT, type AdversarialProvider } from '../fixtures/adversarial-provider.ts'
import { problemCode } from '../fixtures/http.ts'
import { CLIENT_ID } from '../fixtures/stack.ts'

// A refresh under way when the session ends: its late answer must not bring
// the session back. The provider holds the refresh's answer (refreshGate) until the logout or
// back-channel logout is done; the memory store, which had no such guard, is the one tested.

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 10))
  if (!check()) throw new Error('the condition never held')
}

async function backchannelLogout(gw: string, provider: AdversarialProvider): Promise<number> {
  const token = await provider.signJwt(
    { aud: CLIENT_ID, sub: SUBJECT, exp: undefined, jti: randomUUID(), events: { [BACKCHANNEL_LOGOUT_EVENT]: {} } },
    { typ: 'logout+jwt' },
  )
  const res = await fetch(gw + BACKCHANNEL_LOGOUT_PATH, { method: 'POST', body: new URLSearchParams({ logout_token: token }) })
  await res.body?.cancel()
  return res.status
}

for (const ending of ['logout', 'back-channel logout'] as const) {
  t.test(`memory store: a refresh answered after a ${ending} does not resurrect the session`, async (t) => {
    const { stack, provider } = await startAdversarialStack(t, { config: { session: { store: 'memory' } } })
    const browser = stack.browser()
    t.equal((await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'unused')).status, 200)
    const cookie = browser.cookieHeader(`${stack.gw}/page`)

    let release: () => void = () => undefined
    provider.set({ refreshGate: new Promise<void>((resolve) => (release = resolve)) })
    const before = provider.tokenRequests
    const refreshing = fetch(`${stack.gw}/api/v1/openid/refresh`, { headers: { cookie, accept: 'application/json' } })
    await until(() => provider.tokenRequests > before)

    if (ending === 'logout') {
      const res = await fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE', headers: { cookie, accept: 'application/json' } })
      t.equal(res.status, 200, 'logged out')
      await res.body?.cancel()
    } else {
      t.equal(await backchannelLogout(stack.gw, provider), 200, 'logged out by the provider')
    }
    release()
    const late = await refreshing
    t.equal(late.status, 401, 'the late refresh answers that the session ended')
    t.equal(await problemCode(late), 'unauthenticated')
    const setCookies = late.headers.getSetCookie().filter((line) => /^ogw(_cred)?=[^;]/.test(line))
    t.same(setCookies, [], 'and sets no session cookie')

    const page = await fetch(`${stack.gw}/page`, { headers: { cookie, accept: 'application/json' } })
    t.equal(page.status, 401, 'the session stays ended')
    await page.body?.cancel()
  })
}
