import t, { type Test } from 'tap'
import type { Clock } from '#src/lib/clock'
import { manualClock } from '../fixtures/clock.ts'
import { checkRequest, serveGatewayGrpc, type DecodedCheckResponse, type ExtAuthzClient } from '../fixtures/ext-authz-grpc.ts'
import { checkRequestFor, sendCheck } from '../fixtures/envoy.ts'
import { eventually } from '../fixtures/poll.ts'
import { gatewayCookies, startStack, type Stack } from '../fixtures/stack.ts'
import { AUTH_REQUEST_ACCESS_TOKEN, AUTH_REQUEST_HEADERS, REQUEST_OVERRIDE_HEADER_NAMES } from '#src/upstream/header-policy'

// Envoy's gRPC ext_authz (envoy.service.auth.v3.Authorization/Check) against the whole gateway:
// a real @grpc/grpc-js client, the service wired to the running app as the CLI wires it
// (runtime/envoy-grpc-listener.ts), a real oidc-provider.

const APP = 'app.example.com'
/** The configuration's identity names no answer here sets: forward-auth's and the assertion header. */
const OTHER_IDENTITY = [...Object.values(AUTH_REQUEST_HEADERS).map((name) => name.toLowerCase()), AUTH_REQUEST_ACCESS_TOKEN, 'x-identity-assertion']
const UPSTREAMS = [
  { name: 'app', match: { pathPrefix: '/', hosts: [APP] } },
  { name: 'admin', match: { pathPrefix: '/admin', hosts: [APP] }, allow: { groups: ['admins'] } },
  { name: 'open', match: { pathPrefix: '/', hosts: ['open.example.com'] }, auth: 'none' },
]

async function grpcStack(t: Test, provider: { accessTokenTtlSeconds?: number } = {}, clock?: Clock): Promise<{ stack: Stack; client: ExtAuthzClient }> {
  const stack = await startStack(t, {
    config: { redirects: { allowedHosts: [APP] } },
    upstreams: UPSTREAMS,
    provider,
    ...(clock === undefined ? {} : { clock }),
  })
  return { stack, client: await serveGatewayGrpc(t, stack) }
}

function http(path: string, headers: Record<string, string> = {}, host = APP, method = 'GET') {
  return { method, host, path, scheme: 'https', headers: { ':authority': host, ':method': method, ':path': path, ...headers } }
}

function headerOf(options: Array<{ header: { key: string; value: string } }> | undefined, key: string): string[] {
  return (options ?? []).filter((o) => o.header.key === key).map((o) => o.header.value)
}

function denied(res: DecodedCheckResponse): { status: number; headers: Record<string, string>; body: string } {
  const d = res.denied_response
  return { status: d?.status?.code ?? 0, headers: Object.fromEntries((d?.headers ?? []).map((o) => [o.header.key, o.header.value])), body: d?.body ?? '' }
}

