import t, { type Test } from 'tap'
import { checkRequestFor, HEADERS_TO_EXT_AUTHZ, sendCheck } from '../fixtures/envoy.ts'
import { checkRequest, serveGatewayGrpc, type ExtAuthzClient } from '../fixtures/ext-authz-grpc.ts'
import { rawRequest } from '../fixtures/http.ts'
import { gatewayCookies, startStack, type Stack } from '../fixtures/stack.ts'

// publicPaths and rules by regex and by method, and allowPreflight, decided once (src/access/)
// and answered alike by every exit: the proxy (with what the application receives), ingress-nginx's
// and Traefik's forward-auth (the method named by X-Original-Method / X-Forwarded-Method, the path by
// X-Original-URL / X-Forwarded-Uri), and Envoy's ext_authz over HTTP (the client's method and path
// on the check request) and gRPC (attributes.request.http.method and .path).

const APP = 'app.example.com'
const ADMINS = { groups: ['admins'] }
const UPSTREAMS = [
  {
    name: 'app',
    match: { pathPrefix: '/', hosts: [APP] },
    allowPreflight: true,
    publicPaths: ['/public/**', { regex: '^/api/v[0-9]+/health$', methods: ['GET'] }, { glob: '/docs/**', methods: ['GET'] }],
    rules: [
      { regex: '^/projects/[^/]+/settings(?:/.*)?$', allow: ADMINS },
      { regex: '^/api/items/[0-9]+:purge$', methods: ['POST'], allow: ADMINS },
      { path: '/admin', allow: ADMINS },
      { path: '/api', methods: ['DELETE'], allow: ADMINS },
    ],
  },
]

/** allow (as whom; '' anonymous), sign_in, refused (403), bad_request (400). */
type Verdict = `allow:${string}` | 'sign_in' | 'refused' | 'bad_request'

interface Asked {
  method: string
  path: string
  headers: Record<string, string>
}

type Exit = (stack: Stack, grpc: ExtAuthzClient, asked: Asked) => Promise<Verdict>

function fromStatus(status: number, user: unknown): Verdict {
  if (status === 200) return `allow:${typeof user === 'string' ? user : ''}`
  if (status === 401 || status === 302) return 'sign_in'
  if (status === 403) return 'refused'
  if (status === 400) return 'bad_request'
  return `allow:unexpected ${status}` as Verdict
}

/** What the application received through the proxy, per request: its method and path. */
const received: Array<{ method: string; url: string }> = []

const EXITS: Record<string, Exit> = {
  async proxy(stack, _grpc, { method, path, headers }) {
    const res = await rawRequest(stack.gw, path, { method, headers: { host: APP, ...headers } })
    if (res.status === 200 && method === 'HEAD') return 'allow:'
    const echoed = res.status === 200 ? res.json<{ method: string; url: string; headers: Record<string, string> }>() : undefined
    if (echoed === undefined) return fromStatus(res.status, undefined)
    received.push({ method: echoed.method, url: echoed.url })
    return `allow:${echoed.headers['x-forwarded-user'] ?? ''}`
  },
  async 'ingress-nginx'(stack, _grpc, { method, path, headers }) {
    const res = await rawRequest(stack.gw, '/api/v1/openid/auth', {
      headers: { ...headers, 'x-original-method': method, 'x-original-url': `https://${APP}${path}` },
    })
    return fromStatus(res.status, res.headers['x-auth-request-user'])
  },
  async traefik(stack, _grpc, { method, path, headers }) {
    const res = await rawRequest(stack.gw, '/api/v1/openid/auth', {
      headers: { ...headers, 'x-forwarded-method': method, 'x-forwarded-host': APP, 'x-forwarded-uri': path, 'x-forwarded-proto': 'https' },
    })
    return fromStatus(res.status, res.headers['x-auth-request-user'])
  },
  async 'envoy http'(stack, _grpc, { method, path, headers }) {
    // A preflight is told only from headers Envoy is told to send (docs/deploy/kubernetes.md).
    const check = checkRequestFor({ method, path, headers: { host: APP, ...headers } }, [...HEADERS_TO_EXT_AUTHZ, 'origin', 'access-control-request-method'])
    const res = await sendCheck(stack.gw, check)
    return fromStatus(res.status, res.headers['x-forwarded-user'])
  },
  async 'envoy grpc'(_stack, grpc, { method, path, headers }) {
    const res = await grpc.check(checkRequest({ method, host: APP, path, scheme: 'https', headers }))
    if (res.status?.code === 0) return `allow:${res.ok_response?.headers.find((o) => o.header.key === 'x-forwarded-user')?.header.value ?? ''}`
    return fromStatus(res.denied_response?.status?.code ?? 0, undefined)
  },
}

