import t from 'tap'
import { launch, submitProviderForm } from '../fixtures/chromium.ts'
import { startStack } from '../fixtures/stack.ts'

// The form post response mode in a real Chromium, across sites as in production: the gateway on
// http://localhost:<port>, the provider (oidc-provider) on http://127.0.0.1:<port>, two sites. The
// provider's page posts the response to the gateway's callback; the browser sends the sign-in's
// transaction cookie with that cross-site POST only because it is SameSite=None; Secure
// (loopback is a secure context, so Chromium keeps Secure cookies of http://localhost).

t.test("form post: a real browser signs in through the provider's cross-site POST", async (t) => {
  const stack = await startStack(t, { publicHost: 'localhost', config: { provider: { responseMode: 'form_post' } } })
  const browser = await launch()
  t.teardown(() => browser.close())
  const page = await browser.newPage()
  const callbacks: Array<{ method: string; url: string }> = []
  const authorizations: string[] = []
  page.on('request', (r) => {
    if (r.url().startsWith(`${stack.provider?.issuer}/auth?`)) authorizations.push(r.url())
    if (r.url().startsWith(`${stack.gw}/api/v1/openid/callback`)) callbacks.push({ method: r.method(), url: r.url() })
  })

  await page.goto(`${stack.gw}/welcome?from=test`)
  t.equal(new URL(page.url()).origin, stack.provider?.issuer, 'sent to the provider, another site')
  t.equal(new URL(authorizations[0] ?? 'http://x').searchParams.get('response_mode'), 'form_post', 'the authorization request asks for a form post')
  const tx = (await page.context().cookies(`${stack.gw}/api/v1/openid/callback`)).find((c) => c.name.startsWith('ogw_tx_'))
  t.match(tx, { sameSite: 'None', secure: true, httpOnly: true, path: '/api/v1/openid/callback' }, 'the transaction cookie is SameSite=None; Secure')
  await submitProviderForm(page, { login: 'alice', password: 'any' })
  if (!page.url().startsWith(stack.gw)) await Promise.all([page.waitForNavigation(), page.click('button[type="submit"]')]) // consent
  await page.waitForURL(`${stack.gw}/welcome?from=test`)
  t.match(await page.textContent('body'), /"x-forwarded-user": "alice"|alice/, 'signed in, the upstream sees alice')
  t.same(
    callbacks.map((c) => c.method),
    ['POST'],
    'the response came as one POST',
  )
  t.notOk(
    callbacks.some((c) => c.url.includes('code=')),
    'no code in any URL the browser opened',
  )

  const cookies = await page.context().cookies(stack.gw)
  t.match(
    cookies.find((c) => c.name === 'ogw'),
    { sameSite: 'Lax', httpOnly: true },
    'the session cookie keeps the configured SameSite',
  )
  t.notOk(
    cookies.some((c) => c.name.startsWith('ogw_tx_')),
    'the transaction cookie is gone',
  )
})