t.test('gRPC Check against the gateway', async (t) => {
  const { stack, client } = await grpcStack(t)
  const alice = await gatewayCookies(stack, 'alice')
  const bob = await gatewayCookies(stack, 'bob')

  t.test('signed in: OK with the identity headers to set, the others to remove, the gateway cookies kept from the upstream', async (t) => {
    const res = await client.check(checkRequest(http('/page?x=1', { cookie: `${alice}; app=1`, 'x-forwarded-user': 'forged' })))
    t.equal(res.status?.code, 0)
    t.equal(res.http_response, 'ok_response')
    const ok = res.ok_response
    t.same(headerOf(ok?.headers, 'x-forwarded-user'), ['alice'])
    t.same(headerOf(ok?.headers, 'x-forwarded-groups'), ['admins,staff'])
    t.same(headerOf(ok?.headers, 'cookie'), ['app=1'])
    t.same(
      [...(ok?.headers_to_remove ?? [])].sort(),
      ['x-forwarded-acr', 'x-forwarded-amr', 'x-forwarded-auth-time', ...OTHER_IDENTITY, ...REQUEST_OVERRIDE_HEADER_NAMES].sort(),
      "every identity header the session fills is set; the step-up ones it has no claim for are removed, and so are the configuration's other identity names and the request overrides",
    )
    const anonymous = await client.check(checkRequest(http('/x', {}, 'open.example.com')))
    t.equal(anonymous.status?.code, 0)
    t.same(
      [...(anonymous.ok_response?.headers_to_remove ?? [])].sort(),
      [
        'x-forwarded-acr',
        'x-forwarded-amr',
        'x-forwarded-auth-time',
        'x-forwarded-email',
        'x-forwarded-groups',
        'x-forwarded-issuer',
        'x-forwarded-preferred-username',
        'x-forwarded-user',
        ...OTHER_IDENTITY,
        ...REQUEST_OVERRIDE_HEADER_NAMES,
      ].sort(),
    )
  })

  t.test('not signed in: UNAUTHENTICATED, 401 for programs and 302 to sign in for a navigation', async (t) => {
    const program = await client.check(checkRequest(http('/page', { accept: 'application/json' })))
    t.equal(program.status?.code, 16)
    t.equal(denied(program).status, 401)
    t.equal(
      denied(program).headers['www-authenticate'],
      'Bearer resource_metadata="http://app.example.com/.well-known/oauth-protected-resource"',
      'RFC 9728 5.1, on the host asked',
    )
    t.equal((JSON.parse(denied(program).body) as { code: string }).code, 'unauthenticated')
    const page = await client.check(checkRequest(http('/page?x=1', { accept: 'text/html', 'sec-fetch-mode': 'navigate' })))
    t.equal(page.status?.code, 16)
    t.equal(denied(page).status, 302)
    t.equal(denied(page).headers.location, `${stack.gw}/api/v1/openid/redirect?redirectAfter=${encodeURIComponent('https://app.example.com/page?x=1')}`)
  })

  t.test('refused by the allow rules: PERMISSION_DENIED, 403', async (t) => {
    const res = await client.check(checkRequest(http('/admin/x', { cookie: bob })))
    t.equal(res.status?.code, 7)
    t.equal(denied(res).status, 403)
    t.equal((await client.check(checkRequest(http('/admin/x', { cookie: alice })))).status?.code, 0)
  })

  t.test('context_extensions.upstream selects the rules; an unknown name is refused, never matched to another upstream', async (t) => {
    const named = await client.check(checkRequest(http('/page', { cookie: bob }), { upstream: 'admin' }))
    t.equal(named.status?.code, 7, "the admin upstream's rules apply to a path the host and path would give to app")
    t.equal(denied(named).status, 403)
    const open = await client.check(checkRequest(http('/page', {}), { upstream: 'open' }))
    t.equal(open.status?.code, 0, 'auth: none of the named upstream')
    for (const upstream of ['nope', '', 'ADMIN']) {
      const unknown = await client.check(checkRequest(http('/page', { cookie: alice }), { upstream }))
      t.equal(unknown.status?.code, 7, `unknown ${JSON.stringify(upstream)}: refused`)
      t.equal(denied(unknown).status, 403)
    }
  })

  t.test('the request comes from attributes.request.http alone: spoofed X-Forwarded-* and X-Original-* change nothing', async (t) => {
    const res = await client.check(
      checkRequest(
        http('/admin/x', { cookie: bob, 'x-forwarded-uri': '/public', 'x-forwarded-host': 'open.example.com', 'x-original-url': 'https://open.example.com/' }),
      ),
    )
    t.equal(res.status?.code, 7)
  })

  t.test('the host is read in its canonical form, as over HTTP', async (t) => {
    const res = await client.check(checkRequest(http('/admin/x', { cookie: bob }, 'APP.Example.COM')))
    t.equal(res.status?.code, 7, "the admin upstream's rules apply whatever the host's case")
    t.equal((await client.check(checkRequest(http('/admin/x', { cookie: alice }, 'APP.Example.COM')))).status?.code, 0)
  })

  t.test("the gateway's own paths are never allowed", async (t) => {
    for (const path of ['/api/v1/openid/callback', '/.well-known/jwks.json']) {
      const res = await client.check(checkRequest(http(path, { cookie: alice }, 'open.example.com')))
      t.not(res.status?.code, 0, path)
    }
  })

  t.test('a refusal is rendered as the HTTP check renders it: a page for a navigation, problem+json for a program', async (t) => {
    const browser = { cookie: bob, accept: 'text/html', 'sec-fetch-mode': 'navigate' }
    const page = denied(await client.check(checkRequest(http('/admin/x', browser))))
    t.equal(page.status, 403)
    t.match(page.body, /Signed in as <strong>bob<\/strong>/)
    const overHttp = await sendCheck(stack.gw, checkRequestFor({ method: 'GET', path: '/admin/x', headers: { host: APP, ...browser } }))
    t.equal(overHttp.status, 403)
    for (const name of ['content-type', 'content-security-policy', 'referrer-policy', 'x-frame-options', 'x-content-type-options', 'cache-control']) {
      t.equal(page.headers[name], overHttp.headers[name], `${name} as over HTTP`)
    }
    t.match(page.headers['content-security-policy'], /form-action /, "the page's own CSP")
    const programResponse = await client.check(checkRequest(http('/admin/x', { cookie: bob, accept: 'application/json' })))
    const names = (programResponse.denied_response?.headers ?? []).map((o) => o.header.key)
    t.strictSame(names, [...new Set(names)], 'each header once')
    const program = denied(programResponse)
    t.equal(program.headers['content-type'], 'application/problem+json; charset=utf-8')
    t.equal((JSON.parse(program.body) as { code: string }).code, 'forbidden')
  })

  t.test('a path that is not a request path is refused 400 (INVALID_ARGUMENT), never decided', async (t) => {
    for (const path of ['page', '/a/%2e%2e%2f..%2fb', '*']) {
      const res = await client.check(checkRequest(http(path, { cookie: alice })))
      t.equal(res.status?.code, 3, path)
      t.equal(denied(res).status, 400, path)
    }
  })

  t.test('a header cannot name the upstream: only context_extensions can', async (t) => {
    const res = await client.check(
      checkRequest(http('/page', { cookie: bob, 'x-openid-gateway-grpc-check': 'guess', 'x-openid-gateway-grpc-upstream': 'open' })),
    )
    t.equal(res.status?.code, 0, 'bob may use app')
    t.same(headerOf(res.ok_response?.headers, 'x-forwarded-user'), ['bob'], 'and is decided as app, not as the upstream the header names')
  })
})

