import t from 'tap'
import { chromium, type Browser, type Page } from 'playwright-core'
import { startDemoUpstream } from '../../src/dev/upstream.js'
import { startStack } from '../fixtures/stack.js'

// A real headless Chromium (Debian's package, installed by .ci/run) walks the demo's story:
// protected page -> provider login and consent -> back with identity -> refresh -> log out.

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'

async function launch(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // The machine has no network beyond loopback: background services would only fail.
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  })
}

async function submitProviderForm(page: Page, fields: Record<string, string>): Promise<void> {
  for (const [name, value] of Object.entries(fields)) await page.fill(`input[name="${name}"]`, value)
  await Promise.all([page.waitForNavigation(), page.click('button[type="submit"], input[type="submit"]')])
}

t.test('sign in, see the identity, refresh, log out in a real browser', async (t) => {
  const upstream = await startDemoUpstream()
  t.teardown(() => upstream.close())
  const stack = await startStack(t, { upstreams: [{ name: 'demo', target: upstream.url, publicPaths: ['/public/**'] }] })
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
  await page.waitForURL((url) => url.origin === stack.provider?.issuer && url.pathname.startsWith('/interaction'))
  t.ok(await page.locator('input[name="login"]').count(), 'back at the login form: signed out everywhere')
  t.same((await page.context().cookies(stack.gw)).filter((c) => c.name.startsWith('ogw_') || c.name === 'ogw').map((c) => c.name).filter((n) => !n.startsWith('ogw_tx_')), [], 'no session cookie left')
})
