import t from 'tap'
import { requireCaddy, startCaddy, type Caddy } from '../fixtures/caddy.ts'
import { recipe } from '../fixtures/markdown.ts'
import { startStack, type Stack } from '../fixtures/stack.ts'
import { rawRequest } from '../fixtures/http.ts'
import { AUTH_REQUEST_HEADERS, REQUEST_OVERRIDE_HEADER_NAMES } from '#src/proxy/header-policy'

// docs/deploy/caddy.md's forward_auth recipe, run as the page shows it by a real Caddy 2.6.2 in
// front of the gateway and the oidc-provider stack. Caddy 2.6 sets a header the check's answer
// lacks to the placeholder's text ({http.reverse_proxy.header.X-Auth-Request-User}); the recipe
// removes such values. The sign-ins here ask for no `email` scope, so an allow answer lacks
// X-Auth-Request-Email, and an anonymous one every identity header.

const PAGE = 'docs/deploy/caddy.md'
const IDENTITY = Object.values(AUTH_REQUEST_HEADERS).map((n) => n.toLowerCase())
/** X-Original-Method and X-Original-URL name the request to the check: a client's copy that disagrees with Caddy's description is refused (400). */
const NAMING = ['x-original-method', 'x-original-url']
const FORGED = Object.fromEntries(
  [...IDENTITY, ...REQUEST_OVERRIDE_HEADER_NAMES.filter((n) => !NAMING.includes(n))].map((n) => [n, n.includes('method') ? 'DELETE' : 'mallory']),
)

function sites(page: string, stack: Stack): string {
  const hostPort = (url: string): string => new URL(url).host
  return page
    .replaceAll('127.0.0.1:8080', hostPort(stack.gw))
    .replaceAll('127.0.0.1:3000', hostPort(stack.upstream.url))
    .replace(/^app\.example\.com \{/m, 'http://:0 {\n\tbind 127.0.0.1')
}

requireCaddy()
const page = recipe(PAGE, 'caddyfile')
const stack = await startStack(t, {
  upstreams: [
    { name: 'admin', match: { pathPrefix: '/admin' }, allow: { groups: ['nobody'] } },
    { name: 'app', publicPaths: ['/public/**'] },
  ],
  config: { provider: { scopes: ['openid', 'profile', 'groups'] } },
})
const caddy: Caddy = await startCaddy(t, sites(page, stack))
// The sign-in may return to Caddy's host, known only now.
stack.replicas[0]?.rewrite((c) => ({ ...c, redirects: { allowedHosts: [`127.0.0.1:${caddy.port}`] } }))
if (!(await stack.live.reload('SIGHUP'))) throw new Error('the gateway did not reload')

/** The identity and override headers the application received with the last request. */
function lastAtApp(): Record<string, string | string[] | undefined> {
  const last = stack.upstream.requests.at(-1)
  if (last === undefined) throw new Error('nothing reached the application')
  return Object.fromEntries(Object.entries(last.headers).filter(([name]) => IDENTITY.includes(name) || REQUEST_OVERRIDE_HEADER_NAMES.includes(name)))
}

t.test('an anonymous request to a public path reaches the application with no identity header', async (t) => {
  const before = stack.upstream.requests.length
  t.equal((await rawRequest(caddy.url, '/public/logo.png')).status, 200)
  t.equal(stack.upstream.requests.length, before + 1)
  t.same(lastAtApp(), {}, 'no header, and no placeholder text')

  t.equal((await rawRequest(caddy.url, '/public/logo.png', { headers: FORGED })).status, 200)
  t.same(lastAtApp(), {}, "nor the client's own copies")

  const before2 = stack.upstream.requests.length
  const named = await rawRequest(caddy.url, '/public/logo.png', { headers: { 'x-original-method': 'GET', 'x-original-url': `${caddy.url}/admin` } })
  t.equal(named.status, 400, 'a client naming another request is refused')
  t.equal(stack.upstream.requests.length, before2)
})

t.test('signed in without email: the application gets the user and no email header', async (t) => {
  const browser = await stack.signedIn('alice')
  const res = await browser.fetch(`${caddy.url}/page`, { headers: FORGED })
  t.equal(res.status, 200)
  const headers = lastAtApp()
  t.equal(headers['x-auth-request-user'], 'alice')
  t.equal(headers['x-auth-request-groups'], 'admins,staff')
  t.equal(headers['x-auth-request-email'], undefined, 'no email header, and no placeholder text')
  for (const [name, value] of Object.entries(headers)) t.notMatch(String(value), /^\{|mallory|DELETE/, `${name}: ${String(value)}`)
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
  t.equal(lastAtApp()['x-auth-request-user'], 'bob')

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

t.test("without the recipe's placeholder lines, Caddy 2.6 hands the application placeholder text", async (t) => {
  const bare = await startCaddy(t, sites(page.replace(/^\s*(@placeholder_\w+ header_regexp|request_header @placeholder_).*\n/gm, ''), stack))
  await rawRequest(bare.url, '/public/logo.png')
  t.equal(lastAtApp()['x-auth-request-user'], '{http.reverse_proxy.header.X-Auth-Request-User}')
})
