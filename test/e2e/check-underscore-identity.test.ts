import t from 'tap'
import { checkRequest, serveGatewayGrpc } from '../fixtures/ext-authz-grpc.ts'
import { HEADERS_TO_EXT_AUTHZ, startEnvoy } from '../fixtures/envoy.ts'
import { rawRequest } from '../fixtures/http.ts'
import { gatewayCookies, startStack } from '../fixtures/stack.ts'

// `X_Forwarded_User: admin` is X-Forwarded-User to a CGI-style upstream (RFC 3875 4.1.18: Rack,
// WSGI, PHP read both as HTTP_X_FORWARDED_USER), but Envoy removes the exact names an allow
// gives it, and `_` is not `-` to Envoy. Every allow names each header the check received whose
// folded name (case, `_` and `-`) is an identity header, in the spelling it arrived with.

const UPSTREAMS = [{ name: 'app', publicPaths: ['/public/**'] }]
const FORGED = { X_Forwarded_User: 'admin', X_Forwarded_Groups: 'admins', 'X_Forwarded-Email': 'admin@example.com' }
const RECEIVED = Object.keys(FORGED).map((name) => name.toLowerCase())

t.test('check allows remove identity headers spelled with underscores', async (t) => {
  const stack = await startStack(t, { upstreams: UPSTREAMS })
  const alice = await gatewayCookies(stack, 'alice')
  const host = new URL(stack.gw).host
  const cases: Array<{ path: string; credentials: Record<string, string> }> = [
    { path: '/public/x', credentials: {} },
    { path: '/page', credentials: { cookie: alice } },
  ]

  t.test('gRPC: headers_to_remove names every received spelling', async (t) => {
    const client = await serveGatewayGrpc(t, stack)
    for (const { path, credentials } of cases) {
      const headers: Record<string, string> = { ':authority': host, ...credentials }
      for (const [name, value] of Object.entries(FORGED)) headers[name.toLowerCase()] = value
      const res = await client.check(checkRequest({ method: 'GET', host, path, scheme: 'http', headers }))
      t.equal(res.status?.code, 0, `${path} allowed`)
      for (const name of RECEIVED) t.ok(res.ok_response?.headers_to_remove.includes(name), `${path}: ${name}`)
    }
  })

  t.test('Envoy over HTTP, underscore names allow-listed to the check: the application receives none', async (t) => {
    const envoy = await startEnvoy({
      gateway: stack.gw,
      upstream: stack.upstream.url,
      headersToBackend: ['x-forwarded-user', 'x-forwarded-email', 'x-forwarded-groups', 'cookie'],
      headersToExtAuth: [...HEADERS_TO_EXT_AUTHZ, { contains: '_' }],
    })
    t.teardown(() => envoy.close())
    for (const { path, credentials } of cases) {
      const before = stack.upstream.requests.length
      const res = await rawRequest(envoy.url, path, { headers: { ...FORGED, ...credentials, accept: 'application/json' } })
      t.equal(envoy.checks.at(-1), 200)
      t.equal(res.status, 200)
      const received = stack.upstream.requests[before]?.headers ?? {}
      for (const name of RECEIVED) t.equal(received[name], undefined, `${path}: no ${name}`)
      t.equal(received['x-forwarded-groups'], credentials.cookie === undefined ? undefined : 'admins,staff', "the groups are the session's")
    }
  })
})
