import t from 'tap'
import { REQUEST_OVERRIDE_HEADER_NAMES } from '#src/upstream/header-policy'
import { checkRequest, serveGatewayGrpc } from '../fixtures/ext-authz-grpc.ts'
import { checkRequestFor, DEFAULT_IDENTITY_HEADERS, sendCheck, startEnvoy } from '../fixtures/envoy.ts'
import { rawRequest } from '../fixtures/http.ts'
import { gatewayCookies, startStack } from '../fixtures/stack.ts'

// The request-target and method overrides the proxy strips (header-policy.ts) must not reach an
// upstream through a check either: `GET /public/logo.png` with `X-Original-URL: /admin/secret` is
// allowed, and an application that honours the header (IIS URL Rewrite, old Symfony, Zend, Drupal)
// would serve /admin/secret; an anonymous preflight with `X-HTTP-Method-Override: DELETE` would
// become a DELETE. Every allow names them for removal: Envoy's x-envoy-auth-headers-to-remove over
// HTTP, headers_to_remove over gRPC.

const APP = 'app.example.com'
const UPSTREAMS = [
  { name: 'app', match: { pathPrefix: '/', hosts: [APP] }, publicPaths: ['/public/**'] },
  { name: 'cors', match: { pathPrefix: '/cors', hosts: [APP] }, allowPreflight: true },
]
/** A value for each override, as a client would send it. */
const OVERRIDES: Record<string, string> = Object.fromEntries(
  REQUEST_OVERRIDE_HEADER_NAMES.map((name) => [name, name.endsWith('method') || name.includes('method-override') ? 'DELETE' : '/admin/secret']),
)

t.test('every allow names the request-target and method overrides for removal', async (t) => {
  const stack = await startStack(t, { config: { redirects: { allowedHosts: [APP] } }, upstreams: UPSTREAMS })
  const alice = await gatewayCookies(stack, 'alice')
  const credentials: Array<Record<string, string>> = [{}, { cookie: alice }]

  t.test('the list is the one the proxy strips', async (t) => {
    t.ok(REQUEST_OVERRIDE_HEADER_NAMES.length >= 10)
    for (const name of ['x-original-url', 'x-rewrite-url', 'x-http-method-override', 'x-http-method', 'x-method-override', 'x-original-method']) {
      t.ok(REQUEST_OVERRIDE_HEADER_NAMES.includes(name), name)
    }
    const before = stack.upstream.requests.length
    t.equal((await rawRequest(stack.gw, '/public/logo.png', { headers: { host: APP, ...OVERRIDES } })).status, 200)
    const proxied = stack.upstream.requests[before]?.headers ?? {}
    for (const name of REQUEST_OVERRIDE_HEADER_NAMES) t.equal(proxied[name], undefined, `the proxy strips ${name}`)
  })

  t.test('HTTP: x-envoy-auth-headers-to-remove names each one, anonymous or signed in', async (t) => {
    for (const headers of credentials) {
      const res = await sendCheck(stack.gw, checkRequestFor({ method: 'GET', path: '/public/logo.png', headers: { host: APP, ...headers } }))
      t.equal(res.status, 200)
      const removed = String(res.headers['x-envoy-auth-headers-to-remove']).split(',')
      for (const name of REQUEST_OVERRIDE_HEADER_NAMES) t.ok(removed.includes(name), name)
    }
  })

  t.test('gRPC: headers_to_remove names each one', async (t) => {
    const client = await serveGatewayGrpc(t, stack)
    for (const headers of credentials) {
      const res = await client.check(
        checkRequest({ method: 'GET', host: APP, path: '/public/logo.png', scheme: 'https', headers: { ':authority': APP, ...headers, ...OVERRIDES } }),
      )
      t.equal(res.status?.code, 0)
      const removed = res.ok_response?.headers_to_remove ?? []
      for (const name of REQUEST_OVERRIDE_HEADER_NAMES) t.ok(removed.includes(name), name)
      t.notOk(
        res.ok_response?.headers.some((h) => REQUEST_OVERRIDE_HEADER_NAMES.includes(h.header.key.toLowerCase())),
        'none is set',
      )
    }
  })

  t.test('through Envoy: the application receives none of them', async (t) => {
    const envoy = await startEnvoy({
      gateway: stack.gw,
      upstream: stack.upstream.url,
      headersToBackend: [...DEFAULT_IDENTITY_HEADERS, 'cookie'],
      headersToExtAuth: ['cookie', 'accept', 'origin', 'access-control-request-method'],
    })
    t.teardown(() => envoy.close())
    const cases: Array<{ method: string; path: string; headers: Record<string, string> }> = [
      { method: 'GET', path: '/public/logo.png', headers: {} },
      { method: 'GET', path: '/page', headers: { cookie: alice } },
      // An anonymous preflight, allowed by allowPreflight.
      { method: 'OPTIONS', path: '/cors/api', headers: { 'access-control-request-method': 'GET', origin: 'https://other.example' } },
    ]
    for (const { method, path, headers } of cases) {
      const before = stack.upstream.requests.length
      const res = await rawRequest(envoy.url, path, { method, headers: { host: APP, ...headers, ...OVERRIDES } })
      t.equal(envoy.checks.at(-1), 200, `${method} ${path} allowed`)
      t.equal(res.status, 200)
      const received = stack.upstream.requests[before]
      t.equal(received?.method, method, 'the method checked')
      t.equal(received?.url, path, 'the path checked')
      for (const name of REQUEST_OVERRIDE_HEADER_NAMES) t.equal(received?.headers[name], undefined, `${method} ${path}: no ${name}`)
    }
  })
})
