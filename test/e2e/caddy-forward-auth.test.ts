import t from 'tap'
import { currentCaddy, debianCaddy, passingCaddy, startCaddy, type Caddy, type CaddyBinary } from '../fixtures/caddy.ts'
import { manualClock } from '../fixtures/clock.ts'
import { ALIASED, FORGED, identityAtApp } from '../fixtures/forged-headers.ts'
import { recipe } from '../fixtures/markdown.ts'
import { startStack, type Stack } from '../fixtures/stack.ts'
import { rawRequest } from '../fixtures/http.ts'

// docs/deploy/caddy.md's forward_auth recipe, run as the page shows it by two real Caddies in front
// of the gateway and the oidc-provider stack: Debian bookworm's 2.6.2 and current Caddy (2.11,
// .ci/peers). The sign-ins here ask for no `email` scope, so an allow answer lacks
// X-Auth-Request-Email, and an anonymous one every identity header. What copy_headers does with a
// header the answer lacks changed twice (caddyserver/caddy,
// modules/caddyhttp/reverseproxy/forwardauth/caddyfile.go):
// - before 2.9.0 it sets the header to the placeholder's text, {http.reverse_proxy.header.X-...};
// - from 2.9.0 (caddyserver/caddy#6608) it leaves the header alone, so the client's copy passes
//   (GHSA-7r4p-vjf4-gxv4);
// - from 2.11.2 (caddyserver/caddy#7545) it deletes the client's copy first.
// The recipe removes the client's copies itself and then the placeholder values, so it serves all
// three; both binaries run every scenario.

const PAGE = 'docs/deploy/caddy.md'

interface Version {
  binary: CaddyBinary
  /** Whether copy_headers sets a header the answer lacks to the placeholder's text (before 2.9.0). */
  placeholderText: boolean
  /** Whether copy_headers leaves the client's copy of a header the answer lacks (2.9.0 to 2.11.1). */
  passesClientCopy: boolean
}

const VERSIONS: Version[] = [
  { binary: debianCaddy(), placeholderText: true, passesClientCopy: false },
  { binary: passingCaddy(), placeholderText: false, passesClientCopy: true },
  { binary: currentCaddy(), placeholderText: false, passesClientCopy: false },
]

