import t from 'tap'
import { recipe } from '../fixtures/markdown.ts'
import { requireNginx, startNginx, type Nginx } from '../fixtures/nginx.ts'
import { reservePort, startStack, type Stack } from '../fixtures/stack.ts'
import { rawRequest } from '../fixtures/http.ts'
import { AUTH_REQUEST_HEADERS, REQUEST_OVERRIDE_HEADER_NAMES } from '#src/upstream/header-policy'

// docs/deploy/nginx.md's auth_request recipe, run as the page shows it by a real nginx 1.22 in
// front of the gateway and the oidc-provider stack, and the limits the page states, measured.

const PAGE = 'docs/deploy/nginx.md'
const IDENTITY = Object.values(AUTH_REQUEST_HEADERS).map((n) => n.toLowerCase())
/** What a client sends to try to pass as someone, or to have another path or method served. */
const FORGED = Object.fromEntries(
  [...IDENTITY, ...REQUEST_OVERRIDE_HEADER_NAMES].map((n) => [
    n,
    n.includes('method') ? 'DELETE' : n.includes('ur') || n.includes('path') ? '/admin' : 'mallory',
  ]),
)

/** The page's configuration with its example addresses replaced by the test's. */
function servers(page: string, stack: Stack): string {
  const hostPort = (url: string): string => new URL(url).host
  return page
    .replaceAll('https://auth.example.com', stack.gw)
    .replaceAll('127.0.0.1:8080', hostPort(stack.gw))
    .replaceAll('127.0.0.1:3000', hostPort(stack.upstream.url))
    .replaceAll('app.example.com', '127.0.0.1')
}

requireNginx()
const page = recipe(PAGE, 'nginx')
const reserved = await reservePort()
const stack = await startStack(t, {
  upstreams: [
    { name: 'admin', match: { pathPrefix: '/admin' }, allow: { groups: ['admins'] } },
    { name: 'app', publicPaths: ['/public/**'] },
  ],
  config: { redirects: { allowedHosts: [`127.0.0.1:${reserved.port}`] } },
})
const nginx: Nginx = await startNginx(t, servers(page, stack), reserved)
// The same recipe without its error_page line: what clients get from nginx itself.
const bare = await startNginx(t, servers(page.replace(/^\s*error_page 401 = @sign_in;\n/m, ''), stack))

/** The headers the application received with the last request. */
function lastAtApp(): Record<string, string | string[] | undefined> {
  const last = stack.upstream.requests.at(-1)
  if (last === undefined) throw new Error('nothing reached the application')
  return last.headers
}

t.test('the page shows the recipe the tests run', async (t) => {
  t.match(page, /auth_request \/_openid_gateway_auth;/)
  t.match(page, /error_page 401 = @sign_in;/)
})

t.test('a public path reaches the application without any identity, whatever the client sent', async (t) => {
  const before = stack.upstream.requests.length
  const res = await rawRequest(nginx.url, '/public/logo.png', { headers: FORGED })
  t.equal(res.status, 200)
  t.equal(stack.upstream.requests.length, before + 1)
  const headers = lastAtApp()
  for (const name of [...IDENTITY, ...REQUEST_OVERRIDE_HEADER_NAMES]) t.equal(headers[name], undefined, `${name} does not reach the application`)
})

t.test('not signed in: nginx sends the browser to sign in, and a query comes back with its first parameter only', async (t) => {
  const browser = stack.browser()
  const res = await browser.fetch(`${nginx.url}/x?a=1&b=2`, { navigate: true })
  t.equal(res.status, 302)
  const location = res.headers.get('location') ?? ''
  // $request_uri unescaped: `&b=2` is a parameter of the sign-in URL, not of redirectAfter.
  t.equal(location, `${stack.gw}/api/v1/openid/redirect?redirectAfter=${nginx.url}/x?a=1&b=2`)
  const callback = await browser.signIn(location, 'alice')
  t.equal(callback.status, 302)
  t.equal(callback.headers.get('location'), `${nginx.url}/x?a=1`, 'the measured limit: b=2 is lost')
  const { response } = await browser.follow(`${nginx.url}/x?a=1`)
  t.equal(response.status, 200)
  const headers = lastAtApp()
  t.equal(stack.upstream.requests.at(-1)?.url, '/x?a=1')
  t.equal(headers['x-auth-request-user'], 'alice')
  t.equal(headers['x-auth-request-email'], 'alice@example.com')
  t.equal(headers['x-auth-request-groups'], 'admins,staff')
  // A claim the sign-in does not carry (no acr without acr_values): no header, not an empty one.
  t.equal(headers['x-auth-request-acr'], undefined)
  t.equal(headers['x-auth-request-amr'], undefined)
})

t.test('signed in: a client cannot pass as another user or have another path served', async (t) => {
  const browser = await stack.signedIn('bob')
  const res = await browser.fetch(`${nginx.url}/page`, { headers: FORGED })
  t.equal(res.status, 200)
  const headers = lastAtApp()
  t.equal(headers['x-auth-request-user'], 'bob')
  t.equal(headers['x-auth-request-acr'], undefined, 'the forged copy of an identity the answer lacks is removed')
  for (const name of REQUEST_OVERRIDE_HEADER_NAMES) t.equal(headers[name], undefined, `${name} does not reach the application`)
})

t.test("a refusal is nginx's own HTML page, never the gateway's answer", async (t) => {
  const bob = await stack.signedIn('bob')
  const forbidden = await bob.fetch(`${nginx.url}/admin/x`)
  t.equal(forbidden.status, 403)
  t.match(forbidden.headers.get('content-type'), /^text\/html/)
  t.match(await forbidden.text(), /403 Forbidden.*nginx/s)

  const anonymous = await rawRequest(bare.url, '/x', { headers: { accept: 'application/json' } })
  t.equal(anonymous.status, 401, 'without error_page 401 the client gets the 401')
  t.match(anonymous.headers['content-type'], /^text\/html/)
  t.match(anonymous.body, /401 Authorization Required/)
  t.notMatch(anonymous.body, /signInUrl/, 'not the problem+json with signInUrl')
  t.match(anonymous.headers['www-authenticate'], /^Bearer/, "the check's WWW-Authenticate is kept")

  const before = stack.upstream.requests.length
  const unnormal = await rawRequest(nginx.url, '/admin//../users', { headers: { cookie: bob.cookieHeader(`${stack.gw}/`) } })
  t.equal(unnormal.status, 500, "the check's 400 for a path out of normal form is nginx's 500")
  t.match(unnormal.body, /500 Internal Server Error/)
  t.equal(stack.upstream.requests.length, before, 'nothing reached the application')
})

t.test('a Host nginx does not serve is refused before any check', async (t) => {
  await t.rejects(rawRequest(nginx.url, '/public/x', { headers: { host: 'elsewhere.example' } }), 'nginx closes the connection (444)')
})
