// Legacy credentials through every exit, against real applications where one exists: a real Caddy
// (2.11, .ci/peers) whose `basic_auth` admits only the users it knows, by the HTTP Basic
// credentials the gateway sends (RFC 7617; Caddy's caddyauth.BasicAuth checks the bcrypt hash of
// the password given for the user-id), behind the gateway's proxy, behind Envoy's HTTP check and
// behind a second Caddy whose forward_auth copies the answer's Authorization (the forward-auth
// exit as an ingress applies it). The ID token is verified as an application would (its
// signature against the provider's keys, `aud` the gateway's client id); the access token is the
// one the provider's userinfo accepts. A client's own copy never reaches the application.

import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as jose from 'jose'
import t from 'tap'
import { currentCaddy, startCaddy } from '../fixtures/caddy.ts'
import { checkRequest, serveGatewayGrpc } from '../fixtures/ext-authz-grpc.ts'
import { HEADERS_TO_EXT_AUTHZ, startEnvoy } from '../fixtures/envoy.ts'
import { echo, openSocket, rawRequest } from '../fixtures/http.ts'
import { recipe } from '../fixtures/markdown.ts'
import { CLIENT_ID, gatewayCookies, startStack } from '../fixtures/stack.ts'

t.setTimeout(110_000)

const PAGE = 'docs/features/legacy-credentials.md'

