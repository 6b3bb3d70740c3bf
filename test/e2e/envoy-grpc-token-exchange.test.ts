import * as jose from 'jose'
import t from 'tap'
import { checkRequest, serveGatewayGrpc } from '../fixtures/ext-authz-grpc.ts'
import { gatewayCookies, startStack } from '../fixtures/stack.ts'

// Envoy's gRPC ext_authz for an upstream with tokenExchange (RFC 8693): the same credentials as
// every exit (upstream/credentials.ts UpstreamCredentialWriter.headers), so OK sets the exchanged
// token as `authorization` over the client's own, and a refused exchange is PERMISSION_DENIED with 403.

const APP = 'app.example.com'

t.test('gRPC Check with token exchange', async (t) => {
  const stack = await startStack(t, {
    config: { redirects: { allowedHosts: [APP] } },
    provider: { tokenExchange: { audiences: ['orders-api'] } },
    upstreams: [
      { name: 'orders', match: { pathPrefix: '/orders', hosts: [APP] }, tokenExchange: { audience: 'orders-api', scope: ['orders.read'] } },
      { name: 'refused', match: { pathPrefix: '/refused', hosts: [APP] }, tokenExchange: { audience: 'other-api' } },
    ],
  })
  const client = await serveGatewayGrpc(t, stack)
  const alice = await gatewayCookies(stack, 'alice')
  const http = (path: string) => ({
    method: 'GET',
    host: APP,
    path,
    scheme: 'https',
    headers: { ':authority': APP, ':method': 'GET', ':path': path, cookie: alice, authorization: 'Bearer users-own-token' },
  })

  const ok = await client.check(checkRequest(http('/orders/x')))
  t.equal(ok.status?.code, 0)
  const set = (ok.ok_response?.headers ?? []).filter((o) => o.header.key === 'authorization').map((o) => o.header.value)
  t.equal(set.length, 1)
  t.not(set[0], 'Bearer users-own-token')
  t.match(jose.decodeJwt(set[0]!.slice('Bearer '.length)), { aud: 'orders-api', scope: 'orders.read', sub: 'alice' })

  const refused = await client.check(checkRequest(http('/refused/x')))
  t.equal(refused.status?.code, 7)
  t.equal(refused.denied_response?.status?.code, 403)
  t.equal((JSON.parse(refused.denied_response?.body ?? '{}') as { code: string }).code, 'token_exchange_refused')
})
