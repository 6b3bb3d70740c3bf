// Transaction Tokens (draft-ietf-oauth-transaction-tokens-10) as the services behind receive them:
// each verifies the `Txn-Token` header (section 12.1) as section 12.2 says, with jose against the
// JWKS the gateway publishes: signature and algorithm, `typ` txntoken+jwt (section 9.1), `aud` =
// its trust domain, not expired. A client's own `Txn-Token` never reaches an upstream, through the
// proxy or a check dialect, in any spelling.

import { generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as jose from 'jose'
import t from 'tap'
import { problems } from '../fixtures/config/base.ts'
import { checkRequest, serveGatewayGrpc } from '../fixtures/ext-authz-grpc.ts'
import { HEADERS_TO_EXT_AUTHZ, startEnvoy } from '../fixtures/envoy.ts'
import { echo, openSocket, rawRequest } from '../fixtures/http.ts'
import { recipe } from '../fixtures/markdown.ts'
import { requireNginx, startNginx } from '../fixtures/nginx.ts'
import { CLIENT_ID, gatewayCookies, reservePort, startStack, type Stack } from '../fixtures/stack.ts'

const dir = mkdtempSync(join(tmpdir(), 'ogw-txn-'))
const keyPath = join(dir, 'key.pem')
writeFileSync(keyPath, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }))

const TRUST_DOMAIN = 'trust-domain.example'
const FORGED = 'eyJhbGciOiJub25lIiwidHlwIjoidHhudG9rZW4rand0In0.eyJzdWIiOiJhZG1pbiJ9.'
const UPSTREAMS = [
  {
    name: 'api',
    match: { pathPrefix: '/api' },
    publicPaths: ['/api/public/**'],
    websocket: true,
    transactionTokens: { trustDomain: TRUST_DOMAIN, scope: ['orders.read'], ttlSeconds: 30 },
  },
  { name: 'plain', match: { pathPrefix: '/' } },
]

/** What a receiving workload does (docs/features/transaction-tokens.md). */
async function verify(stack: Stack, token: string | string[] | undefined): Promise<jose.JWTPayload> {
  if (typeof token !== 'string') throw new Error(`no single Txn-Token: ${String(token)}`)
  const jwks = jose.createRemoteJWKSet(new URL(`${stack.gw}/.well-known/jwks.json`))
  const { payload } = await jose.jwtVerify(token, jwks, { typ: 'txntoken+jwt', audience: TRUST_DOMAIN, algorithms: ['ES256'] })
  return payload
}

const now = (): number => Math.floor(Date.now() / 1000)

