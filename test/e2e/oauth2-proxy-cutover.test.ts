import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { stringify } from 'yaml'
import { LiveGateway } from '#src/runtime/live'
import { Browser } from '../fixtures/browser.ts'
import { stopChild } from '../fixtures/nginx.ts'
import { startOAuth2Proxy } from '../fixtures/oauth2-proxy.ts'
import { startTestProvider } from '../fixtures/provider.ts'
import { reservePort } from '../fixtures/stack.ts'
import { startEchoUpstream } from '../fixtures/upstream.ts'

// The cutover of docs/migrating-from-oauth2-proxy.md ("Cutover: keep the redirect URI"): one
// client at the provider, registered with oauth2-proxy's redirect URI alone
// (`<origin>/oauth2/callback`), serves the real oauth2-proxy (v7.15.6, .ci/peers) and then the
// gateway with `provider.redirectPath: /oauth2/callback` on the same origin, in turn, as a cutover
// replaces one by the other. The gateway's callback there keeps every defence of the contract's
// (state bound to the browser, PKCE, nonce, `iss`), and the path is the gateway's: no upstream
// ever receives it, another method is a 405.

const CLIENT_SECRET = 'cutover-client-secret-0123456789'
const COOKIE_SECRET = 'cutover-cookie-secret-32-bytes!!'

