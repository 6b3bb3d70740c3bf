import { request } from 'node:http'
import t from 'tap'
import type { BrowserContext, Page } from 'playwright-core'
import { launch, submitProviderForm } from '../fixtures/chromium.ts'
import { manualClock } from '../fixtures/clock.ts'
import { startStack } from '../fixtures/stack.ts'

// Several cookie domains (cookies.domains, docs/features/several-domains.md) in a real Chromium,
// whose cookies follow RFC 6265's Domain rules across hosts. Chromium resolves every *.localhost
// name to loopback, so one gateway on 127.0.0.1 serves auth.a.localhost (server.publicUrl),
// app.b.localhost and app.c.localhost, three cookie domains. The sign-in on app.b goes through the
// provider, then the hand-off (GET /api/v1/openid/handoff) sets the session on b.localhost.
// Then each attack on the hand-off, each refused by one defence of routes/handoff.ts.

const DOMAINS = ['a.localhost', 'b.localhost', 'c.localhost']

t.test('several cookie domains: one sign-in, handed to another domain once, and every attack on the hand-off refused', async (t) => {
  t.setTimeout(100_000)
  const clock = manualClock()
  const stack = await startStack(t, { publicHost: 'auth.a.localhost', clock, config: { cookies: { domains: DOMAINS } } })
  const port = new URL(stack.gw).port
  const origin = (host: string): string => `http://${host}:${port}`
  const [replica] = stack.replicas
  if (replica === undefined) throw new Error('no replica')
  // redirectAfter may name the other domains' hosts (the port is the stack's).
  replica.rewrite((c) => ({ ...c, redirects: { allowedHosts: [`.b.localhost:${port}`, `.c.localhost:${port}`, `.z.localhost:${port}`] } }))
  t.equal(await replica.live.reload('SIGHUP'), true, 'reloaded with the other domains in redirects.allowedHosts')

  // Plain HTTP to 127.0.0.1 with the Host header of the page (Node does not resolve *.localhost):
  // for what no browser needs to do, and for the steps a test holds back from the browser.
  const get = (host: string, path: string, cookie?: string): Promise<{ status: number; location: string | undefined; body: string; setCookie: string[] }> =>
    new Promise((resolve, reject) => {
      const headers = { host: `${host}:${port}`, accept: 'application/json', ...(cookie === undefined ? {} : { cookie }) }
      const req = request({ host: '127.0.0.1', port, path, headers }, (res) => {
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (c: string) => (text += c))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, location: res.headers.location, body: text, setCookie: res.headers['set-cookie'] ?? [] }))
      })
      req.on('error', reject)
      req.end()
    })

  const browser = await launch()
  t.teardown(() => browser.close())

  /** A fresh browser profile. */
  async function session(): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext()
    return { context, page: await context.newPage() }
  }
  async function signInAt(page: Page, url: string, login: string): Promise<void> {
    await page.goto(url)
    await submitProviderForm(page, { login, password: 'any' })
    if (page.url().startsWith(stack.provider?.issuer ?? '-')) await Promise.all([page.waitForNavigation(), page.click('button[type="submit"]')])
  }
  /**
   * A browser signed in on the public host as `login`, and a hand-off token it got for app.b
   * (steps 1 and 2 through the context's own request API: its cookies, no redirect followed),
   * not yet used. Playwright routes only the first request of a redirect chain, so the token
   * step of a chain cannot be held back.
   */
  async function tokenFor(login: string, path: string): Promise<{ context: BrowserContext; page: Page; token: string }> {
    const { context, page } = await session()
    await signInAt(page, `${origin('auth.a.localhost')}/start`, login)
    await page.waitForURL(`${origin('auth.a.localhost')}/start`)
    // Step 1 as app.b answers it; its binding cookie put in the browser as the browser would keep it.
    const begin = await get('app.b.localhost', `/api/v1/openid/handoff?redirectAfter=${encodeURIComponent(path)}`)
    const binding = /^ogw_txb=([^;]+)/.exec(begin.setCookie.find((c) => c.startsWith('ogw_txb=')) ?? '')?.[1] ?? ''
    await context.addCookies([{ name: 'ogw_txb', value: binding, url: origin('app.b.localhost'), httpOnly: true }])
    // Step 2 with the browser's cookies on the public host.
    const jar = (await context.cookies(origin('auth.a.localhost'))).map((c) => `${c.name}=${c.value}`).join('; ')
    const mint = await get('auth.a.localhost', new URL(begin.location ?? 'http://x/').pathname + new URL(begin.location ?? 'http://x/').search, jar)
    const token = mint.location ?? ''
    t.match(token, `${origin('app.b.localhost')}/api/v1/openid/handoff?token=`, 'a hand-off token for app.b')
    return { context, page, token }
  }
  const body = async (page: Page): Promise<string> => (await page.textContent('body')) ?? ''

  await t.test('the sign-in on app.b ends on app.b, signed in, with the cookie on each domain', async (t) => {
    const { context, page } = await session()
    const visited: string[] = []
    page.on('request', (r) => {
      if (r.isNavigationRequest()) visited.push(r.url())
    })
    await signInAt(page, `${origin('app.b.localhost')}/page?x=1`, 'alice')
    await page.waitForURL(`${origin('app.b.localhost')}/page?x=1`)
    t.match(await body(page), /alice/, 'the upstream on app.b sees alice')
    const paths = visited.map((u) => new URL(u)).map((u) => `${u.host}${u.pathname}`)
    t.same(
      paths.filter((p) => p.includes('/handoff')),
      [`app.b.localhost:${port}/api/v1/openid/handoff`, `auth.a.localhost:${port}/api/v1/openid/handoff`, `app.b.localhost:${port}/api/v1/openid/handoff`],
      'begin on app.b, mint on the public host, complete on app.b',
    )
    const cookies = await context.cookies()
    t.match(
      cookies
        .filter((c) => c.name === 'ogw')
        .map((c) => c.domain)
        .sort(),
      ['.a.localhost', '.b.localhost'],
      'the session cookie is set for a.localhost (callback) and b.localhost (hand-off), not c',
    )
    const sibling = await context.newPage()
    await sibling.goto(`${origin('other.b.localhost')}/sibling`)
    t.match(await body(sibling), /alice/, 'another host of b.localhost is signed in too (longest-match Domain)')
    await sibling.goto(`${origin('www.a.localhost')}/sibling`)
    t.match(await body(sibling), /alice/, 'and another host of a.localhost')

    // Sign-out on app.b ends the session for every domain (the cookie store lists it as revoked).
    const status = await page.evaluate(async () => (await fetch('/api/v1/openid/logout', { method: 'DELETE' })).status)
    t.equal(status, 200, 'logout on app.b')
    await sibling.goto(`${origin('auth.a.localhost')}/after-logout`)
    t.ok(sibling.url().startsWith(stack.provider?.issuer ?? '-'), 'the copy on a.localhost no longer works: sent to sign in')
    await context.close()
  })

  await t.test('replay: a used token does not open again', async (t) => {
    const { context, page, token } = await tokenFor('alice', '/replay')
    const first = await page.goto(token)
    t.equal(new URL(page.url()).pathname, '/replay', 'the first use signs in on app.b')
    t.equal(first?.status(), 200, 'the page itself answers')
    const again = await page.goto(token)
    t.equal(again?.status(), 400, 'the same token again: 400')
    t.match(await body(page), /used before/, 'the page says why')
    await context.close()
  })

  await t.test('a token used on another configured domain than it names is refused', async (t) => {
    const { context, page, token } = await tokenFor('alice', '/other')
    // The browser's own binding copied to app.c: only the token's host binding is left to refuse.
    const binding = (await context.cookies(origin('app.b.localhost'))).find((c) => c.name === 'ogw_txb')
    if (binding === undefined) throw new Error('no binding on app.b')
    await context.addCookies([{ name: binding.name, value: binding.value, url: origin('app.c.localhost'), httpOnly: true }])
    const moved = token.replace('app.b.localhost', 'app.c.localhost')
    const answer = await page.goto(moved)
    t.equal(answer?.status(), 400, 'on app.c: 400')
    t.match(await body(page), /invalid, expired, or for another host/, 'the page says why')
    t.notOk(
      (await context.cookies(origin('app.c.localhost'))).some((c) => c.name === 'ogw' && c.domain.endsWith('c.localhost')),
      'no session cookie on c.localhost',
    )
    await context.close()
  })

  await t.test('an expired token is refused', async (t) => {
    const { context, page, token } = await tokenFor('alice', '/late')
    clock.advance(11_000)
    const answer = await page.goto(token)
    t.equal(answer?.status(), 400, '11 seconds later: 400')
    t.match(await body(page), /invalid, expired, or for another host/, 'the page says why')
    await context.close()
  })

  await t.test("session fixation: an attacker's token delivered to a victim's browser does not sign the victim in", async (t) => {
    const attacker = await tokenFor('mallory', '/trap')
    const { token } = attacker
    const victim = await session()
    // The victim holds a binding of their own on app.b (a hand-off they began themselves).
    const own = await get('app.b.localhost', '/api/v1/openid/handoff?redirectAfter=%2F')
    const binding = /^ogw_txb=([^;]+)/.exec(own.setCookie.find((c) => c.startsWith('ogw_txb=')) ?? '')?.[1] ?? ''
    await victim.context.addCookies([{ name: 'ogw_txb', value: binding, url: origin('app.b.localhost'), httpOnly: true }])
    t.ok(
      (await victim.context.cookies(origin('app.b.localhost'))).some((c) => c.name === 'ogw_txb'),
      'the victim has a binding of its own',
    )
    const answer = await victim.page.goto(token)
    t.equal(answer?.status(), 400, "the attacker's token in the victim's browser: 400")
    t.match(await body(victim.page), /started in another browser/, 'the page says why')
    t.notOk(
      (await victim.context.cookies(origin('app.b.localhost'))).some((c) => c.name === 'ogw'),
      'the victim has no session cookie',
    )
    // The attacker's token is still unused: the refusal did not spend it, and it still works in the attacker's browser.
    const completed = await attacker.page.goto(token)
    t.equal(completed?.status(), 200, "the attacker's own browser still completes its hand-off")
    t.match(await body(attacker.page), /mallory/)
    await attacker.context.close()
    await victim.context.close()
  })

  await t.test('a tampered token is refused', async (t) => {
    const { context, page, token } = await tokenFor('alice', '/tamper')
    const url = new URL(token)
    const value = url.searchParams.get('token') ?? ''
    const at = value.length - 30
    url.searchParams.set('token', value.slice(0, at) + (value[at] === 'A' ? 'B' : 'A') + value.slice(at + 1))
    const answer = await page.goto(url.href)
    t.equal(answer?.status(), 400, 'one character changed: 400')
    await context.close()
  })

  await t.test('a hand-off to a host of no configured domain: 400, no redirect', async (t) => {
    for (const host of ['app.z.localhost', 'localhost', 'b.localhost.evil.localhost', 'xb.localhost']) {
      const answer = await get(host, '/api/v1/openid/handoff?redirectAfter=%2F')
      t.equal(answer.status, 400, `${host}: 400`)
      t.equal(answer.location, undefined, `${host}: no Location`)
    }
    const own = await get('www.a.localhost', '/api/v1/openid/handoff?redirectAfter=%2F')
    t.equal(own.status, 400, "a host the public host's cookie already reaches needs no hand-off: 400")
  })

  await t.test("open redirects through the hand-off's return path are refused", async (t) => {
    for (const back of [
      '//evil.example/',
      '/\\evil.example/',
      'https://evil.example/',
      '/%2F%2Fevil.example',
      'evil.example',
      '/%09/evil.example',
      `${origin('app.b.localhost')}/x`,
    ]) {
      const answer = await get('app.b.localhost', `/api/v1/openid/handoff?redirectAfter=${encodeURIComponent(back)}`)
      t.equal(answer.status, 400, `${JSON.stringify(back)}: 400`)
      t.equal(answer.location, undefined, `${JSON.stringify(back)}: no Location`)
    }
    const ok = await get('app.b.localhost', '/api/v1/openid/handoff?redirectAfter=%2Fhome%3Fq%3D1')
    t.equal(ok.status, 302, 'a path on the host: on to the public host')
    t.ok(ok.location?.startsWith(`${stack.gw}/api/v1/openid/handoff?request=`), 'the only place it goes is the public host')
    const request = new URL(ok.location ?? 'http://x').searchParams.get('request') ?? ''
    const signedOut = await get('auth.a.localhost', `/api/v1/openid/handoff?request=${request}`)
    t.equal(signedOut.status, 302, 'step 2 without a session on the public host: to sign in')
    t.equal(
      signedOut.location,
      `/api/v1/openid/redirect?redirectAfter=${encodeURIComponent(`${origin('app.b.localhost')}/home?q=1`)}`,
      'coming back to the page',
    )
    const elsewhere = await get('app.b.localhost', `/api/v1/openid/handoff?request=${request}`)
    t.equal(elsewhere.status, 400, 'a hand-off request is answered on the public host only')
    const forged = await get('auth.a.localhost', `/api/v1/openid/handoff?request=${request.slice(0, -2)}xx`)
    t.equal(forged.status, 400, 'a forged request: 400')
    t.equal(forged.location, undefined, 'a forged request: no Location')
    const both = await get('app.b.localhost', '/api/v1/openid/handoff?redirectAfter=%2F&token=x')
    t.equal(both.status, 400, 'two steps at once: 400')
  })
})