t.test('the proxy sends a Txn-Token the upstream verifies, and never the client’s own', async (t) => {
  const stack = await startStack(t, { config: { assertions: { signingKeys: [keyPath] } }, upstreams: UPSTREAMS })
  const browser = await stack.signedIn('alice')
  const seen = (): Record<string, string | string[] | undefined> => stack.upstream.requests.at(-1)?.headers ?? {}

  t.test('a session', async (t) => {
    const res = await browser.fetch(`${stack.gw}/api/orders/7?page=2`, { headers: { accept: 'application/json', 'txn-token': FORGED, txn_token: FORGED } })
    t.equal(res.status, 200)
    const headers = seen()
    t.equal(headers.txn_token, undefined, 'the underscore spelling is stripped too')
    const payload = await verify(stack, headers['txn-token'])
    t.equal(payload.sub, 'alice')
    t.equal(payload.iss, stack.gw)
    t.equal(payload.scope, 'orders.read')
    t.equal(payload.req_wl, new URL(stack.gw).host)
    t.equal((payload.exp ?? 0) - (payload.iat ?? 0), 30, 'transactionTokens.ttlSeconds')
    t.strictSame(payload.rctx, { transport: 'http', req_ip: '127.0.0.1' }, "the client's address as the gateway sees it")
    t.strictSame(payload.tctx, { upstream: 'api', method: 'GET', path: '/api/orders/7', idp: stack.provider?.issuer }, 'no query in tctx')
    await browser.fetch(`${stack.gw}/api/orders/7`, { headers: { accept: 'application/json' } })
    const again = await verify(stack, seen()['txn-token'])
    t.not(again.txn, payload.txn, 'one txn per transaction: never a cached token')
  })

  t.test('a Bearer token', async (t) => {
    const token = await stack.provider!.signJwt({ sub: 'service-a', aud: CLIENT_ID, scope: 'api', iat: now() }, { typ: 'at+jwt' })
    const res = await fetch(`${stack.gw}/api/x`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json', 'Txn-Token': FORGED } })
    t.equal(res.status, 200)
    const payload = await verify(stack, seen()['txn-token'])
    t.equal(payload.sub, 'service-a')
    t.notOk(JSON.stringify(payload).includes(token), 'the access token is not in it (section 13.4)')
  })

  t.test('no identity, or an upstream without transactionTokens: no Txn-Token, and no forged one', async (t) => {
    await rawRequest(stack.gw, '/api/public/x', { headers: { 'txn-token': FORGED, Txn_Token: FORGED } })
    t.equal(seen()['txn-token'], undefined, 'a public path of the minting upstream')
    t.equal(seen().txn_token, undefined)
    await browser.fetch(`${stack.gw}/other`, { headers: { accept: 'application/json', 'txn-token': FORGED } })
    t.equal(seen()['txn-token'], undefined, 'another upstream of the same configuration')
  })

  t.test('a WebSocket upgrade is a transaction too', async (t) => {
    const cookie = await gatewayCookies(stack, 'alice')
    const ws = await openSocket(`${stack.gw.replace('http', 'ws')}/api/socket`, { cookie, origin: stack.gw, 'txn-token': FORGED })
    if (typeof ws === 'number') throw new Error(`upgrade refused: ${ws}`)
    t.teardown(() => ws.close())
    // One echo: the upstream has seen this upgrade before it is read.
    await echo(ws, 'ping')
    const payload = await verify(stack, stack.upstream.upgrades.at(-1)?.headers['txn-token'])
    t.equal(payload.sub, 'alice')
    t.equal((payload.tctx as Record<string, unknown>).path, '/api/socket')
  })
})

t.test('the checks set the Txn-Token on an allow, and name the client’s for removal otherwise', async (t) => {
  const stack = await startStack(t, { config: { assertions: { signingKeys: [keyPath] } }, upstreams: UPSTREAMS })
  const host = new URL(stack.gw).host
  const cookie = await gatewayCookies(stack, 'alice')

  t.test('forward-auth (ingress-nginx, Traefik): in the answer, for the ingress to copy', async (t) => {
    const ask = (uri: string, extra: Record<string, string> = {}) =>
      fetch(`${stack.gw}/api/v1/openid/auth`, {
        headers: {
          accept: 'application/json',
          'x-forwarded-method': 'GET',
          'x-forwarded-host': host,
          'x-forwarded-uri': uri,
          'x-forwarded-proto': 'https',
          ...extra,
        },
      })
    const res = await ask('/api/orders?q=1', { cookie, 'x-forwarded-for': '203.0.113.7' })
    t.equal(res.status, 200)
    const payload = await verify(stack, res.headers.get('txn-token') ?? undefined)
    t.equal(payload.sub, 'alice')
    t.strictSame(
      payload.rctx,
      { transport: 'https', req_ip: '127.0.0.1' },
      'an untrusted ingress is the client the gateway sees: its X-Forwarded-For is not read',
    )
    t.strictSame(payload.tctx, { upstream: 'api', method: 'GET', path: '/api/orders', idp: stack.provider?.issuer })
    const anonymous = await ask('/api/public/x')
    t.equal(anonymous.status, 200)
    t.equal(anonymous.headers.get('txn-token'), null, 'no identity, no token')
  })

  t.test('forward-auth from an ingress in server.trustedProxies: req_ip is the client it names in X-Forwarded-For', async (t) => {
    const trusting = await startStack(t, {
      config: { assertions: { signingKeys: [keyPath] }, server: { trustedProxies: ['127.0.0.1'] } },
      upstreams: UPSTREAMS,
    })
    const trustingHost = new URL(trusting.gw).host
    const res = await fetch(`${trusting.gw}/api/v1/openid/auth`, {
      headers: {
        accept: 'application/json',
        cookie: await gatewayCookies(trusting, 'alice'),
        'x-forwarded-method': 'GET',
        'x-forwarded-host': trustingHost,
        'x-forwarded-uri': '/api/orders',
        'x-forwarded-proto': 'https',
        'x-forwarded-for': '198.51.100.4, 203.0.113.7',
      },
    })
    t.equal(res.status, 200)
    const payload = await verify(trusting, res.headers.get('txn-token') ?? undefined)
    t.equal(payload.sub, 'alice')
    t.strictSame(payload.rctx, { transport: 'https', req_ip: '203.0.113.7' }, 'the nearest untrusted hop of X-Forwarded-For')
  })

  t.test('Envoy over HTTP: the application receives the gateway’s token, never the client’s', async (t) => {
    const envoy = await startEnvoy({
      gateway: stack.gw,
      upstream: stack.upstream.url,
      headersToBackend: ['txn-token', 'cookie'],
      headersToExtAuth: [...HEADERS_TO_EXT_AUTHZ, { contains: '_' }],
    })
    t.teardown(() => envoy.close())
    await rawRequest(envoy.url, '/api/orders', { headers: { cookie, accept: 'application/json', 'txn-token': FORGED } })
    t.equal(envoy.checks.at(-1), 200)
    const payload = await verify(stack, stack.upstream.requests.at(-1)?.headers['txn-token'])
    t.equal(payload.sub, 'alice')
    t.equal((payload.rctx as Record<string, unknown>).req_ip, undefined, "Envoy's check does not see the client")
    await rawRequest(envoy.url, '/api/public/x', { headers: { accept: 'application/json', 'txn-token': FORGED, txn_token: FORGED } })
    t.equal(envoy.checks.at(-1), 200)
    t.equal(stack.upstream.requests.at(-1)?.headers['txn-token'], undefined, 'removed on an allow without identity')
    t.equal(stack.upstream.requests.at(-1)?.headers.txn_token, undefined, 'in every spelling it arrived with')
  })

  t.test('Envoy over gRPC: headers to set, headers to remove', async (t) => {
    const client = await serveGatewayGrpc(t, stack)
    const http = (path: string, headers: Record<string, string>) => ({
      method: 'GET',
      host,
      path,
      scheme: 'https',
      headers: { ':authority': host, ...headers },
    })
    const signedIn = await client.check(checkRequest(http('/api/orders', { cookie, 'txn-token': FORGED })))
    t.equal(signedIn.status?.code, 0)
    const set = (signedIn.ok_response?.headers ?? []).filter((o) => o.header.key === 'txn-token').map((o) => o.header.value)
    t.equal(set.length, 1, 'set once, overwriting the client’s')
    t.equal((await verify(stack, set[0])).sub, 'alice')
    t.notOk(signedIn.ok_response?.headers_to_remove.includes('txn-token'), 'not removed after being set')
    const anonymous = await client.check(checkRequest(http('/api/public/x', { 'txn-token': FORGED, txn_token: FORGED })))
    t.equal(anonymous.status?.code, 0)
    t.ok(anonymous.ok_response?.headers_to_remove.includes('txn-token'))
    t.ok(anonymous.ok_response?.headers_to_remove.includes('txn_token'))
  })
})

t.test('a real nginx copying Txn-Token from the answer (docs/deploy/nginx.md with two lines more)', async (t) => {
  requireNginx()
  const reserved = await reservePort()
  const stack = await startStack(t, {
    config: { assertions: { signingKeys: [keyPath] }, redirects: { allowedHosts: [`127.0.0.1:${reserved.port}`] } },
    upstreams: [{ name: 'app', publicPaths: ['/public/**'], transactionTokens: { trustDomain: TRUST_DOMAIN, scope: ['orders.read'] } }],
  })
  const copied = '        proxy_set_header X-Auth-Request-Auth-Time $auth_auth_time;\n'
  const page = recipe('docs/deploy/nginx.md', 'nginx')
  t.ok(page.includes(copied), 'the recipe has the line the copy goes after')
  const servers = page
    .replace(copied, `${copied}        auth_request_set $txn_token $upstream_http_txn_token;\n        proxy_set_header Txn-Token $txn_token;\n`)
    .replaceAll('https://auth.example.com', stack.gw)
    .replaceAll('127.0.0.1:8080', new URL(stack.gw).host)
    .replaceAll('127.0.0.1:3000', new URL(stack.upstream.url).host)
    .replaceAll('app.example.com', '127.0.0.1')
  const nginx = await startNginx(t, servers, reserved)
  const cookie = await gatewayCookies(stack, 'alice')
  const res = await rawRequest(nginx.url, '/orders', { headers: { cookie, accept: 'application/json', 'txn-token': FORGED } })
  t.equal(res.status, 200)
  const payload = await verify(stack, stack.upstream.requests.at(-1)?.headers['txn-token'])
  t.equal(payload.sub, 'alice')
  t.equal((payload.rctx as Record<string, unknown>).req_ip, '127.0.0.1', 'nginx, not in server.trustedProxies, is the client the gateway sees')
  const anonymous = await rawRequest(nginx.url, '/public/x', { headers: { 'txn-token': FORGED } })
  t.equal(anonymous.status, 200)
  t.equal(stack.upstream.requests.at(-1)?.headers['txn-token'], undefined, 'an answer without a token: nginx sends the empty value as no header')
})

t.test('transactionTokens without assertions.signingKeys is refused naming the key', async (t) => {
  t.strictSame(problems({ upstreams: [{ name: 'app', target: 'http://127.0.0.1:3000', transactionTokens: { trustDomain: TRUST_DOMAIN, scope: ['s'] } }] }), [
    'upstreams[0].transactionTokens: requires assertions.signingKeys',
  ])
  t.strictSame(
    problems({
      assertions: { signingKeys: [keyPath] },
      upstreams: [{ name: 'app', target: 'http://127.0.0.1:3000', transactionTokens: { trustDomain: TRUST_DOMAIN } }],
    }),
    ['upstreams[0].transactionTokens.scope: is required'],
  )
  t.strictSame(
    problems({
      assertions: { signingKeys: [keyPath] },
      upstreams: [{ name: 'app', target: 'http://127.0.0.1:3000', transactionTokens: { trustDomain: TRUST_DOMAIN, scope: ['s'], ttlSeconds: 3600 } }],
    }),
    ['upstreams[0].transactionTokens.ttlSeconds: must be between 5 and 300'],
    'short-lived (section 6)',
  )
})