async function agree(t: Test, stack: Stack, grpc: ExtAuthzClient, name: string, asked: Asked, expected: Verdict, exits = Object.keys(EXITS)): Promise<void> {
  const answers: Record<string, Verdict> = {}
  for (const exit of exits) answers[exit] = await (EXITS[exit] as Exit)(stack, grpc, asked)
  t.strictSame(answers, Object.fromEntries(exits.map((e) => [e, expected])), name)
}

const JSON_ACCEPT = { accept: 'application/json' }
const CHECKS = ['ingress-nginx', 'traefik', 'envoy http', 'envoy grpc']

t.test('regex and method entries: every exit decides alike', async (t) => {
  const stack = await startStack(t, { config: { redirects: { allowedHosts: [APP] } }, upstreams: UPSTREAMS })
  const grpc = await serveGatewayGrpc(t, stack)
  const alice = await gatewayCookies(stack, 'alice')
  const bob = await gatewayCookies(stack, 'bob')
  const as = (cookie: string) => ({ ...JSON_ACCEPT, cookie })
  const ask = (method: string, path: string, headers: Record<string, string> = JSON_ACCEPT): Asked => ({ method, path, headers })

  // A public regex for GET.
  await agree(t, stack, grpc, 'a public regex, GET, nobody', ask('GET', '/api/v1/health'), 'allow:')
  await agree(t, stack, grpc, 'a public regex for GET also covers HEAD', ask('HEAD', '/api/v2/health'), 'allow:')
  await agree(t, stack, grpc, 'a public regex for GET: POST needs a sign-in', ask('POST', '/api/v1/health'), 'sign_in')
  await agree(t, stack, grpc, 'a public regex matches the whole path: not a longer one', ask('GET', '/api/v1/health/extra'), 'sign_in')
  await agree(t, stack, grpc, 'a public regex matches the whole path: not another version spelling', ask('GET', '/api/vx/health'), 'sign_in')
  await agree(t, stack, grpc, 'a public glob for GET', ask('GET', '/docs/intro'), 'allow:')
  await agree(t, stack, grpc, 'a public glob for GET: PUT needs a sign-in', ask('PUT', '/docs/intro'), 'sign_in')
  await agree(t, stack, grpc, 'a public glob for GET: PUT signed in passes as the user', ask('PUT', '/docs/intro', as(bob)), 'allow:bob')

  // A regex rule, tried before the prefix rules.
  await agree(t, stack, grpc, 'a regex rule refuses a non-admin', ask('GET', '/projects/p1/settings', as(bob)), 'refused')
  await agree(t, stack, grpc, 'a regex rule below its pattern', ask('POST', '/projects/p1/settings/tokens', as(bob)), 'refused')
  await agree(t, stack, grpc, 'a regex rule admits an admin', ask('GET', '/projects/p1/settings', as(alice)), 'allow:alice')
  await agree(t, stack, grpc, 'outside the pattern: the upstream allow', ask('GET', '/projects/p1/settingsx', as(bob)), 'allow:bob')
  await agree(t, stack, grpc, 'one segment only: [^/]+', ask('GET', '/projects/p1/p2/settings', as(bob)), 'allow:bob')
  await agree(t, stack, grpc, 'no session on a regex rule', ask('GET', '/projects/p1/settings'), 'sign_in')
  // A regex rule's 403 names the path refused (the client's own), never the pattern.
  const refused = await rawRequest(stack.gw, '/projects/p1/settings/tokens', { headers: { host: APP, ...as(bob) } })
  t.match(refused.json(), { code: 'forbidden', refusedPath: '/projects/p1/settings/tokens' }, "a regex rule's 403 names the refused path")

  // A rule for DELETE only.
  await agree(t, stack, grpc, 'a DELETE rule refuses a non-admin', ask('DELETE', '/api/items/1', as(bob)), 'refused')
  await agree(t, stack, grpc, 'a DELETE rule admits an admin', ask('DELETE', '/api/items/1', as(alice)), 'allow:alice')
  await agree(t, stack, grpc, 'a DELETE rule is not there for GET', ask('GET', '/api/items/1', as(bob)), 'allow:bob')
  // Node's parser refuses a lowercase method before the proxy sees it; an ingress names it as sent.
  await agree(t, stack, grpc, 'a lowercase delete does not dodge the DELETE rule', ask('delete', '/api/items/1', as(bob)), 'refused', CHECKS)

  // allowPreflight: the Fetch standard's CORS-preflight request only.
  const preflight = { ...JSON_ACCEPT, origin: 'https://spa.example.com', 'access-control-request-method': 'DELETE' }
  await agree(t, stack, grpc, 'a preflight passes anonymously, even under a rule', ask('OPTIONS', '/admin/users', preflight), 'allow:')
  await agree(t, stack, grpc, 'a preflight passes anonymously under a regex rule', ask('OPTIONS', '/projects/p1/settings', preflight), 'allow:')
  await agree(
    t,
    stack,
    grpc,
    'an OPTIONS without Origin is no preflight',
    ask('OPTIONS', '/admin/users', { ...JSON_ACCEPT, 'access-control-request-method': 'DELETE' }),
    'sign_in',
  )
  await agree(
    t,
    stack,
    grpc,
    'an empty Access-Control-Request-Method is no preflight',
    ask('OPTIONS', '/admin/users', { ...preflight, 'access-control-request-method': '' }),
    'sign_in',
  )
  await agree(t, stack, grpc, 'an OPTIONS that is no preflight is decided by the rules', ask('OPTIONS', '/admin/users', as(bob)), 'refused')

  // Red team: spellings that normalize (the proxy decides on the normal form; a check refuses
  // any target not in it), and folded spellings (ambiguous everywhere).
  await agree(t, stack, grpc, 'dot segments into a regex rule (proxy)', ask('GET', '/public/../projects/p1/settings', as(bob)), 'refused', ['proxy'])
  await agree(t, stack, grpc, 'dot segments into a regex rule (checks)', ask('GET', '/public/../projects/p1/settings', as(bob)), 'bad_request', CHECKS)
  await agree(t, stack, grpc, 'an encoded letter (proxy)', ask('GET', '/%70rojects/p1/settings', as(bob)), 'refused', ['proxy'])
  await agree(t, stack, grpc, 'an encoded letter (checks)', ask('GET', '/%70rojects/p1/settings', as(bob)), 'bad_request', CHECKS)
  await agree(t, stack, grpc, 'an encoded dot-dot out of a public regex path (proxy)', ask('GET', '/api/v1/health/%2e%2e/%2e%2e/%2e%2e/admin'), 'sign_in', [
    'proxy',
  ])
  await agree(
    t,
    stack,
    grpc,
    'an encoded dot-dot out of a public regex path (checks)',
    ask('GET', '/api/v1/health/%2e%2e/%2e%2e/%2e%2e/admin'),
    'bad_request',
    CHECKS,
  )
  await agree(t, stack, grpc, 'a public glob for GET cannot reach a rule by dot segments', ask('GET', '/docs/../admin/users'), 'sign_in', ['proxy'])
  await agree(t, stack, grpc, 'an encoded slash never splits a segment', ask('GET', '/projects/p1%2Fx/settings', as(bob)), 'bad_request')
  await agree(t, stack, grpc, 'a regex rule with a :', ask('POST', '/api/items/1:purge', as(bob)), 'refused')
  await agree(t, stack, grpc, 'an encoded : does not dodge it', ask('POST', '/api/items/1%3Apurge', as(bob)), 'refused')
  await agree(t, stack, grpc, 'an encoded : for an admin', ask('POST', '/api/items/1%3Apurge', as(alice)), 'allow:alice')
  await agree(t, stack, grpc, 'a folded spelling of a regex rule is ambiguous', ask('GET', '/PROJECTS/p1/settings', as(bob)), 'bad_request')
  await agree(t, stack, grpc, 'a folded spelling of a public regex is ambiguous', ask('GET', '/API/v1/health'), 'bad_request')
  await agree(t, stack, grpc, 'the query plays no part', ask('GET', '/api/v1/health?x=/projects/p1/settings'), 'allow:')
  await agree(t, stack, grpc, 'a query cannot make a path public', ask('GET', '/admin/users?/api/v1/health'), 'sign_in')

  // What the application received through the proxy: the method and path decided.
  t.ok(
    received.some((r) => r.method === 'PUT' && r.url === '/docs/intro'),
    'the proxy forwards the method and path it decided for',
  )
  t.ok(
    received.some((r) => r.method === 'GET' && r.url === '/api/v1/health?x=/projects/p1/settings'),
    'and the query as sent',
  )
  t.notOk(
    received.some((r) => r.url.includes('%2e') || r.url.includes('..')),
    'never a spelling other than the normal form',
  )
})
