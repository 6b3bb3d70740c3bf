import t from 'tap'
import { spawn } from 'node:child_process'
import { Browser } from '../fixtures/browser.ts'
import { freePort } from '../fixtures/stack.ts'

// `npm run demo` as a new user runs it: one process, a printed URL, sign in, see the identity.
// Built from the source by tap's `before` program (test/build.ts), as `npm run demo` runs it.
const DEMO = new URL('../../build/dev/demo.js', import.meta.url).pathname

t.test('the demo starts everything, prints the URL, and Ctrl-C stops it with exit 0', async (t) => {
  const port = await freePort()
  const child = spawn(process.execPath, [DEMO], {
    env: { ...process.env, DEMO_GATEWAY_PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout.on('data', (d: Buffer) => (output += d.toString()))
  child.stderr.on('data', (d: Buffer) => (output += d.toString()))
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve))
  t.teardown(() => child.kill('SIGKILL'))

  const url = `http://127.0.0.1:${port}/`
  for (let i = 0; i < 200 && !output.includes('Ctrl-C'); i++) await new Promise((r) => setTimeout(r, 100))
  t.match(output, `Open            ${url}`, 'the URL to open')
  t.match(output, /any username/, 'how to sign in')

  const browser = new Browser()
  const back = await browser.signIn(url, 'alice')
  t.equal(back.status, 302, 'the callback returns to the page')
  t.same(browser.prompts, ['login'], 'the login form, and no consent ("Authorize") screen')
  t.notOk(
    browser.history.some((u) => u.includes('prompt=consent')),
    'the gateway asks for no consent',
  )
  const page = await browser.follow(url)
  const html = await page.response.text()
  t.match(html, /Signed in as <strong>alice<\/strong>/)
  t.match(html, /admins,staff/)
  // The provider runs on the gateway's host: its cookies reach the application, labelled as the
  // provider's; the gateway's own, which the browser holds, never do.
  const issuerUrl = /OpenID provider (\S+)/.exec(output)?.[1] ?? ''
  const owners = [...html.matchAll(/<tr><th>([^<]*)<\/th><td class="owner">([^<]*)<\/td><\/tr>/g)].map((m) => [m[1], m[2]])
  t.ok(
    owners.some(([name]) => name === '_session'),
    "the provider's session cookie is listed",
  )
  for (const [name, owner] of owners) {
    t.equal(owner, `the OpenID provider&#39;s (${issuerUrl}), not the gateway&#39;s`, `${name ?? ''} is labelled the provider's`)
  }
  t.ok(browser.cookie('ogw'), 'the browser holds the gateway session cookie')
  t.notOk(
    owners.some(([name]) => name?.startsWith('ogw')),
    "no cookie of the gateway's reaches the application",
  )
  t.match(html, "The gateway's own cookies (named after <code>ogw</code>, its <code>cookies.name</code>) never arrive here")
  const refresh = await browser.fetch(`${url}api/v1/openid/refresh`)
  t.equal(refresh.status, 200)
  const logout = await browser.fetch(`${url}api/v1/openid/logout`, { method: 'DELETE' })
  t.equal(logout.status, 200)
  const { value } = (await logout.json()) as { value: string }
  const done = await browser.confirmProviderLogout(value)
  // The end of the logout is a page that says so, not the provider's login form.
  // RP-Initiated Logout 1.0 section 2: the state sent with post_logout_redirect_uri comes back.
  const landing = new URL(done.response.url)
  t.equal(`${landing.origin}${landing.pathname}`, `${url}api/v1/openid/sign-out`, "the provider sends the user back to the gateway's sign-out page")
  t.equal(landing.searchParams.get('state'), new URL(value).searchParams.get('state'), 'with the state the end-session URL carried')
  const signedOut = await done.response.text()
  t.match(signedOut, 'You are signed out')
  t.match(signedOut, `href="http://127.0.0.1:${port}/api/v1/openid/redirect?redirectAfter=%2F">Sign in again</a>`)

  // Signing out at the provider itself reaches the gateway by back-channel logout.
  t.match(output, `${url}api/v1/openid/backchannel-logout ends the gateway session too`)
  const issuer = /OpenID provider (\S+)/.exec(output)?.[1]
  const other = new Browser()
  await other.signIn(url, 'bob')
  const before = await other.fetch(`${url}api/v1/openid/refresh`)
  t.equal(before.status, 200, 'signed in')
  const ended = await other.confirmProviderLogout(`${issuer}/session/end`)
  await ended.response.body?.cancel()
  const after = await other.fetch(url, { headers: { accept: 'application/json' } })
  t.equal(after.status, 401, "the provider's logout ended the gateway session")

  child.kill('SIGINT')
  t.equal(await exited, 0)
})
