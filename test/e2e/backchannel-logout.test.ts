import { randomUUID } from 'node:crypto'
import t from 'tap'
import { BACKCHANNEL_LOGOUT_EVENT } from '#src/oidc/logout-token'
import { BACKCHANNEL_LOGOUT_PATH } from '#src/contract/endpoints'
import type { Browser } from '../fixtures/browser.ts'
import { manualClock } from '../fixtures/clock.ts'
import { CLIENT_ID, startStack, type Stack } from '../fixtures/stack.ts'

// Back-channel logout with the real oidc-provider: the user signs out at the provider itself (its
// own end-session page, not the gateway's), the provider POSTs a logout token to the gateway, and
// the gateway session ends, in each store. Another provider session of the same user is left
// alone; a logout token naming only the subject ends all of its sessions.

async function status(stack: Stack, browser: Browser): Promise<number> {
  const res = await browser.fetch(`${stack.gw}/hello`, { headers: { accept: 'application/json' } })
  await res.body?.cancel()
  return res.status
}

/** The provider's own logout page, confirmed: it sends the back-channel logout before it answers. */
async function signOutAtProvider(stack: Stack, browser: Browser): Promise<void> {
  const done = await browser.confirmProviderLogout(`${stack.provider?.issuer}/session/end`)
  await done.response.body?.cancel()
}

for (const store of ['cookie', 'memory'] as const) {
  t.test(`${store} store: signing out at the provider ends the gateway session; a new sign-in works`, async (t) => {
    const lines: string[] = []
    const stack = await startStack(t, {
      backchannelLogout: true,
      config: { session: { store }, log: { level: 'info' } },
      logStream: { write: (line: string) => void lines.push(line) },
    })
    const delivered: string[] = []
    stack.provider?.provider.on('backchannel.success', () => delivered.push('ok'))
    stack.provider?.provider.on('backchannel.error', (_ctx: unknown, err: Error) => delivered.push(err.message))

    const browser = await stack.signedIn('alice')
    const other = await stack.signedIn('alice')
    t.equal(await status(stack, browser), 200, 'signed in')
    t.equal(await status(stack, other), 200, 'the same user in another browser (another provider session)')

    await signOutAtProvider(stack, browser)
    t.same(delivered, ['ok'], 'the provider delivered the logout token and the gateway accepted it')
    t.equal(await status(stack, browser), 401, 'the gateway session is refused')
    t.equal(await status(stack, other), 200, 'a logout token for another sid leaves that session alone')

    const back = await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'alice')
    t.equal(back.status, 200, 'signing in again works')
    await back.body?.cancel()
    t.equal(await status(stack, browser), 200, 'and its session is accepted')

    const logged = lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((l) => l.audit === 'backchannel-logout')
    t.equal(logged.length, 1, 'the outcome is logged')
    t.match(logged[0], { outcome: 'success', sub: 'alice', sid: /^[\w-]{16}$/ })
    t.notMatch(lines.join('\n'), /logout_token|eyJ/, 'never the token')
  })

  t.test(`${store} store: a logout token naming only the subject ends every session of it`, async (t) => {
    const clock = manualClock()
    const stack = await startStack(t, { clock, backchannelLogout: true, config: { session: { store } } })
    const alice1 = await stack.signedIn('alice')
    const alice2 = await stack.signedIn('alice')
    const bob = await stack.signedIn('bob')
    // The revocation list counts whole seconds: the logout comes a second after the sign-ins.
    clock.advance(1000)
    const token = await stack.provider!.signJwt(
      { aud: CLIENT_ID, sub: 'alice', jti: randomUUID(), events: { [BACKCHANNEL_LOGOUT_EVENT]: {} } },
      { typ: 'logout+jwt' },
    )
    const res = await fetch(stack.gw + BACKCHANNEL_LOGOUT_PATH, { method: 'POST', body: new URLSearchParams({ logout_token: token }) })
    t.equal(res.status, 200)
    t.equal(await status(stack, alice1), 401)
    t.equal(await status(stack, alice2), 401)
    t.equal(await status(stack, bob), 200, "another subject's session is left alone")
    // A second after the logout, a new sign-in of that subject works.
    clock.advance(1000)
    const again = await alice1.signIn(`${stack.gw}/api/v1/openid/redirect`, 'alice')
    await again.body?.cancel()
    t.equal(await status(stack, alice1), 200, 'signing in again works')
  })
}
