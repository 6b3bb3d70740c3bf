import { randomUUID } from 'node:crypto'
import t from 'tap'
import { BACKCHANNEL_LOGOUT_EVENT } from '#src/oidc/logout-token'
import { BACKCHANNEL_LOGOUT_PATH } from '#src/contract/endpoints'
import type { SignJwtOptions } from '../fixtures/provider.ts'
import { CLIENT_ID, startStack } from '../fixtures/stack.ts'

// The Back-Channel Logout RP plan (oidcc-client-back-channel-logout-rp,
// OIDCCClientBackChannelLogoutRPTestPlan), against the real oidc-provider. The first module is the
// provider's own back-channel logout after an RP-initiated logout; every other module is a logout
// token the provider's key signs the way the module's server misbehaves (its signJwt), which the
// gateway must refuse with 400 and Cache-Control: no-store (Back-Channel Logout 1.0 section 2.8)
// and without ending the session the token names. Further variants (bad signature, missing iat,
// no sid nor sub, replayed jti, sid only, sub only) are test/routes/backchannel-logout.test.ts.

type Test = Parameters<Parameters<typeof t.test>[0]>[0]

t.test('Back-Channel Logout RP', async (t) => {
  const stack = await startStack(t, { backchannelLogout: true, postLogoutPath: '/api/v1/openid/sign-out' })
  const provider = stack.provider!
  const url = stack.gw + BACKCHANNEL_LOGOUT_PATH
  const browser = await stack.signedIn('alice')

  async function signedIn(): Promise<boolean> {
    const res = await browser.fetch(`${stack.gw}/hello`, { headers: { accept: 'application/json' } })
    await res.body?.cancel()
    return res.status === 200
  }

  /** A logout token for alice's every session (sub), a valid one unless the module changes it. */
  function token(claims: Record<string, unknown> = {}, options: SignJwtOptions = {}): Promise<string> {
    return provider.signJwt(
      { aud: CLIENT_ID, sub: 'alice', jti: randomUUID(), events: { [BACKCHANNEL_LOGOUT_EVENT]: {} }, ...claims },
      { typ: 'logout+jwt', ...options },
    )
  }

  async function assertRefused(t: Test, logoutToken: string): Promise<void> {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ logout_token: logoutToken }),
    })
    t.equal(res.status, 400, '400 (2.8)')
    t.equal(res.headers.get('cache-control'), 'no-store', 'Cache-Control: no-store (2.8)')
    t.match(await res.json(), { error: 'invalid_request', error_description: String })
    t.ok(await signedIn(), 'the session the token names is not ended')
  }

  /** A module whose token the gateway must refuse; the session is alive before and after. */
  async function refused(t: Test, make: () => Promise<string>): Promise<void> {
    t.ok(await signedIn(), 'signed in before')
    await assertRefused(t, await make())
  }

  // Titles are written out: test/docs/conformance-table.test.ts reads them from this source.
  await t.test('oidcc-client-test-rp-backchannel-rpinitlogout-alg-none (rp-backchannel-rpinitlogout-lt-alg-none)', (t) =>
    refused(t, () => token({}, { alg: 'none' })),
  )
  await t.test('oidcc-client-test-rp-backchannel-rpinitlogout-no-event (rp-backchannel-rpinitlogout-lt-no-event)', (t) =>
    refused(t, () => token({ events: undefined })),
  )
  await t.test('oidcc-client-test-rp-backchannel-rpinitlogout-with-nonce (rp-backchannel-rpinitlogout-lt-with-nonce)', (t) =>
    refused(t, () => token({ nonce: 'a-nonce' })),
  )
  // Signed with an algorithm the provider does not sign with: HS256 keyed with its public key (key confusion).
  await t.test('oidcc-client-test-rp-backchannel-rpinitlogout-wrong-alg (rp-backchannel-rpinitlogout-lt-wrong-alg)', (t) =>
    refused(t, () => token({}, { alg: 'HS256' })),
  )
  await t.test('oidcc-client-test-rp-backchannel-rpinitlogout-wrong-aud (rp-backchannel-rpinitlogout-lt-wrong-aud)', (t) =>
    refused(t, () => token({ aud: 'another-client' })),
  )
  await t.test('oidcc-client-test-rp-backchannel-rpinitlogout-wrong-event (rp-backchannel-rpinitlogout-lt-wrong-event)', (t) =>
    refused(t, () => token({ events: { 'http://schemas.openid.net/event/other': {} } })),
  )
  await t.test('oidcc-client-test-rp-backchannel-rpinitlogout-wrong-iss (rp-backchannel-rpinitlogout-lt-wrong-issuer)', (t) =>
    refused(t, () => token({ iss: 'https://evil.example' })),
  )

  // Last: it ends the session the others keep.
  await t.test('oidcc-client-test-rp-backchannel-rpinitlogout (rp-backchannel-rpinitlogout)', async (t) => {
    const other = await stack.signedIn('alice')
    const res = await other.fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE' })
    const endSession = ((await res.json()) as { value: string }).value
    const delivered = provider.nextBackchannelLogout()
    const done = await other.confirmProviderLogout(endSession)
    await t.resolves(delivered, "the provider's logout token was answered 200 (2.8)")
    t.equal(done.response.status, 200, 'the post-logout redirect is handled')
    t.match(await done.response.text(), 'You are signed out')
    // A valid token for alice's sub, as a provider that logs the user out everywhere sends it.
    const all = await fetch(url, { method: 'POST', body: new URLSearchParams({ logout_token: await token() }) })
    t.equal(all.status, 200)
    t.equal(all.headers.get('cache-control'), 'no-store')
    t.notOk(await signedIn(), "a valid token ends the user's sessions")
  })
})