function sites(page: string, stack: Stack): string {
  const hostPort = (url: string): string => new URL(url).host
  return page
    .replaceAll('127.0.0.1:8080', hostPort(stack.gw))
    .replaceAll('127.0.0.1:3000', hostPort(stack.upstream.url))
    .replace(/^app\.example\.com \{/m, 'http://:0 {\n\tbind 127.0.0.1')
}

const page = recipe(PAGE, 'caddyfile')
const stack = await startStack(t, {
  upstreams: [
    { name: 'admin', match: { pathPrefix: '/admin' }, allow: { groups: ['nobody'] } },
    { name: 'app', publicPaths: ['/public/**'] },
  ],
  config: { provider: { scopes: ['openid', 'profile', 'groups'] } },
})
const caddies = new Map<Version, Caddy>()
for (const version of VERSIONS) caddies.set(version, await startCaddy(t, version.binary, sites(page, stack)))
// The sign-in may return to each Caddy's host, known only now.
stack.replicas[0]?.rewrite((c) => ({ ...c, redirects: { allowedHosts: [...caddies.values()].map((caddy) => `127.0.0.1:${caddy.port}`) } }))
if (!(await stack.live.reload('SIGHUP'))) throw new Error('the gateway did not reload')

for (const version of VERSIONS) {
  const caddy = caddies.get(version) as Caddy
  t.test(version.binary.name, async (t) => {
    t.test('an anonymous request to a public path reaches the application with no identity header', async (t) => {
      const before = stack.upstream.requests.length
      t.equal((await rawRequest(caddy.url, '/public/logo.png')).status, 200)
      t.equal(stack.upstream.requests.length, before + 1)
      t.same(identityAtApp(stack.upstream), {}, 'no header, and no placeholder text')

      t.equal((await rawRequest(caddy.url, '/public/logo.png', { headers: FORGED })).status, 200)
      t.same(identityAtApp(stack.upstream), {}, "nor the client's own copies")

      t.equal((await rawRequest(caddy.url, '/public/logo.png', { headers: ALIASED })).status, 200)
      t.same(identityAtApp(stack.upstream), {}, 'nor their spellings with underscores')

      const before2 = stack.upstream.requests.length
      const named = await rawRequest(caddy.url, '/public/logo.png', { headers: { 'x-original-method': 'GET', 'x-original-url': `${caddy.url}/admin` } })
      t.equal(named.status, 400, 'a client naming another request is refused')
      t.equal(stack.upstream.requests.length, before2)
    })

    t.test('signed in without email: the application gets the user and no email header', async (t) => {
      const browser = await stack.signedIn('alice')
      const res = await browser.fetch(`${caddy.url}/page`, { headers: { ...FORGED, ...ALIASED } })
      t.equal(res.status, 200)
      const headers = identityAtApp(stack.upstream)
      t.equal(headers['x-auth-request-user'], 'alice')
      t.equal(headers['x-auth-request-groups'], 'admins,staff')
      t.equal(headers['x-auth-request-email'], undefined, 'no email header, and no placeholder text')
      for (const [name, value] of Object.entries(headers)) t.notMatch(String(value), /^\{|mallory|DELETE/, `${name}: ${String(value)}`)
      t.same(
        Object.keys(headers).filter((name) => name.includes('_')),
        [],
        'no underscored spelling',
      )
    })

    t.test('not signed in: a page load is sent to sign in and comes back with its whole query; a program gets the problem+json', async (t) => {
      const browser = stack.browser()
      const res = await browser.fetch(`${caddy.url}/x?a=1&b=2`, { navigate: true })
      t.equal(res.status, 302)
      const location = res.headers.get('location') ?? ''
      t.equal(new URL(location).searchParams.get('redirectAfter'), `${caddy.url}/x?a=1&b=2`)
      const callback = await browser.signIn(location, 'bob')
      t.equal(callback.headers.get('location'), `${caddy.url}/x?a=1&b=2`)
      const { response } = await browser.follow(`${caddy.url}/x?a=1&b=2`)
      t.equal(response.status, 200)
      t.equal(stack.upstream.requests.at(-1)?.url, '/x?a=1&b=2')
      t.equal(identityAtApp(stack.upstream)['x-auth-request-user'], 'bob')

      const api = await rawRequest(caddy.url, '/api/items', { headers: { accept: 'application/json' } })
      t.equal(api.status, 401)
      t.match(api.headers['content-type'], /^application\/problem\+json/)
      t.match(api.json(), { code: 'unauthenticated', signInUrl: /redirectAfter=/ })
    })

    t.test("a refusal is the gateway's own answer", async (t) => {
      const browser = await stack.signedIn('alice')
      const before = stack.upstream.requests.length
      const res = await browser.fetch(`${caddy.url}/admin/x`, { headers: { accept: 'application/json' } })
      t.equal(res.status, 403)
      t.match(res.headers.get('content-type'), /^application\/problem\+json/)
      t.match(await res.json(), { code: 'forbidden' })
      t.equal(stack.upstream.requests.length, before, 'nothing reached the application')
    })

    const bareWhat = version.placeholderText ? 'hands the application placeholder text' : 'sets nothing: the lines are not needed there'
    t.test(`without the recipe's placeholder lines, ${version.binary.name} ${bareWhat}`, async (t) => {
      const bare = await startCaddy(
        t,
        version.binary,
        sites(page.replace(/^\s*(@placeholder_\w+ header_regexp|request_header @placeholder_).*\n/gm, ''), stack),
      )
      await rawRequest(bare.url, '/public/logo.png', { headers: FORGED })
      t.equal(identityAtApp(stack.upstream)['x-auth-request-user'], version.placeholderText ? '{http.reverse_proxy.header.X-Auth-Request-User}' : undefined)
    })

    const copyWhat = version.passesClientCopy ? "hands the application the client's own identity" : 'sets none of it: the line is not needed there'
    t.test(`without the recipe's removal of the client's X-Auth-Request-*, ${version.binary.name} ${copyWhat}`, async (t) => {
      const bare = await startCaddy(t, version.binary, sites(page.replace(/^\s*request_header -X-Auth-Request-\*\n/m, ''), stack))
      await rawRequest(bare.url, '/public/logo.png', { headers: FORGED })
      t.equal(identityAtApp(stack.upstream)['x-auth-request-user'], version.passesClientCopy ? 'mallory' : undefined)
    })
  })
}

t.test("a refreshed session's Set-Cookie does not reach the browser", async (t) => {
  // The check refreshes an expired access token and answers 200 with the cookie store's new
  // session in Set-Cookie (test/checks/forward-auth.test.ts, "expired sign-ins"); forward_auth
  // copies only the listed headers, onto the request.
  const clock = manualClock()
  const refreshing = await startStack(t, { clock, provider: { accessTokenTtlSeconds: 3 }, upstreams: [{ name: 'app' }] })
  for (const version of VERSIONS) {
    const caddy = await startCaddy(t, version.binary, sites(page, refreshing))
    const browser = await refreshing.signedIn('alice')
    const session = browser.cookie('ogw')?.value
    t.equal((await browser.fetch(`${caddy.url}/page`)).status, 200)
    clock.advance(3300)
    const res = await browser.fetch(`${caddy.url}/page`)
    t.equal(res.status, 200, `${version.binary.name}: refreshed by the check`)
    t.equal(refreshing.upstream.requests.at(-1)?.headers['x-auth-request-user'], 'alice')
    t.same(
      res.headers.getSetCookie().filter((line) => line.startsWith('ogw')),
      [],
      `${version.binary.name}: no Set-Cookie of the gateway's`,
    )
    t.equal(browser.cookie('ogw')?.value, session, 'the browser keeps the session from before the refresh')
  }
})