const upstream = await startEchoUpstream()
t.teardown(() => upstream.close())
const reservation = await reservePort()
t.teardown(() => reservation.release())
const origin = `http://127.0.0.1:${reservation.port}`
const idp = await startTestProvider(t, {
  clients: [{ clientId: 'app', clientSecret: CLIENT_SECRET, redirectUris: [`${origin}/oauth2/callback`], postLogoutRedirectUris: [`${origin}/`] }],
})
const dir = mkdtempSync(join(tmpdir(), 'ogw-cutover-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))

/** A browser signs in from `/deep/link` as `username`: the redirect to the provider, the callback's answer, the request the application received. */
async function signIn(username: string) {
  const browser = new Browser()
  const first = await browser.fetch(`${origin}/deep/link`, { navigate: true })
  const before = upstream.requests.length
  const callback = await browser.signIn(`${origin}/deep/link`, username)
  const location = callback.headers.get('location')
  if (location !== null) await browser.follow(new URL(location, callback.url))
  return { browser, first, callback, request: upstream.requests.slice(before).at(-1) }
}

let o2pUser: string | undefined

t.test('day one: the client serves oauth2-proxy', async (t) => {
  await reservation.release()
  const o2p = await startOAuth2Proxy(
    t,
    (url) => [
      '--provider=oidc',
      `--oidc-issuer-url=${idp.issuer}`,
      '--client-id=app',
      `--client-secret=${CLIENT_SECRET}`,
      `--cookie-secret=${COOKIE_SECRET}`,
      '--cookie-secure=false',
      '--email-domain=*',
      '--skip-provider-button',
      '--code-challenge-method=S256',
      `--redirect-url=${url}/oauth2/callback`,
      `--upstream=${upstream.url}`,
    ],
    reservation.port,
  )
  const signed = await signIn('alice')
  const redirectUri = new URL(signed.callback.url)
  t.equal(`${redirectUri.origin}${redirectUri.pathname}`, `${origin}/oauth2/callback`, 'the provider returned to the registered URI')
  if (signed.request === undefined)
    throw new Error(`oauth2-proxy: ${signed.callback.status} ${signed.callback.headers.get('location')} ${await signed.callback.text()}\n${o2p.log()}`)
  o2pUser = String(signed.request.headers['x-forwarded-user'])
  t.equal(o2pUser, 'alice', 'the application received the user')
  await stopChild(o2p.child)
})

t.test('cutover: the same client, unchanged, serves the gateway on the same origin', async (t) => {
  const reserved = await reservePortAt(reservation.port)
  const path = join(dir, 'gateway.yaml')
  writeFileSync(
    path,
    stringify({
      server: { host: '127.0.0.1', port: reservation.port, publicUrl: origin },
      provider: { issuer: idp.issuer, clientId: 'app', clientSecret: CLIENT_SECRET, allowInsecureHttp: true, redirectPath: '/oauth2/callback' },
      cookies: { secrets: [COOKIE_SECRET], secure: false },
      upstreams: [{ name: 'app', target: upstream.url }],
      log: { level: 'silent' },
    }),
  )
  const live = await LiveGateway.start({ path, env: {}, listening: reserved.server })
  t.teardown(() => live.close(1000))
  reserved.handOver()
  await live.listen()
  await live.app.providersReady

  const start = await fetch(`${origin}/api/v1/openid/redirect?redirectAfter=/`, { redirect: 'manual' })
  await start.body?.cancel()
  const sent = new URL(start.headers.get('location') ?? '')
  const signed = await signIn('alice')
  t.equal(sent.searchParams.get('redirect_uri'), `${origin}/oauth2/callback`, "the gateway sends oauth2-proxy's redirect URI")
  t.equal(new URL(signed.callback.url).pathname, '/oauth2/callback', 'and the provider returns there')
  t.equal(signed.callback.status, 302)
  t.equal(signed.callback.headers.get('location'), '/deep/link', 'the callback lands on the deep link')
  t.equal(signed.request?.url, '/deep/link')
  t.equal(signed.request?.headers['x-forwarded-user'], o2pUser, 'the application receives the user oauth2-proxy passed')
  t.equal(signed.request?.headers['x-forwarded-email'], 'alice@example.com')

  await t.test('the transaction cookie travels to that callback only', async (t) => {
    const browser = new Browser()
    const res = await browser.fetch(`${origin}/api/v1/openid/redirect?redirectAfter=/x`, { navigate: true })
    await res.body?.cancel()
    const tx = browser.cookies().filter((c) => c.path !== '/')
    t.ok(tx.length > 0, 'a transaction cookie')
    t.strictSame([...new Set(tx.map((c) => c.path))], ['/oauth2/callback'])
  })

  await t.test('every defence of the callback holds there', async (t) => {
    // A response with another browser's state: no transaction of this browser, refused.
    const other = await signInUntilCallback()
    const stranger = new Browser()
    const res = await stranger.fetch(other.href, { navigate: false, headers: { accept: 'application/json' } })
    t.equal(res.status, 403)
    t.match(await res.json(), { code: 'state_mismatch' })
    // The same response in its own browser, its iss replaced: refused (RFC 9207), and the
    // transaction ends (a refused response is not retried).
    const forged = new URL(other.href)
    forged.searchParams.set('iss', 'http://127.0.0.1:1/other')
    const mixUp = await other.browser.fetch(forged, { navigate: false, headers: { accept: 'application/json' } })
    t.equal(mixUp.status, 403, 'another iss')
    t.match(await mixUp.json(), { code: 'authorization_response_invalid' })
    // The genuine response, on the contract's path instead: the transaction cookie is not sent
    // there, and the response came back on another path than the one sent.
    const again = await signInUntilCallback()
    const moved = new URL(again.href)
    moved.pathname = '/api/v1/openid/callback'
    const wrongPath = await again.browser.fetch(moved, { navigate: false, headers: { accept: 'application/json' } })
    t.equal(wrongPath.status, 403, 'the contract path')
    t.match(await wrongPath.json(), { code: 'state_mismatch' })
    // And on its own path it signs in once; the same code again is refused.
    const ok = await again.browser.fetch(again.href, { navigate: true })
    t.equal(ok.status, 302)
    const replay = await again.browser.fetch(again.href, { navigate: false, headers: { accept: 'application/json' } })
    t.equal(replay.status, 403, 'a replayed response')
    t.match(await replay.json(), { code: 'state_mismatch' })
  })

  await t.test('the path is the gateway: never proxied, another method a 405', async (t) => {
    // Asked by a signed-in browser, which the proxy would let through to the application.
    const ask = (path: string, method = 'GET') => signed.browser.fetch(`${origin}${path}`, { method, headers: { accept: 'application/json' } })
    const before = upstream.requests.length
    const put = await ask('/oauth2/callback', 'PUT')
    t.equal(put.status, 405)
    t.equal(put.headers.get('allow'), 'GET, HEAD, POST')
    await put.body?.cancel()
    for (const below of ['/oauth2/callback/x', '/oauth2/callback/']) {
      const res = await ask(below)
      t.equal(res.status, 404, below)
      await res.body?.cancel()
    }
    t.equal(upstream.requests.length, before, 'the upstream received none of them')
    const sibling = await ask('/oauth2/callbacks')
    t.equal(sibling.status, 200, "a sibling path is the upstream's")
    await sibling.body?.cancel()
    t.equal(upstream.requests.at(-1)?.url, '/oauth2/callbacks')
  })

  await t.test('a forward-auth check about the path is refused: the ingress routes it to the gateway', async (t) => {
    const check = async (uri: string) => {
      const res = await fetch(`${origin}/api/v1/openid/auth`, {
        headers: {
          accept: 'application/json',
          cookie: signed.browser.cookieHeader(`${origin}${uri}`),
          'x-forwarded-host': new URL(origin).host,
          'x-forwarded-proto': 'http',
          'x-forwarded-method': 'GET',
          'x-forwarded-uri': uri,
        },
      })
      await res.body?.cancel()
      return res.status
    }
    t.equal(await check('/deep/link'), 200, 'an application path passes')
    t.equal(await check('/oauth2/callback'), 403, 'the callback path')
    t.equal(await check('/oauth2/callback/x'), 403, 'below it')
  })
})

/**
 * A browser's sign-in stopped at the provider's answer: the callback URL, not yet fetched. The
 * browser signs in once first, so the provider's session and grant let it answer at once.
 */
async function signInUntilCallback(): Promise<{ browser: Browser; href: string }> {
  const browser = new Browser()
  const first = await browser.signIn(`${origin}/api/v1/openid/redirect?redirectAfter=/x`, 'bob')
  await first.body?.cancel()
  let url = `${origin}/api/v1/openid/redirect?redirectAfter=/x`
  for (let step = 0; step < 30; step++) {
    if (url.startsWith(`${origin}/oauth2/callback?`)) return { browser, href: url }
    const res = await browser.fetch(url, { navigate: true })
    await res.body?.cancel()
    const location = res.headers.get('location')
    if (location === null) throw new Error(`no redirect at ${url}: ${res.status}`)
    url = new URL(location, url).href
  }
  throw new Error('the sign-in never reached the callback')
}

/** A reservation of a port the previous listener just left. */
async function reservePortAt(port: number) {
  const { createServer } = await import('node:net')
  const server = createServer()
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, '127.0.0.1', resolve)
  })
  let held = true
  t.teardown(() => (held ? new Promise<void>((resolve) => server.close(() => resolve())) : undefined))
  return {
    server,
    handOver: () => {
      held = false
    },
  }
}
