import t from 'tap'
import type { Problem } from '#src/contract/errors'
import { checkRequest, serveGatewayGrpc } from '../fixtures/ext-authz-grpc.ts'
import { DEFAULT_IDENTITY_HEADERS, envoyNormalizedPath, startEnvoy } from '../fixtures/envoy.ts'
import { rawRequest } from '../fixtures/http.ts'
import { gatewayCookies, startStack } from '../fixtures/stack.ts'

// Every check dialect decides only on the path the upstream will receive. The ingress forwards the
// client's spelling (Envoy with normalize_path unset, its default; ingress-nginx, whose
// X-Original-URL and proxy_pass carry the raw $request_uri), and the application resolves it its own
// way: RFC 3986 5.2.4 keeps the empty segment of `/admin//../users` for the `..` to remove, so the
// application serves `/admin/users` where merging slashes first reads `/users`, and a prefix router
// that resolves nothing routes `/admin/../users` to `/admin`. So a target out of normal form is
// refused (400), in every dialect, never decided for the path it normalizes to.

const APP = 'app.example.com'
const UPSTREAMS = [
  { name: 'app', match: { pathPrefix: '/', hosts: [APP] }, rules: [{ path: '/admin', allow: { groups: ['admins'] } }] },
  { name: 'docs', match: { pathPrefix: '/docs', hosts: [APP] }, auth: 'none' },
]

/** Targets a normalizer would rewrite; each one's normal form passes for its caller (checked below). */
const REWRITTEN: Array<{ target: string; who: 'bob' | 'anonymous'; normal: string }> = [
  // bob is not in admins: the rule refuses him /admin/users, the normal form gives him /users.
  { target: '/admin//../users', who: 'bob', normal: '/users' },
  { target: '/admin/../users', who: 'bob', normal: '/users' },
  { target: '/admin/%2e%2e/users', who: 'bob', normal: '/users' },
  { target: '/admin/%2E%2E/users', who: 'bob', normal: '/users' },
  // Anonymous, beside the auth: none sibling: /admin/secret/docs to the application, /docs to a normalizer.
  { target: '/admin/secret//..//../docs', who: 'anonymous', normal: '/docs' },
  { target: '/admin/secret/%2e%2e/%2e%2e/docs', who: 'anonymous', normal: '/docs' },
  { target: '//docs/x', who: 'anonymous', normal: '/docs/x' },
  { target: '/docs//x', who: 'anonymous', normal: '/docs/x' },
  { target: '/docs/./x', who: 'anonymous', normal: '/docs/x' },
  { target: '/%64ocs/x', who: 'anonymous', normal: '/docs/x' },
]

