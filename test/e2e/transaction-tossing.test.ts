import t from 'tap'
import { CALLBACK_PATH } from '#src/contract/endpoints'
import type { Problem } from '#src/contract/errors'
import { startStack, type Stack } from '../fixtures/stack.ts'

// Login CSRF by cookie tossing (RFC 9700 4.7.1, RFC 6265bis 8.6): a sibling host of the same
// registrable domain sets, for the parent domain, the transaction cookie of a sign-in the attacker
// started and completed at the provider, then sends the victim to the attacker's callback URL.
// The gateway must not sign the victim in as the attacker: a transaction opens only with the
// binding of the browser that started it, a `__Host-` cookie no sibling can set.

const JSON_ACCEPT = { accept: 'application/json' }

/**
 * The attacker's own sign-in, stopped before the callback: its transaction cookie and the
 * callback URL whose code is still unredeemed.
 */
async function attackersSignIn(stack: Stack): Promise<{ name: string; value: string; callbackUrl: string }> {
  const attacker = stack.browser()
  const start = await attacker.fetch(`${stack.gw}/api/v1/openid/redirect?performRedirect=0&redirectAfter=/hello`)
  const { value: authorizationUrl } = (await start.json()) as { value: string }
  const tx = attacker.cookies().find((c) => c.name.includes('_tx_'))
  if (tx === undefined) throw new Error('no transaction cookie')
  // Without its transaction the callback is refused before the code is redeemed: the URL stays good.
  attacker.clearCookies()
  const refused = await attacker.signIn(authorizationUrl, 'mallory', { gatewayOrigin: stack.gw })
  await refused.body?.cancel()
  const callbackUrl = attacker.history.findLast((u) => u.startsWith(`${stack.gw}${CALLBACK_PATH}?`))
  if (callbackUrl === undefined) throw new Error('the provider did not send the attacker back')
  return { name: tx.name, value: tx.value, callbackUrl }
}

for (const victimStarted of [false, true]) {
  t.test(
    `a transaction tossed by a sibling host is refused (the victim ${victimStarted ? 'has a sign-in of its own in progress' : 'never started a sign-in'})`,
    async (t) => {
      const stack = await startStack(t, { config: { cookies: { secure: true } } })
      const planted = await attackersSignIn(stack)
      t.match(planted.name, /^__Secure-ogw_tx_/, 'the name a sibling can set for the parent domain')

      const victim = stack.browser()
      if (victimStarted) {
        const own = await victim.fetch(`${stack.gw}/api/v1/openid/redirect?performRedirect=0`)
        await own.body?.cancel()
        t.ok(victim.cookie('__Host-ogw_txb'), "the victim's browser holds its binding")
      }
      // What the sibling's Set-Cookie (Domain=<parent>; Path=/api/v1/openid/callback) leaves in the
      // victim's browser: the gateway sees the same Cookie header for it.
      victim.setCookie(planted.name, planted.value, { path: CALLBACK_PATH, secure: true })
      // An unprefixed copy too, which any host may set.
      victim.setCookie(planted.name.replace('__Secure-', ''), planted.value, { path: CALLBACK_PATH })
      const res = await victim.fetch(planted.callbackUrl, { headers: JSON_ACCEPT })
      t.equal(res.status, 403, 'refused')
      t.equal(((await res.json()) as Problem).code, 'state_mismatch')
      t.notOk(
        victim.cookies().some((c) => c.name === '__Host-ogw'),
        'no session was set',
      )
      const page = await victim.fetch(`${stack.gw}/hello`, { headers: JSON_ACCEPT })
      await page.body?.cancel()
      t.equal(page.status, 401, 'the victim is not signed in as the attacker')
    },
  )
}

t.test("the browser's own transaction still completes, and a second tab's too", async (t) => {
  const stack = await startStack(t, { config: { cookies: { secure: true } } })
  const browser = stack.browser()
  const urls: string[] = []
  for (const tab of ['one', 'two']) {
    const start = await browser.fetch(`${stack.gw}/api/v1/openid/redirect?performRedirect=0&redirectAfter=/${tab}`)
    urls.push(((await start.json()) as { value: string }).value)
  }
  for (const [i, url] of [...urls.entries()].reverse()) {
    const done = await browser.signIn(url, 'alice', { gatewayOrigin: stack.gw })
    t.equal(done.status, 302, `tab ${i + 1} completes`)
    t.equal(done.headers.get('location'), `/${i === 0 ? 'one' : 'two'}`)
  }
})
