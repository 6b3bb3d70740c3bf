import t from 'tap'
import { launch, screenshot, submitProviderForm } from '../fixtures/chromium.ts'
import { startDemoUpstream } from '#src/dev/upstream'
import { startStack } from '../fixtures/stack.ts'

// A real headless Chromium (Debian's package, installed by .ci/run) walks the demo's story:
// protected page -> provider login and consent -> back with identity -> refresh -> log out.

t.test('sign in, see the identity, refresh, log out in a real browser', async (t) => {
  const upstream = await startDemoUpstream()
  t.teardown(() => upstream.close())
  const stack = await startStack(t, {
    upstreams: [{ name: 'demo', target: upstream.url, publicPaths: ['/public/**'] }],
    postLogoutPath: '/api/v1/openid/sign-out',
  })
  const browser = await launch()
  t.teardown(() => browser.close())
  const page = await browser.newPage()

  await page.goto(`${stack.gw}/welcome?from=test`)
  t.equal(new URL(page.url()).origin, stack.provider?.issuer, 'sent to the provider to sign in')
  await submitProviderForm(page, { login: 'alice', password: 'any' })
  if ((await page.locator('input[name="login"]').count()) === 0 && !page.url().startsWith(stack.gw)) {
    await Promise.all([page.waitForNavigation(), page.click('button[type="submit"]')]) // consent
  }
  await page.waitForURL(`${stack.gw}/welcome?from=test`)
  t.match(await page.textContent('body'), /Signed in as alice/)
  t.match(await page.textContent('body'), /admins,staff/)

  const cookies = await page.context().cookies(stack.gw)
  const session = cookies.find((c) => c.name === 'ogw')
  t.ok(session?.httpOnly, 'the session cookie is HttpOnly')
  t.equal(session?.sameSite, 'Lax')
  t.equal(await page.evaluate('document.cookie.includes("ogw")'), false, 'scripts cannot read it')

  await page.click('#refresh')
  // A locator wait, not waitForFunction: the demo page's CSP forbids eval, as it should.
  await page.locator('#result', { hasText: /^Refresh: / }).waitFor()
  t.match(await page.textContent('#result'), /Refresh: 200/)

  await page.click('#logout')
  await page.waitForURL((url) => url.origin === stack.provider?.issuer)
  // oidc-provider asks to confirm the sign-out, then returns to post_logout_redirect_uri.
  await Promise.all([page.waitForNavigation(), page.click('button[value="yes"], button[name="logout"]')])
  await page.waitForURL((url) => url.href.split('?')[0] === `${stack.gw}/api/v1/openid/sign-out`) // with the state of the logout request
  t.match(await page.textContent('h1'), 'You are signed out', "the gateway's signed-out page, not the provider's login form")
  await Promise.all([page.waitForNavigation(), page.click('text=Sign in again')])
  t.ok(await page.locator('input[name="login"]').count(), 'signing in again asks for a login: signed out at the provider too')
  t.same(
    (await page.context().cookies(stack.gw))
      .filter((c) => c.name.startsWith('ogw_') || c.name === 'ogw')
      .map((c) => c.name)
      .filter((n) => !n.startsWith('ogw_tx_') && n !== 'ogw_txb'),
    [],
    'no session cookie left',
  )
})

t.test('pages for people: a cancelled sign-in and a refusal are pages with the way on', async (t) => {
  const stack = await startStack(t, {
    upstreams: [
      { name: 'app', match: { pathPrefix: '/' } },
      { name: 'admin', match: { pathPrefix: '/admin' }, allow: { groups: ['admins'] } },
    ],
    postLogoutPath: '/api/v1/openid/sign-out',
  })
  const browser = await launch()
  t.teardown(() => browser.close())
  const page = await browser.newPage()
  const blocked: string[] = []
  page.on('console', (m) => {
    if (/Content Security Policy/i.test(m.text())) blocked.push(m.text())
  })

  // Cancel at the provider: the callback comes back with error=access_denied and no code.
  await page.goto(`${stack.gw}/admin/reports`)
  const [cancelled] = await Promise.all([page.waitForResponse((r) => r.url().startsWith(`${stack.gw}/api/v1/openid/callback`)), page.click('text=[ Cancel ]')])
  t.equal(cancelled.status(), 400, 'the page keeps the status')
  t.match(await page.textContent('.code'), 'Error 400 · code_missing')
  t.match(await page.textContent('body'), 'The sign-in was cancelled at the identity provider')
  await screenshot(page, 'ogw-cancelled.png')
  await Promise.all([page.waitForNavigation(), page.click('text=Sign in')])
  t.equal(new URL(page.url()).origin, stack.provider?.issuer, 'the sign-in link starts a new sign-in')

  // Signed in as bob, refused by /admin: a page that names him and offers to switch account.
  await submitProviderForm(page, { login: 'bob', password: 'any' })
  if (!page.url().startsWith(stack.gw)) await Promise.all([page.waitForNavigation(), page.click('button[type="submit"]')]) // consent
  const refused = await page.goto(`${stack.gw}/admin/reports`)
  t.equal(refused?.status(), 403)
  t.match(await page.textContent('.who'), 'Signed in as bob')
  await screenshot(page, 'ogw-forbidden.png')
  // The form needs no script; the browser's Origin passes the sign-out CSRF check, and the CSP
  // lets the form's redirect go on to the provider's end-session.
  await Promise.all([page.waitForURL((url) => url.origin === stack.provider?.issuer), page.click('text=Sign out / switch account')])
  await Promise.all([page.waitForNavigation(), page.click('button[value="yes"], button[name="logout"]')])
  await page.waitForURL((url) => url.href.split('?')[0] === `${stack.gw}/api/v1/openid/sign-out`) // with the state of the logout request
  t.match(await page.textContent('h1'), 'You are signed out')
  await screenshot(page, 'ogw-signed-out.png')
  t.same(blocked, [], 'nothing was blocked by the CSP')
})
