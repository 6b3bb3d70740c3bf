import t from 'tap'
import { checkRequest, serveGatewayGrpc } from '../fixtures/ext-authz-grpc.ts'
import { checkRequestFor, sendCheck, startEnvoy } from '../fixtures/envoy.ts'
import { rawRequest } from '../fixtures/http.ts'
import { gatewayCookies, startStack } from '../fixtures/stack.ts'

// One application behind two upstreams: its public part (auth: none) and its protected part,
// whose identityHeaders carry the name the application reads (Gitea's X-WEBAUTH-USER). Such an
// application applies header authentication on every route, so a client's X-WEBAUTH-USER sent
// through the public upstream would sign it in as anyone: every upstream strips every identity
// name of the configuration, and every check's allow names them all for removal.

const FORGED = 'x-webauth-user'
const UPSTREAMS = [
  { name: 'public', match: { pathPrefix: '/' }, auth: 'none' },
  { name: 'protected', match: { pathPrefix: '/user' }, identityHeaders: { user: 'X-WEBAUTH-USER' } },
]
/** The spellings a client may use: any case, `_` for `-` (CGI reads them all as HTTP_X_WEBAUTH_USER). */
const SPELLINGS = ['X-WEBAUTH-USER', 'x-webauth-user', 'X_WEBAUTH_USER', 'X-WebAuth_User']

t.test('an identity name of one upstream never reaches the application through another', async (t) => {
  const stack = await startStack(t, { upstreams: UPSTREAMS })
  const alice = await gatewayCookies(stack, 'alice')

  t.test('the proxy: anonymous and signed in, through the public upstream', async (t) => {
    for (const spelling of SPELLINGS) {
      for (const credentials of [{}, { cookie: alice }]) {
        const before = stack.upstream.requests.length
        const res = await rawRequest(stack.gw, '/explore', { headers: { [spelling]: 'admin', ...credentials } })
        t.equal(res.status, 200)
        const received = stack.upstream.requests[before]?.headers ?? {}
        t.equal(received[FORGED], undefined, `${spelling} is stripped`)
        t.equal(received[spelling.toLowerCase()], undefined, `${spelling} in its own spelling is stripped`)
      }
    }
  })

  t.test('the protected upstream sets its own name from the session', async (t) => {
    const before = stack.upstream.requests.length
    await rawRequest(stack.gw, '/user/settings', { headers: { cookie: alice, 'X-WEBAUTH-USER': 'admin', accept: 'application/json' } })
    t.equal(stack.upstream.requests[before]?.headers[FORGED], 'alice')
  })

  t.test('Envoy over HTTP: the public allow names it for removal', async (t) => {
    const answer = await sendCheck(stack.gw, checkRequestFor({ method: 'GET', path: '/explore', headers: { host: new URL(stack.gw).host } }))
    t.equal(answer.status, 200)
    t.ok(String(answer.headers['x-envoy-auth-headers-to-remove']).split(',').includes(FORGED))
    const envoy = await startEnvoy({ gateway: stack.gw, upstream: stack.upstream.url, headersToBackend: ['x-forwarded-user', FORGED, 'cookie'] })
    t.teardown(() => envoy.close())
    const before = stack.upstream.requests.length
    const res = await rawRequest(envoy.url, '/explore', { headers: { 'X-WEBAUTH-USER': 'admin' } })
    t.equal(envoy.checks.at(-1), 200)
    t.equal(res.status, 200)
    t.equal(stack.upstream.requests[before]?.headers[FORGED], undefined, 'the application never sees it')
  })

  t.test('Envoy over gRPC: headers_to_remove names it, anonymous or signed in', async (t) => {
    const client = await serveGatewayGrpc(t, stack)
    const host = new URL(stack.gw).host
    const anonymousOrSignedIn: Array<Record<string, string>> = [{}, { cookie: alice }]
    for (const credentials of anonymousOrSignedIn) {
      const res = await client.check(
        checkRequest({ method: 'GET', host, path: '/explore', scheme: 'http', headers: { ':authority': host, [FORGED]: 'admin', ...credentials } }),
      )
      t.equal(res.status?.code, 0)
      t.ok(res.ok_response?.headers_to_remove.includes(FORGED), 'named for removal')
      t.notOk(
        res.ok_response?.headers.some((h) => h.header.key.toLowerCase() === FORGED),
        'not set',
      )
    }
  })
})