t.test('gRPC: a refreshed session is OK with Set-Cookie for the client', async (t) => {
  const clock = manualClock()
  const { stack, client } = await grpcStack(t, { accessTokenTtlSeconds: 2 }, clock)
  const cookie = await gatewayCookies(stack, 'alice')
  // Past the access token's expiry, on the gateway's clock.
  clock.advance(2300)
  const res = await client.check(checkRequest(http('/page', { cookie })))
  t.equal(res.status?.code, 0)
  t.ok(
    headerOf(res.ok_response?.response_headers_to_add, 'set-cookie').some((c) => c.startsWith('ogw=')),
    'the refreshed session cookie',
  )
})

t.test('gRPC: a provider that fails a needed refresh is UNAVAILABLE, 503', async (t) => {
  const clock = manualClock()
  const { stack, client } = await grpcStack(t, { accessTokenTtlSeconds: 2 }, clock)
  const cookie = await gatewayCookies(stack, 'alice')
  await stack.provider!.close()
  clock.advance(2300)
  const res = await client.check(checkRequest(http('/page', { cookie })))
  t.equal(res.status?.code, 14)
  t.equal(denied(res).status, 503)
})

t.test('gRPC: with cookies.credentialsPath /api/v1/openid an expired session is renewed at the refresh endpoint', async (t) => {
  // The browser sends the credentials cookie to /api/v1/openid only, never with the request Envoy
  // asks about: a page load goes to the refresh endpoint, which reads it, as on the proxy.
  const clock = manualClock()
  const stack = await startStack(t, {
    clock,
    config: { redirects: { allowedHosts: [APP] }, cookies: { credentialsPath: '/api/v1/openid' } },
    upstreams: UPSTREAMS,
    provider: { accessTokenTtlSeconds: 2 },
  })
  const client = await serveGatewayGrpc(t, stack)
  const cookie = await gatewayCookies(stack, 'alice')
  t.equal((await client.check(checkRequest(http('/page', { cookie })))).status?.code, 0)
  // Past the access token's expiry, on the gateway's clock.
  clock.advance(2300)
  const page = denied(await client.check(checkRequest(http('/page', { cookie, accept: 'text/html' }))))
  t.equal(page.status, 302)
  t.equal(page.headers.location, `${stack.gw}/api/v1/openid/refresh?redirectAfter=${encodeURIComponent('https://app.example.com/page')}`)
  const program = denied(await client.check(checkRequest(http('/page', { cookie, accept: 'application/json' }))))
  t.equal(program.status, 401)
  t.equal(program.headers['www-authenticate'], 'Bearer error="invalid_token", resource_metadata="http://app.example.com/.well-known/oauth-protected-resource"')
})

