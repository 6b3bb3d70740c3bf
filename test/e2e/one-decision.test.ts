import t, { type Test } from 'tap'
import { manualClock } from '../fixtures/clock.ts'
import { checkRequestFor, sendCheck } from '../fixtures/envoy.ts'
import { checkRequest, serveGatewayGrpc, type ExtAuthzClient } from '../fixtures/ext-authz-grpc.ts'
import { rawRequest } from '../fixtures/http.ts'
import { eventually } from '../fixtures/poll.ts'
import { CLIENT_ID, gatewayCookies, startStack, type Stack } from '../fixtures/stack.ts'

// One access decision, five renderings (contract: "Every check dialect ... and the proxy itself
// render one access decision"). Each case is asked of the reverse proxy, ingress-nginx's and
// Traefik's forward-auth, Envoy's HTTP ext_authz and Envoy's gRPC ext_authz, and every answer is
// read back as one verdict: the case's expected verdict is one value, so a dialect changed alone
// (a status, a rule, a path it lets through) disagrees with it and fails here.

const APP = 'app.example.com'
const UPSTREAMS = [
  { name: 'app', match: { pathPrefix: '/', hosts: [APP] }, publicPaths: ['/public/**'] },
  { name: 'admin', match: { pathPrefix: '/admin', hosts: [APP] }, allow: { groups: ['admins'] } },
]

/** allow (as whom; '' anonymous), sign_in (no usable credentials), refused, unavailable (fail closed). */
type Verdict = `allow:${string}` | 'sign_in' | 'refused' | 'unavailable'

interface Asked {
  path: string
  headers: Record<string, string>
}

type Dialect = (stack: Stack, grpc: ExtAuthzClient, asked: Asked) => Promise<Verdict>

function fromStatus(status: number, user: unknown): Verdict {
  if (status === 200) return `allow:${typeof user === 'string' ? user : ''}`
  if (status === 401 || status === 302) return 'sign_in'
  if (status === 403 || status === 404 || status === 405) return 'refused'
  if (status >= 500) return 'unavailable'
  return `allow:unexpected ${status}` as Verdict
}

const DIALECTS: Record<string, Dialect> = {
  async proxy(stack, _grpc, { path, headers }) {
    const res = await rawRequest(stack.gw, path, { headers: { host: APP, ...headers } })
    // Forwarded: the echo upstream answers with what it received.
    const echoed =
      res.status === 200 && res.headers['content-type']?.toString().includes('json') ? (res.json() as { headers?: Record<string, string> }).headers : undefined
    if (echoed !== undefined) return `allow:${echoed['x-forwarded-user'] ?? ''}`
    // Not forwarded: sent to sign in, failed closed, or not let through (a gateway path the
    // gateway answers itself is never the upstream's).
    if (res.status === 401 || res.status === 302 || res.status >= 500) return fromStatus(res.status, undefined)
    return 'refused'
  },
  async 'ingress-nginx'(stack, _grpc, { path, headers }) {
    const res = await rawRequest(stack.gw, '/api/v1/openid/auth', {
      headers: { ...headers, 'x-original-method': 'GET', 'x-original-url': `https://${APP}${path}` },
    })
    return fromStatus(res.status, res.headers['x-auth-request-user'])
  },
  async traefik(stack, _grpc, { path, headers }) {
    const res = await rawRequest(stack.gw, '/api/v1/openid/auth', {
      headers: { ...headers, 'x-forwarded-method': 'GET', 'x-forwarded-host': APP, 'x-forwarded-uri': path, 'x-forwarded-proto': 'https' },
    })
    return fromStatus(res.status, res.headers['x-auth-request-user'])
  },
  async 'envoy http'(stack, _grpc, { path, headers }) {
    const res = await sendCheck(stack.gw, checkRequestFor({ method: 'GET', path, headers: { host: APP, ...headers } }))
    return fromStatus(res.status, res.headers['x-forwarded-user'])
  },
  async 'envoy grpc'(_stack, grpc, { path, headers }) {
    const res = await grpc.check(checkRequest({ method: 'GET', host: APP, path, scheme: 'https', headers }))
    switch (res.status?.code) {
      case 0:
        return `allow:${res.ok_response?.headers.find((o) => o.header.key === 'x-forwarded-user')?.header.value ?? ''}`
      case 16:
        return 'sign_in'
      case 7:
        return 'refused'
      case 14:
        return 'unavailable'
      default:
        return `allow:unexpected code ${String(res.status?.code)}` as Verdict
    }
  },
}

