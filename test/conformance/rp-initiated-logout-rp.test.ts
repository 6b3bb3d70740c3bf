import t from 'tap'
import { startStack } from '../fixtures/stack.ts'

// The RP-Initiated Logout RP plan (oidcc-client-rp-initiated-logout-rp,
// OIDCCClientRPInitiatedLogoutRPTestPlan), against the real oidc-provider. Each module: sign in,
// end the session through the provider's end_session_endpoint (RP-Initiated Logout 1.0 section 2:
// id_token_hint, post_logout_redirect_uri, state), the provider's back-channel logout to the
// gateway (the modules need a back- or front-channel logout URI registered), then the RP handles
// the post-logout redirect. The gateway's post-logout landing is its sign-out page: the session
// there ended before the browser left, so the page answers alike whatever state comes back, or
// none (the choice, docs/decisions.md); the modules whose provider changes or drops the state
// are played by sending the browser to the landing as that provider would.

type Test = Parameters<Parameters<typeof t.test>[0]>[0]

const SIGN_OUT = '/api/v1/openid/sign-out'

t.test('RP-Initiated Logout RP', async (t) => {
  const stack = await startStack(t, { backchannelLogout: true, postLogoutPath: SIGN_OUT })

  /** Signs in, logs out at the gateway: the end-session URL it answers, and the browser. */
  async function loggedOut(t: Test) {
    const browser = await stack.signedIn('alice')
    const res = await browser.fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE' })
    t.equal(res.status, 200, 'logged out at the gateway')
    const endSession = new URL(((await res.json()) as { value: string }).value)
    t.equal(`${endSession.origin}${endSession.pathname}`, `${stack.provider?.issuer}/session/end`, 'the end_session_endpoint')
    t.ok(endSession.searchParams.get('id_token_hint'), 'id_token_hint')
    t.equal(endSession.searchParams.get('post_logout_redirect_uri'), stack.gw + SIGN_OUT, 'post_logout_redirect_uri')
    const state = endSession.searchParams.get('state')
    t.match(state, /^[\w-]{43}$/, 'a state of 256 random bits')
    return { browser, endSession, state: state ?? '' }
  }

  async function assertLanding(t: Test, res: Response): Promise<void> {
    t.equal(res.status, 200, 'the post-logout redirect is handled')
    t.match(await res.text(), 'You are signed out')
  }

  t.test('oidcc-client-test-rp-init-logout (rp-init-logout)', async (t) => {
    const { browser, endSession, state } = await loggedOut(t)
    const done = await browser.confirmProviderLogout(endSession)
    const landing = done.visited.at(-1) ?? ''
    t.equal(landing.split('?')[0], stack.gw + SIGN_OUT, 'the provider sent the browser to post_logout_redirect_uri')
    t.equal(new URL(landing).searchParams.get('state'), state, 'with the state the gateway sent')
    await assertLanding(t, done.response)
    const page = await browser.fetch(`${stack.gw}/page`, { headers: { accept: 'application/json' } })
    t.equal(page.status, 401, 'signed out')
  })

  t.test('oidcc-client-test-rp-init-logout-other-state (rp-init-logout-other-state)', async (t) => {
    const { browser } = await loggedOut(t)
    await assertLanding(t, await browser.fetch(`${stack.gw}${SIGN_OUT}?state=another-state`, { navigate: true }))
  })

  t.test('oidcc-client-test-rp-init-logout-no-state (rp-init-logout-no-state)', async (t) => {
    const { browser } = await loggedOut(t)
    await assertLanding(t, await browser.fetch(`${stack.gw}${SIGN_OUT}`, { navigate: true }))
  })
})