t.test('gRPC: each check writes one request line, without the credentials, and counts in the request metrics', async (t) => {
  const lines: string[] = []
  const stack = await startStack(t, {
    config: { redirects: { allowedHosts: [APP] }, log: { level: 'info' } },
    upstreams: UPSTREAMS,
    logStream: { write: (line) => void lines.push(line) },
  })
  const client = await serveGatewayGrpc(t, stack)
  const cookie = await gatewayCookies(stack, 'alice')
  const requests = async (): Promise<number> => {
    const metrics = await stack.app.management.metrics.getSingleMetricAsString('openid_gateway_requests_total')
    return [...metrics.matchAll(/^openid_gateway_requests_total\{[^}]*route="_gateway"[^}]*\} (\d+)$/gm)].reduce((n, m) => n + Number(m[1]), 0)
  }
  const before = await requests()
  t.equal((await client.check(checkRequest(http('/page?token=secret', { cookie, authorization: 'Bearer not-logged' })))).status?.code, 0)
  t.equal(await requests(), before + 1)
  const logged = lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.grpc === 'Authorization/Check')
  t.equal(logged.length, 1)
  t.match(logged[0], { msg: 'request', status: 200, sub: 'alice', extAuthz: { method: 'GET', upstream: 'app', outcome: 'pass' } })
  const text = lines.join('\n')
  t.notOk(text.includes(cookie.split('=')[1] ?? cookie), 'no cookie value')
  t.notOk(text.includes('not-logged'), 'no Authorization')
  t.notOk(text.includes('token=secret'), 'the query redacted')
  // Envoy's two transports run one pipeline (checks/pipeline.ts): the same request checked over HTTP
  // writes the same line (the request's id, URL and address in place of the gRPC method) and counts
  // under the same route.
  const overHttp = await sendCheck(
    stack.gw,
    checkRequestFor({
      method: 'GET',
      path: '/page?token=secret',
      headers: { host: APP, cookie, authorization: 'Bearer not-logged', 'x-forwarded-proto': 'https' },
    }),
  )
  t.equal(overHttp.status, 200)
  const httpLine = await eventually("the HTTP check's request line", () =>
    lines
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .find((line) => line.msg === 'request' && String(line.url).startsWith('/api/v1/openid/ext-authz/')),
  )
  const grpcLine = logged[0] ?? {}
  t.strictSame(
    Object.keys(httpLine).filter((key) => !['reqId', 'url', 'ip'].includes(key)),
    Object.keys(grpcLine).filter((key) => key !== 'grpc'),
    'the same fields, in the same order',
  )
  t.strictSame(
    { status: httpLine.status, sub: httpLine.sub, extAuthz: httpLine.extAuthz },
    { status: grpcLine.status, sub: grpcLine.sub, extAuthz: grpcLine.extAuthz },
    'the same status, subject and check fields',
  )
  t.equal(await requests(), before + 2, 'both counted under route _gateway')
})

t.test('a reload applies to the next gRPC check: each call asks the app running at that moment', async (t) => {
  const { stack, client } = await grpcStack(t)
  const anonymous = async (): Promise<number> => (await client.check(checkRequest(http('/page', { accept: 'application/json' })))).status?.code ?? -1
  t.equal(await anonymous(), 16, 'app needs a session: UNAUTHENTICATED')
  stack.replicas[0]?.rewrite((config) => ({
    ...config,
    upstreams: (config.upstreams as Array<Record<string, unknown>>).map((u) => (u.name === 'app' ? { ...u, auth: 'none' } : u)),
  }))
  t.equal(await stack.live.reload('SIGHUP'), true, 'reloaded: app is public now')
  t.equal(await anonymous(), 0, 'the very next check is OK, on the same listener')
})