t.test('every check dialect refuses a target out of normal form with 400, and decides its normal form', async (t) => {
  const stack = await startStack(t, { config: { redirects: { allowedHosts: [APP] } }, upstreams: UPSTREAMS })
  const bob = await gatewayCookies(stack, 'bob')
  const cookieOf = (who: 'bob' | 'anonymous'): Record<string, string> => (who === 'bob' ? { cookie: bob } : {})

  t.test('ext_authz over HTTP, through Envoy (normalize_path unset): 400 to the client, nothing reaches the application', async (t) => {
    const envoy = await startEnvoy({ gateway: stack.gw, upstream: stack.upstream.url, headersToBackend: [...DEFAULT_IDENTITY_HEADERS, 'cookie'] })
    t.teardown(() => envoy.close())
    for (const { target, who, normal } of REWRITTEN) {
      const control = await rawRequest(envoy.url, normal, { headers: { host: APP, ...cookieOf(who) } })
      t.equal(control.status, 200, `${normal} passes for ${who}`)
      const before = stack.upstream.requests.length
      const res = await rawRequest(envoy.url, target, { headers: { host: APP, ...cookieOf(who) } })
      t.equal(res.status, 400, `${target} (${who})`)
      t.equal(res.json<Problem>().code, 'bad_request')
      t.equal(envoy.checks.at(-1), 400, 'the check answered 400')
      t.equal(stack.upstream.requests.length, before, 'the application received nothing')
    }
    const refused = await rawRequest(envoy.url, '/admin/users', { headers: { host: APP, cookie: bob } })
    t.equal(refused.status, 403, 'the rule refuses bob its normal form')
  })

  t.test(
    'behind an Envoy that normalizes first (normalize_path, merge_slashes): the check is asked the path the application gets, and decides it',
    async (t) => {
      const envoy = await startEnvoy({
        gateway: stack.gw,
        upstream: stack.upstream.url,
        headersToBackend: [...DEFAULT_IDENTITY_HEADERS, 'cookie'],
        normalizePath: true,
      })
      t.teardown(() => envoy.close())
      // What Envoy forwards, and the answer the gateway gives that path when asked directly.
      const expected: Array<[string, 'bob' | 'anonymous', string, number]> = [
        ['/admin//../users', 'bob', '/admin/users', 403],
        ['/admin/../users', 'bob', '/users', 200],
        ['/admin/%2e%2e/users', 'bob', '/users', 200],
        ['/admin/secret//..//../docs', 'anonymous', '/admin/secret/docs', 401],
        ['/admin/secret/%2e%2e/%2e%2e/docs', 'anonymous', '/docs', 200],
        ['//docs/x', 'anonymous', '/docs/x', 200],
        ['/docs/./x', 'anonymous', '/docs/x', 200],
      ]
      for (const [target, who, forwarded, status] of expected) {
        t.equal(envoyNormalizedPath(target), forwarded, `Envoy forwards ${target} as ${forwarded}`)
        const before = stack.upstream.requests.length
        const res = await rawRequest(envoy.url, target, { headers: { host: APP, accept: 'application/json', ...cookieOf(who) } })
        t.equal(res.status, status, `${target} (${who}) is decided as ${forwarded}`)
        if (status === 200) t.equal(stack.upstream.requests[before]?.url, forwarded, 'the application gets the path decided')
        else t.equal(stack.upstream.requests.length, before, 'refused: nothing forwarded')
      }
    },
  )

  t.test('ext_authz over gRPC: INVALID_ARGUMENT with a 400 problem+json', async (t) => {
    const client = await serveGatewayGrpc(t, stack)
    const http = (path: string, who: 'bob' | 'anonymous') => ({
      method: 'GET',
      host: APP,
      path,
      scheme: 'https',
      headers: { ':authority': APP, ':method': 'GET', ':path': path, ...cookieOf(who) },
    })
    for (const { target, who, normal } of REWRITTEN) {
      t.equal((await client.check(checkRequest(http(normal, who)))).status?.code, 0, `${normal} passes for ${who}`)
      const res = await client.check(checkRequest(http(target, who)))
      t.equal(res.status?.code, 3, `${target} (${who})`)
      t.equal(res.denied_response?.status?.code, 400)
      t.equal((JSON.parse(res.denied_response?.body ?? '{}') as Problem).code, 'bad_request')
    }
  })

  t.test('forward-auth for ingress-nginx (X-Original-URL): 400', async (t) => {
    for (const { target, who, normal } of REWRITTEN) {
      const ask = (path: string) =>
        rawRequest(stack.gw, '/api/v1/openid/auth', { headers: { 'x-original-method': 'GET', 'x-original-url': `https://${APP}${path}`, ...cookieOf(who) } })
      t.equal((await ask(normal)).status, 200, `${normal} passes for ${who}`)
      const res = await ask(target)
      t.equal(res.status, 400, `${target} (${who})`)
      t.equal(res.json<Problem>().code, 'bad_request')
    }
  })

  t.test('forward-auth for Traefik (X-Forwarded-Uri): 400', async (t) => {
    for (const { target, who, normal } of REWRITTEN) {
      const ask = (path: string) =>
        rawRequest(stack.gw, '/api/v1/openid/auth', {
          headers: { 'x-forwarded-method': 'GET', 'x-forwarded-host': APP, 'x-forwarded-proto': 'https', 'x-forwarded-uri': path, ...cookieOf(who) },
        })
      t.equal((await ask(normal)).status, 200, `${normal} passes for ${who}`)
      const res = await ask(target)
      t.equal(res.status, 400, `${target} (${who})`)
      t.equal(res.json<Problem>().code, 'bad_request')
    }
  })

  t.test('the proxy is unaffected: it normalizes and forwards the path it decided on', async (t) => {
    const before = stack.upstream.requests.length
    const res = await rawRequest(stack.gw, '/admin//../users', { headers: { host: APP, cookie: bob } })
    t.equal(res.status, 200)
    t.equal(stack.upstream.requests.at(-1)?.url, '/users', 'the upstream receives the path that was decided')
    t.equal(stack.upstream.requests.length, before + 1)
    t.equal((await rawRequest(stack.gw, '/docs/../admin/users', { headers: { host: APP, cookie: bob } })).status, 403)
  })
})
