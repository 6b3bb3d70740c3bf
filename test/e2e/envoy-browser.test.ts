import t from 'tap'
import { launch, screenshot, submitProviderForm } from '../fixtures/chromium.ts'
import { DEFAULT_IDENTITY_HEADERS, startEnvoy } from '../fixtures/envoy.ts'
import { freePort, startStack } from '../fixtures/stack.ts'

// A person behind Envoy: headless Chromium opens the application through an Envoy that asks the
// gateway's HTTP ext_authz endpoint (test/fixtures/envoy.ts plays Envoy by its documented rules),
// is sent to sign in by the check's 302, signs in at the real oidc-provider, comes back to the
// application through Envoy, and the application sees the identity and none of the gateway's
// cookies. The sign-in endpoints are routed to the gateway unfiltered, as the docs tell operators.

t.test('sign in through Envoy ext_authz in a real browser', async (t) => {
  const envoyPort = await freePort()
  const envoyHost = `127.0.0.1:${envoyPort}`
  // Cookies ignore ports: the session cookie set on the gateway's host reaches Envoy's too.
  const stack = await startStack(t, { config: { redirects: { allowedHosts: [envoyHost] } } })
  const envoy = await startEnvoy({
    gateway: stack.gw,
    upstream: stack.upstream.url,
    headersToBackend: [...DEFAULT_IDENTITY_HEADERS, 'cookie'],
    clientHeadersOnSuccess: ['set-cookie'],
    port: envoyPort,
  })
  t.teardown(() => envoy.close())
  const browser = await launch()
  t.teardown(() => browser.close())
  const page = await browser.newPage()
  await page.context().addCookies([{ name: 'app', value: 'mine', domain: '127.0.0.1', path: '/' }])

  await page.goto(`${envoy.url}/welcome?from=envoy`)
  t.equal(new URL(page.url()).origin, stack.provider?.issuer, "the check's 302 sent the browser to the provider")
  t.equal(envoy.checks[0], 302)
  await submitProviderForm(page, { login: 'alice', password: 'any' })
  if (!page.url().startsWith(envoy.url)) await Promise.all([page.waitForNavigation(), page.click('button[type="submit"]')]) // consent
  await page.waitForURL(`${envoy.url}/welcome?from=envoy`)
  await screenshot(page, 'ogw-envoy.png')
  const echoed = JSON.parse((await page.textContent('body')) ?? '{}') as { url: string; headers: Record<string, string> }
  t.equal(echoed.url, '/welcome?from=envoy', 'back on the page asked for, served by the application through Envoy')
  t.equal(echoed.headers['x-forwarded-user'], 'alice')
  t.equal(echoed.headers['x-forwarded-groups'], 'admins,staff')
  // The provider's own cookies share the loopback host here; the gateway's never pass.
  const sent = echoed.headers.cookie?.split('; ') ?? []
  t.ok(sent.includes('app=mine'), "the application's cookie")
  t.same(
    sent.filter((pair) => pair.startsWith('ogw')),
    [],
    "none of the gateway's",
  )
  t.equal(envoy.checks.at(-1), 200, 'allowed with exactly 200')
})