/** Asks every dialect about `asked` and expects `expected` from each. */
async function agree(t: Test, stack: Stack, grpc: ExtAuthzClient, name: string, asked: Asked, expected: Verdict): Promise<void> {
  const answers: Record<string, Verdict> = {}
  for (const [dialect, ask] of Object.entries(DIALECTS)) answers[dialect] = await ask(stack, grpc, asked)
  t.strictSame(answers, Object.fromEntries(Object.keys(DIALECTS).map((d) => [d, expected])), name)
}

const JSON_ACCEPT = { accept: 'application/json' }

t.test('every dialect renders the same decision', async (t) => {
  const stack = await startStack(t, { config: { redirects: { allowedHosts: [APP] } }, upstreams: UPSTREAMS })
  const grpc = await serveGatewayGrpc(t, stack)
  const alice = await gatewayCookies(stack, 'alice')
  const bob = await gatewayCookies(stack, 'bob')
  const token = await stack.provider!.signJwt({ sub: 'service-a', aud: CLIENT_ID, scope: 'api' })

  await agree(t, stack, grpc, 'a session', { path: '/page', headers: { ...JSON_ACCEPT, cookie: alice } }, 'allow:alice')
  await agree(t, stack, grpc, 'no session', { path: '/page', headers: JSON_ACCEPT }, 'sign_in')
  await agree(t, stack, grpc, 'a forged session cookie', { path: '/page', headers: { ...JSON_ACCEPT, cookie: 'ogw=forged' } }, 'sign_in')
  await agree(t, stack, grpc, 'a Bearer token', { path: '/page', headers: { ...JSON_ACCEPT, authorization: `Bearer ${token}` } }, 'allow:service-a')
  await agree(t, stack, grpc, 'a refused Bearer token', { path: '/page', headers: { ...JSON_ACCEPT, authorization: `Bearer ${token}x` } }, 'sign_in')
  await agree(t, stack, grpc, 'the wrong group', { path: '/admin/users', headers: { ...JSON_ACCEPT, cookie: bob } }, 'refused')
  await agree(t, stack, grpc, 'the right group', { path: '/admin/users', headers: { ...JSON_ACCEPT, cookie: alice } }, 'allow:alice')
  await agree(t, stack, grpc, 'a public path', { path: '/public/logo.png', headers: JSON_ACCEPT }, 'allow:')
  await agree(
    t,
    stack,
    grpc,
    'a gateway path (the proxy serves it itself; a check never allows it)',
    { path: '/api/v1/openid/callback', headers: { ...JSON_ACCEPT, cookie: alice } },
    'refused',
  )
})

t.test('every dialect renders the same decision when a session must be refreshed', async (t) => {
  const clock = manualClock()
  const stack = await startStack(t, { clock, config: { redirects: { allowedHosts: [APP] } }, upstreams: UPSTREAMS, provider: { accessTokenTtlSeconds: 2 } })
  const grpc = await serveGatewayGrpc(t, stack)
  const alice = await gatewayCookies(stack, 'alice')
  const carol = await gatewayCookies(stack, 'carol')
  // Past the access tokens' expiry, on the gateway's clock.
  clock.advance(2300)
  // Every dialect presents the same (expired) cookies: the first refreshes, the others are
  // answered from that refresh (the rotated token is never redeemed twice).
  await agree(t, stack, grpc, 'an expired session with a refresh token', { path: '/page', headers: { ...JSON_ACCEPT, cookie: alice } }, 'allow:alice')
  await stack.provider!.close()
  await agree(t, stack, grpc, 'an expired session while the provider is down', { path: '/page', headers: { ...JSON_ACCEPT, cookie: carol } }, 'unavailable')
})