const PASSWORD = 'legacy: app password'
const FORGED_BASIC = `Basic ${Buffer.from(`alice:${PASSWORD}`).toString('base64')}`
const caddy = currentCaddy()
const hash = execFileSync(caddy.path, ['hash-password', '--plaintext', PASSWORD], { encoding: 'utf8' }).trim()
const dir = mkdtempSync(join(tmpdir(), 'ogw-legacy-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const passwordFile = join(dir, 'app-password')
writeFileSync(passwordFile, `${PASSWORD}\n`, { mode: 0o600 })

// The application that only reads Basic: alice by her `sub`, bob by his email; it says whom it admitted.
const app = await startCaddy(
  t,
  caddy,
  `http://:0 {\n\tbind 127.0.0.1\n\tbasic_auth {\n\t\talice ${hash}\n\t\tbob@example.com ${hash}\n\t}\n\trespond "admitted {http.auth.user.id}" 200\n}\n`,
)

const stack = await startStack(t, {
  upstreams: [
    { name: 'basic', match: { pathPrefix: '/basic' }, target: app.url, forwardBasicAuth: { passwordFile } },
    { name: 'email', match: { pathPrefix: '/email' }, target: app.url, forwardBasicAuth: { user: 'email', passwordFile } },
    { name: 'id', match: { pathPrefix: '/id' }, forwardIdToken: true, auth: 'optional' },
    { name: 'token', match: { pathPrefix: '/token' }, forwardAccessTokenHeader: true, websocket: true },
    { name: 'plain', match: { pathPrefix: '/plain' } },
  ],
})
const seen = (): Record<string, string | string[] | undefined> => stack.upstream.requests.at(-1)?.headers ?? {}
const JSON_ACCEPT = { accept: 'application/json' }
const provider = stack.provider
if (provider === undefined) throw new Error('the stack starts a provider')
const discovery = (await (await fetch(`${provider.issuer}/.well-known/openid-configuration`)).json()) as { userinfo_endpoint: string; jwks_uri: string }
const providerKeys = jose.createRemoteJWKSet(new URL(discovery.jwks_uri))

/** What an application does with a forwarded ID token: verify it against the provider's keys, for the gateway's client. */
async function verifiedIdToken(authorization: unknown): Promise<jose.JWTPayload> {
  if (typeof authorization !== 'string' || !authorization.startsWith('Bearer ')) throw new Error(`no Bearer ID token: ${String(authorization)}`)
  const { payload } = await jose.jwtVerify(authorization.slice(7), providerKeys, { issuer: provider!.issuer, audience: CLIENT_ID })
  return payload
}

/** The user the provider's userinfo says an access token belongs to. */
async function ownerOf(token: unknown): Promise<string> {
  const res = await fetch(discovery.userinfo_endpoint, { headers: { authorization: `Bearer ${String(token)}` } })
  if (res.status !== 200) throw new Error(`userinfo refused the token: ${res.status}`)
  return ((await res.json()) as { sub: string }).sub
}

t.test('the proxy', async (t) => {
  const alice = await gatewayCookies(stack, 'alice')
  const bob = await gatewayCookies(stack, 'bob')

  t.test('Basic: the application admits the user the gateway names, never the client’s own credentials', async (t) => {
    const res = await rawRequest(stack.gw, '/basic/x', { headers: { ...JSON_ACCEPT, cookie: alice } })
    t.equal(res.status, 200)
    t.equal(res.body, 'admitted alice')
    const forged = await rawRequest(stack.gw, '/basic/x', { headers: { ...JSON_ACCEPT, cookie: bob, authorization: FORGED_BASIC } })
    t.equal(forged.status, 401, "bob's own Basic for alice is replaced by his, which the application does not know")
    const byEmail = await rawRequest(stack.gw, '/email/x', { headers: { ...JSON_ACCEPT, cookie: bob } })
    t.equal(byEmail.body, 'admitted bob@example.com', 'user: email')
    const colon = await gatewayCookies(stack, 'urn:alice')
    const refused = await rawRequest(stack.gw, '/basic/x', { headers: { ...JSON_ACCEPT, cookie: colon, authorization: FORGED_BASIC } })
    t.equal(refused.status, 401, 'a user-id with a colon (RFC 7617 2) sends no Basic, and the client’s is removed all the same')
  })

  t.test('the ID token as Bearer, which the application verifies', async (t) => {
    const res = await rawRequest(stack.gw, '/id/x', { headers: { ...JSON_ACCEPT, cookie: alice, authorization: 'Bearer forged' } })
    t.equal(res.status, 200)
    const payload = await verifiedIdToken(seen().authorization)
    t.equal(payload.sub, 'alice')
    const token = await provider.signJwt({ sub: 'service-a', aud: CLIENT_ID, scope: 'api', iat: Math.floor(Date.now() / 1000) }, { typ: 'at+jwt' })
    await rawRequest(stack.gw, '/id/x', { headers: { ...JSON_ACCEPT, authorization: `Bearer ${token}` } })
    t.equal(seen()['x-forwarded-user'], 'service-a', 'signed in with a Bearer token')
    t.equal(seen().authorization, undefined, 'which has no ID token: no Authorization at all, not the access token')
    await rawRequest(stack.gw, '/id/x', { headers: { ...JSON_ACCEPT, authorization: 'Basic Zm9yZ2VkOng=' } })
    t.equal(seen().authorization, undefined, 'anonymous on an optional upstream: the client’s Authorization is removed')
  })

  t.test('the access token in X-Forwarded-Access-Token and X-Auth-Request-Access-Token', async (t) => {
    const res = await rawRequest(stack.gw, '/token/x', {
      headers: { ...JSON_ACCEPT, cookie: alice, 'x-forwarded-access-token': 'forged', 'X-Auth-Request-Access-Token': 'forged', authorization: 'Bearer theirs' },
    })
    t.equal(res.status, 200)
    t.equal(await ownerOf(seen()['x-forwarded-access-token']), 'alice')
    t.equal(seen()['x-auth-request-access-token'], seen()['x-forwarded-access-token'])
    t.equal(seen().authorization, 'Bearer theirs', 'Authorization is not this key’s: the client’s passes')
  })

  t.test('a WebSocket upgrade receives them as a request does', async (t) => {
    const ws = await openSocket(`${stack.gw.replace('http', 'ws')}/token/socket`, { cookie: alice, origin: stack.gw, 'x-forwarded-access-token': 'forged' })
    if (typeof ws === 'number') throw new Error(`upgrade refused: ${ws}`)
    t.teardown(() => ws.close())
    // One echo: the upstream has seen this upgrade before it is read.
    await echo(ws, 'ping')
    const headers = stack.upstream.upgrades.at(-1)?.headers ?? {}
    t.equal(await ownerOf(headers['x-forwarded-access-token']), 'alice')
    t.equal(headers['x-auth-request-access-token'], headers['x-forwarded-access-token'])
  })

  t.test('none of them: the client’s Authorization passes as it did, the token headers never', async (t) => {
    await rawRequest(stack.gw, '/plain/x', {
      headers: { ...JSON_ACCEPT, cookie: alice, authorization: FORGED_BASIC, 'x-forwarded-access-token': 'forged', 'x-auth-request-access-token': 'forged' },
    })
    t.equal(seen().authorization, FORGED_BASIC)
    t.equal(seen()['x-forwarded-access-token'], undefined)
    t.equal(seen()['x-auth-request-access-token'], undefined)
  })
})

t.test('forward-auth: the answer carries them, and an ingress that copies Authorization gets the user admitted', async (t) => {
  const alice = await gatewayCookies(stack, 'alice')
  const host = new URL(stack.gw).host
  const ask = (uri: string, extra: Record<string, string> = {}): Promise<Response> =>
    fetch(`${stack.gw}/api/v1/openid/auth`, {
      headers: { ...JSON_ACCEPT, 'x-forwarded-method': 'GET', 'x-forwarded-host': host, 'x-forwarded-uri': uri, 'x-forwarded-proto': 'https', ...extra },
    })
  const basic = await ask('/basic/x', { cookie: alice })
  t.equal(basic.status, 200)
  t.equal(basic.headers.get('authorization'), `Basic ${Buffer.from(`alice:${PASSWORD}`, 'utf8').toString('base64')}`, 'as --set-basic-auth answers')
  const id = await ask('/id/x', { cookie: alice })
  t.equal((await verifiedIdToken(id.headers.get('authorization'))).sub, 'alice', 'as --set-authorization-header answers')
  const token = await ask('/token/x', { cookie: alice })
  t.equal(await ownerOf(token.headers.get('x-auth-request-access-token')), 'alice')
  t.equal(token.headers.get('x-forwarded-access-token'), null, 'the answer names the access token once, as --set-xauthrequest does')
  t.equal(token.headers.get('authorization'), null)

  // docs/features/legacy-credentials.md's Caddy (forward_auth copying Authorization) in front of the Basic application.
  const sites = recipe(PAGE, 'caddyfile')
    .replace(/^app\.example\.com \{/m, 'http://:0 {\n\tbind 127.0.0.1')
    .replaceAll('127.0.0.1:8080', host)
    .replaceAll('127.0.0.1:3000', new URL(app.url).host)
  const ingress = await startCaddy(t, caddy, sites)
  const admitted = await rawRequest(ingress.url, '/basic/x', { headers: { ...JSON_ACCEPT, cookie: alice } })
  t.equal(admitted.status, 200)
  t.equal(admitted.body, 'admitted alice')
  const forged = await rawRequest(ingress.url, '/basic/x', {
    headers: { ...JSON_ACCEPT, cookie: await gatewayCookies(stack, 'bob'), authorization: FORGED_BASIC },
  })
  t.equal(forged.status, 401, "bob's own Basic for alice is overwritten by the answer's")
})

t.test('Envoy over HTTP: set on the request, the client’s removed', async (t) => {
  const alice = await gatewayCookies(stack, 'alice')
  const bob = await gatewayCookies(stack, 'bob')
  const toApp = await startEnvoy({
    gateway: stack.gw,
    upstream: app.url,
    headersToBackend: ['authorization', 'cookie', 'x-forwarded-user'],
    headersToExtAuth: HEADERS_TO_EXT_AUTHZ,
  })
  t.teardown(() => toApp.close())
  const admitted = await rawRequest(toApp.url, '/basic/x', { headers: { ...JSON_ACCEPT, cookie: alice } })
  t.equal(admitted.status, 200)
  t.equal(admitted.body, 'admitted alice')
  const forged = await rawRequest(toApp.url, '/basic/x', { headers: { ...JSON_ACCEPT, cookie: bob, authorization: FORGED_BASIC } })
  t.equal(forged.status, 401)
  const colon = await rawRequest(toApp.url, '/basic/x', {
    headers: { ...JSON_ACCEPT, cookie: await gatewayCookies(stack, 'urn:alice'), authorization: FORGED_BASIC },
  })
  t.equal(colon.status, 401, 'nothing to send: the client’s Authorization is removed (headers_to_remove)')

  const toEcho = await startEnvoy({
    gateway: stack.gw,
    upstream: stack.upstream.url,
    headersToBackend: ['authorization', 'cookie', 'x-forwarded-access-token', 'x-auth-request-access-token'],
    headersToExtAuth: HEADERS_TO_EXT_AUTHZ,
  })
  t.teardown(() => toEcho.close())
  await rawRequest(toEcho.url, '/id/x', { headers: { ...JSON_ACCEPT, cookie: alice, authorization: 'Bearer forged' } })
  t.equal((await verifiedIdToken(seen().authorization)).sub, 'alice')
  await rawRequest(toEcho.url, '/token/x', {
    headers: { ...JSON_ACCEPT, cookie: alice, 'x-forwarded-access-token': 'forged', 'x-auth-request-access-token': 'forged' },
  })
  t.equal(await ownerOf(seen()['x-forwarded-access-token']), 'alice')
  t.equal(seen()['x-auth-request-access-token'], seen()['x-forwarded-access-token'])
  await rawRequest(toEcho.url, '/plain/x', {
    headers: { ...JSON_ACCEPT, cookie: alice, 'x-forwarded-access-token': 'forged', 'x-auth-request-access-token': 'forged' },
  })
  t.equal(seen()['x-forwarded-access-token'], undefined, 'removed at an upstream that does not ask for it')
  t.equal(seen()['x-auth-request-access-token'], undefined)
})

t.test('Envoy over gRPC: headers to set and headers to remove', async (t) => {
  const client = await serveGatewayGrpc(t, stack)
  const alice = await gatewayCookies(stack, 'alice')
  const host = new URL(stack.gw).host
  const http = (path: string, headers: Record<string, string>): object => ({
    method: 'GET',
    host,
    path,
    scheme: 'https',
    headers: { ':authority': host, ...headers },
  })
  const setOf = (answer: Awaited<ReturnType<typeof client.check>>, name: string): string[] =>
    (answer.ok_response?.headers ?? []).filter((o) => o.header.key === name).map((o) => o.header.value)

  const basic = await client.check(checkRequest(http('/basic/x', { cookie: alice, authorization: FORGED_BASIC })))
  t.equal(basic.status?.code, 0)
  t.strictSame(setOf(basic, 'authorization'), [`Basic ${Buffer.from(`alice:${PASSWORD}`, 'utf8').toString('base64')}`])
  t.notOk(basic.ok_response?.headers_to_remove.includes('authorization'))
  const id = await client.check(checkRequest(http('/id/x', { cookie: alice })))
  t.equal((await verifiedIdToken(setOf(id, 'authorization')[0])).sub, 'alice')
  const anonymous = await client.check(checkRequest(http('/id/x', { authorization: 'Basic Zm9yZ2VkOng=' })))
  t.equal(anonymous.status?.code, 0)
  t.ok(anonymous.ok_response?.headers_to_remove.includes('authorization'), "the client's Authorization goes")
  const token = await client.check(checkRequest(http('/token/x', { cookie: alice, 'x-forwarded-access-token': 'forged' })))
  t.equal(await ownerOf(setOf(token, 'x-forwarded-access-token')[0]), 'alice')
  t.strictSame(setOf(token, 'x-auth-request-access-token'), setOf(token, 'x-forwarded-access-token'))
  const plain = await client.check(checkRequest(http('/plain/x', { cookie: alice, authorization: 'Bearer theirs', 'x-forwarded-access-token': 'forged' })))
  t.ok(plain.ok_response?.headers_to_remove.includes('x-forwarded-access-token'))
  t.notOk(plain.ok_response?.headers_to_remove.includes('authorization'), 'the client’s Authorization passes where nothing is set there')
})