// An admin-only path inside one upstream (upstreams[].rules), decided by the one
// decision whichever dialect asks.
const ONE_UPSTREAM = [
  {
    name: 'app',
    match: { pathPrefix: '/', hosts: [APP] },
    publicPaths: ['/public/**'],
    rules: [
      { path: '/admin', allow: { groups: ['admins'] } },
      // More specific than /admin: its own rule decides, not /admin's.
      { path: '/admin/help', allow: {} },
    ],
  },
]

t.test('a per-path rule inside one upstream: every dialect renders the same decision', async (t) => {
  const stack = await startStack(t, { config: { redirects: { allowedHosts: [APP] } }, upstreams: ONE_UPSTREAM })
  const grpc = await serveGatewayGrpc(t, stack)
  const alice = await gatewayCookies(stack, 'alice')
  const bob = await gatewayCookies(stack, 'bob')

  await agree(t, stack, grpc, 'a non-admin outside the rule', { path: '/page', headers: { ...JSON_ACCEPT, cookie: bob } }, 'allow:bob')
  await agree(t, stack, grpc, 'a non-admin on the admin path', { path: '/admin/users', headers: { ...JSON_ACCEPT, cookie: bob } }, 'refused')
  await agree(t, stack, grpc, 'a non-admin on the admin path itself', { path: '/admin', headers: { ...JSON_ACCEPT, cookie: bob } }, 'refused')
  await agree(t, stack, grpc, 'an admin on the admin path', { path: '/admin/users', headers: { ...JSON_ACCEPT, cookie: alice } }, 'allow:alice')
  await agree(t, stack, grpc, 'a path next to the rule, not below it', { path: '/administration', headers: { ...JSON_ACCEPT, cookie: bob } }, 'allow:bob')
  await agree(t, stack, grpc, 'the most specific rule decides', { path: '/admin/help/faq', headers: { ...JSON_ACCEPT, cookie: bob } }, 'allow:bob')
  await agree(t, stack, grpc, 'no session on the admin path', { path: '/admin/users', headers: JSON_ACCEPT }, 'sign_in')
  await agree(t, stack, grpc, 'a public path', { path: '/public/logo.png', headers: JSON_ACCEPT }, 'allow:')
  // What a case-insensitive upstream reads as /admin/users is refused, never decided by the upstream's allow.
  const proxied = await rawRequest(stack.gw, '/ADMIN/users', { headers: { host: APP, ...JSON_ACCEPT, cookie: bob } })
  t.equal(proxied.status, 400, 'a folded spelling of the admin path is ambiguous')
})

t.test('the request line of a 403 by the allow rules names who was refused, in every dialect', async (t) => {
  const lines: string[] = []
  const stack = await startStack(t, {
    config: { redirects: { allowedHosts: [APP] }, log: { level: 'info' } },
    logStream: { write: (line: string) => void lines.push(line) },
    upstreams: ONE_UPSTREAM,
  })
  const grpc = await serveGatewayGrpc(t, stack)
  const bob = await gatewayCookies(stack, 'bob')
  await agree(t, stack, grpc, 'a non-admin on the admin path', { path: '/admin/users', headers: { ...JSON_ACCEPT, cookie: bob } }, 'refused')
  const refusedLines = (): Array<Record<string, unknown>> =>
    lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'request' && l.status === 403)
  // One line per dialect: the proxy, forward-auth twice (ingress-nginx, Traefik), ext_authz HTTP and gRPC.
  const refused = await eventually('the five request lines of the 403s', () => (refusedLines().length >= 5 ? refusedLines() : undefined))
  t.equal(refused.length, 5)
  for (const line of refused) t.equal(line.sub, 'bob', `${String(line.url ?? line.grpc)}: sub`)
})
