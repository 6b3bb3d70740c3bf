// Token exchange per upstream (RFC 8693) and protected resource metadata (RFC 9728), end to end:
// the real oidc-provider with the development provider's token exchange grant, the echo upstream,
// the gateway from YAML. See docs/features/token-exchange.md.

import * as jose from 'jose'
import t from 'tap'
import { echo, openSocket, problemCode, rawRequest } from '../fixtures/http.ts'
import { manualClock } from '../fixtures/clock.ts'
import { CLIENT_ID, startStack } from '../fixtures/stack.ts'

const JSON_ACCEPT = { accept: 'application/json' }
const ORDERS = {
  name: 'orders',
  match: { pathPrefix: '/orders' },
  tokenExchange: { audience: 'orders-api', scope: ['orders.read'] },
  resourceMetadata: { scopes: ['orders.read', 'orders.write'] },
}
const REFUSED = { name: 'refused', match: { pathPrefix: '/refused' }, tokenExchange: { audience: 'unknown-api' } }
const BY_RESOURCE = { name: 'byresource', match: { pathPrefix: '/res' }, tokenExchange: { resource: 'https://res.example.com/' } }
const OPTIONAL = { name: 'opt', match: { pathPrefix: '/opt' }, auth: 'optional', tokenExchange: { audience: 'orders-api' } }
const APP = { name: 'app', match: { pathPrefix: '/' } }
// An API that publishes its own RFC 9728 document: the gateway's is turned off on its host.
const SELF = { name: 'self', match: { pathPrefix: '/', hosts: ['api.test'] }, resourceMetadata: false, publicPaths: ['/.well-known/**'] }
// Without the key: on by default.
const PLAIN = { name: 'plain', match: { pathPrefix: '/plain' } }
const OPEN = { name: 'open', match: { pathPrefix: '/open' }, auth: 'none' }
// Shows the test the session's own access token (what a logged-out user could still present as Bearer).
const FORWARD = { name: 'fwd', match: { pathPrefix: '/fwd' }, forwardAccessToken: true }
const LIVE = { name: 'live', match: { pathPrefix: '/live' }, websocket: true, tokenExchange: { audience: 'orders-api' } }

t.test('token exchange per upstream', async (t) => {
  const lines: string[] = []
  const clock = manualClock()
  const stack = await startStack(t, {
    provider: { tokenExchange: { audiences: ['orders-api', 'https://res.example.com/'], expiresInSeconds: 300 } },
    upstreams: [ORDERS, REFUSED, BY_RESOURCE, OPTIONAL, APP, SELF, PLAIN, OPEN, FORWARD, LIVE],
    backchannelLogout: true,
    // Introspection: a session's (opaque) access token is accepted as Bearer too, which shows
    // whether its cached exchange outlived a logout.
    config: { log: { level: 'warn' }, provider: { bearer: { introspection: true } } },
    logStream: { write: (line: string) => void lines.push(line) },
    clock,
  })
  const provider = stack.provider!
  const exchanges = provider.tokenExchanges

  const browser = stack.browser()
  const signIn = await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'alice')
  const userToken = ((await signIn.json()) as { value: string }).value
  const upstreamAuthorization = (): string | undefined => stack.upstream.requests.at(-1)?.headers.authorization

  t.test("the upstream receives the exchanged token (audience, scope), never the user's", async (t) => {
    const before = exchanges.length
    // A client-sent Authorization (the user's own token) is dropped as well.
    const res = await browser.fetch(`${stack.gw}/orders/list`, { headers: { ...JSON_ACCEPT, authorization: `Bearer ${userToken}` } })
    t.equal(res.status, 200)
    const authorization = upstreamAuthorization()
    t.match(authorization, /^Bearer [\w-]+\.[\w-]+\.[\w-]+$/)
    const token = authorization!.slice('Bearer '.length)
    t.not(token, userToken)
    const claims = jose.decodeJwt(token)
    t.equal(claims.aud, 'orders-api')
    t.equal(claims.scope, 'orders.read')
    t.equal(claims.sub, 'alice')
    t.equal(claims.client_id, CLIENT_ID)
    t.equal(exchanges.length, before + 1)
    t.match(exchanges.at(-1), { audience: 'orders-api', scope: 'orders.read', resource: undefined, subjectValid: true })
    t.notOk(JSON.stringify(stack.upstream.requests.at(-1)?.headers).includes(userToken), "the user's token appears in no header")
  })

  t.test("anonymous on auth: optional: no exchange, and the client's Authorization is removed", async (t) => {
    const before = exchanges.length
    const res = await fetch(`${stack.gw}/opt/x`, { headers: { ...JSON_ACCEPT, authorization: 'Basic dXNlcjpwYXNz' } })
    t.equal(res.status, 200)
    t.equal(upstreamAuthorization(), undefined)
    t.equal(exchanges.length, before)
  })

  t.test('resource (RFC 8707) is sent when configured', async (t) => {
    const res = await browser.fetch(`${stack.gw}/res/x`, { headers: JSON_ACCEPT })
    t.equal(res.status, 200)
    t.match(exchanges.at(-1), { audience: undefined, resource: 'https://res.example.com/' })
    t.equal(jose.decodeJwt(upstreamAuthorization()!.slice(7)).aud, 'https://res.example.com/')
  })

  t.test('cached: one exchange for sequential and concurrent requests (single flight)', async (t) => {
    // A new session: its access token has not been exchanged yet.
    const bob = await stack.signedIn('bob')
    const before = exchanges.length
    const concurrent = await Promise.all(Array.from({ length: 8 }, () => bob.fetch(`${stack.gw}/orders/c`, { headers: JSON_ACCEPT })))
    t.same(
      concurrent.map((r) => r.status),
      Array(8).fill(200),
    )
    t.equal(exchanges.length, before + 1, 'eight concurrent requests, one exchange')
    const tokens = new Set(stack.upstream.requests.slice(-8).map((r) => r.headers.authorization))
    t.equal(tokens.size, 1, 'all eight carried the same exchanged token')
    for (let i = 0; i < 3; i++) t.equal((await bob.fetch(`${stack.gw}/orders/s`, { headers: JSON_ACCEPT })).status, 200)
    t.equal(exchanges.length, before + 1, 'later requests reuse it')
  })

  t.test('exchanged again shortly before it expires', async (t) => {
    const carol = await stack.signedIn('carol')
    const before = exchanges.length
    await carol.fetch(`${stack.gw}/orders/a`, { headers: JSON_ACCEPT })
    const first = upstreamAuthorization()
    // expires_in is whole seconds, counted by the provider a moment after it set the token's exp
    // (299 once that moment crosses a second), and the gateway's expiry is whole seconds too: a few
    // seconds on each side of the 270 s mark, not one.
    clock.advance(265_000)
    await carol.fetch(`${stack.gw}/orders/a`, { headers: JSON_ACCEPT })
    t.equal(exchanges.length, before + 1, 'reused until 30 s before expires_in (300 s)')
    t.equal(upstreamAuthorization(), first)
    clock.advance(6_000)
    await carol.fetch(`${stack.gw}/orders/a`, { headers: JSON_ACCEPT })
    t.equal(exchanges.length, before + 2, 'then exchanged again')
  })

  t.test('a refused exchange is 403 token_exchange_refused, logged at warn without tokens', async (t) => {
    const count = stack.upstream.requests.length
    const res = await browser.fetch(`${stack.gw}/refused/x`, { headers: JSON_ACCEPT })
    t.equal(res.status, 403)
    t.equal(await problemCode(res), 'token_exchange_refused')
    t.equal(stack.upstream.requests.length, count, 'nothing reached the upstream')
    const line = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'token exchange failed')
    t.match(line, {
      level: 40,
      call: 'token_exchange',
      upstream: 'refused',
      problem: 'token_exchange_refused',
      error: 'invalid_target',
      error_description: String,
    })
    t.notOk(
      lines.some((l) => l.includes(userToken)),
      'no log line carries the token',
    )
  })

  t.test('Bearer clients: their token is exchanged, and never forwarded', async (t) => {
    const bearer = await provider.signJwt({ sub: 'service-a', aud: CLIENT_ID, scope: 'api' })
    const before = exchanges.length
    for (let i = 0; i < 2; i++) {
      const res = await fetch(`${stack.gw}/orders/b`, { headers: { ...JSON_ACCEPT, authorization: `Bearer ${bearer}` } })
      t.equal(res.status, 200)
    }
    t.equal(exchanges.length, before + 1, 'cached per token')
    const token = upstreamAuthorization()!.slice(7)
    t.not(token, bearer)
    t.match(jose.decodeJwt(token), { sub: 'service-a', aud: 'orders-api' })
  })

  t.test('ext_authz and forward-auth answer with the exchanged token', async (t) => {
    const cookie = browser
      .cookieHeader(`${stack.gw}/orders`)
      .split('; ')
      .filter((pair) => pair.startsWith('ogw'))
      .join('; ')
    const ext = await fetch(`${stack.gw}/api/v1/openid/ext-authz/orders/list`, { headers: { ...JSON_ACCEPT, cookie, authorization: `Bearer ${userToken}` } })
    t.equal(ext.status, 200)
    const set = ext.headers.get('authorization')
    t.match(set, /^Bearer /)
    t.equal(jose.decodeJwt(set!.slice(7)).aud, 'orders-api')
    t.not(set, `Bearer ${userToken}`)
    const fwd = await fetch(`${stack.gw}/api/v1/openid/auth`, {
      headers: { ...JSON_ACCEPT, cookie, 'x-original-method': 'GET', 'x-original-url': `${stack.gw}/orders/list` },
    })
    t.equal(fwd.status, 200)
    t.equal(fwd.headers.get('authorization'), set, 'the same cached exchange')
    t.equal(fwd.headers.get('x-auth-request-access-token'), set!.slice(7))
    const refused = await fetch(`${stack.gw}/api/v1/openid/ext-authz/refused/x`, { headers: { ...JSON_ACCEPT, cookie } })
    t.equal(refused.status, 403)
    t.equal(await problemCode(refused), 'token_exchange_refused')
  })

  t.test("RFC 9728 metadata and the 401's resource_metadata", async (t) => {
    const res = await fetch(`${stack.gw}/.well-known/oauth-protected-resource/orders`)
    t.equal(res.status, 200)
    t.match(res.headers.get('content-type'), /^application\/json/)
    t.same(await res.json(), {
      resource: `${stack.gw}/orders`,
      authorization_servers: [provider.issuer],
      bearer_methods_supported: ['header'],
      scopes_supported: ['orders.read', 'orders.write'],
    })
    const anonymous = await fetch(`${stack.gw}/orders/x`, { headers: JSON_ACCEPT })
    t.equal(anonymous.status, 401)
    t.equal(anonymous.headers.get('www-authenticate'), `Bearer resource_metadata="${stack.gw}/.well-known/oauth-protected-resource/orders"`)
    const invalid = await fetch(`${stack.gw}/orders/x`, { headers: { ...JSON_ACCEPT, authorization: 'Bearer nope' } })
    t.equal(
      invalid.headers.get('www-authenticate'),
      `Bearer error="invalid_token", resource_metadata="${stack.gw}/.well-known/oauth-protected-resource/orders"`,
    )
    const check = await fetch(`${stack.gw}/api/v1/openid/ext-authz/orders/x`, { headers: JSON_ACCEPT })
    t.equal(check.status, 401)
    t.equal(check.headers.get('www-authenticate'), `Bearer resource_metadata="${stack.gw}/.well-known/oauth-protected-resource/orders"`)
  })

  t.test('RFC 9728 metadata is on by default for every upstream that accepts Bearer tokens', async (t) => {
    for (const [path, resource] of [
      ['/.well-known/oauth-protected-resource/plain', `${stack.gw}/plain`],
      ['/.well-known/oauth-protected-resource', stack.gw],
      ['/.well-known/oauth-protected-resource/opt', `${stack.gw}/opt`],
    ] as const) {
      const res = await fetch(`${stack.gw}${path}`)
      t.equal(res.status, 200, path)
      // No scopes_supported: no key names the scopes (docs/features/token-exchange.md).
      t.same(await res.json(), { resource, authorization_servers: [provider.issuer], bearer_methods_supported: ['header'] }, path)
    }
    const anonymous = await fetch(`${stack.gw}/plain/x`, { headers: JSON_ACCEPT })
    t.equal(anonymous.status, 401)
    t.equal(anonymous.headers.get('www-authenticate'), `Bearer resource_metadata="${stack.gw}/.well-known/oauth-protected-resource/plain"`)
    const root = await fetch(`${stack.gw}/x`, { headers: JSON_ACCEPT })
    t.equal(root.headers.get('www-authenticate'), `Bearer resource_metadata="${stack.gw}/.well-known/oauth-protected-resource"`)
    // auth: none accepts no token: no document; its would-be path is the root upstream's, which asks for a sign-in.
    const open = await fetch(`${stack.gw}/.well-known/oauth-protected-resource/open`, { headers: JSON_ACCEPT })
    t.equal(open.status, 401)
    t.equal(await problemCode(open), 'unauthenticated')
  })

  t.test('resourceMetadata: false: no document, no resource_metadata; the path reaches the upstream', async (t) => {
    const before = stack.upstream.requests.length
    const own = await rawRequest(stack.gw, '/.well-known/oauth-protected-resource', { headers: { ...JSON_ACCEPT, host: 'api.test' } })
    t.equal(own.status, 200, "the upstream's own path (public there) is proxied")
    t.equal(stack.upstream.requests.length, before + 1)
    t.equal(stack.upstream.requests.at(-1)?.url, '/.well-known/oauth-protected-resource')
    t.notOk(String(own.body).includes('authorization_servers'), "not the gateway's document")
    const refused = await rawRequest(stack.gw, '/x', { headers: { ...JSON_ACCEPT, host: 'api.test' } })
    t.equal(refused.status, 401)
    t.equal(refused.headers['www-authenticate'], 'Bearer')
    // Other hosts keep the root upstream's document.
    t.equal((await fetch(`${stack.gw}/.well-known/oauth-protected-resource`)).status, 200)
  })

  t.test("a WebSocket upgrade carries the exchanged token, never the user's", async (t) => {
    const url = `${stack.gw.replace('http', 'ws')}/live/socket`
    const cookie = browser
      .cookieHeader(`${stack.gw}/live`)
      .split('; ')
      .filter((pair) => pair.startsWith('ogw'))
      .join('; ')
    const before = stack.upstream.upgrades.length
    const ws = await openSocket(url, { cookie, authorization: `Bearer ${userToken}` })
    if (typeof ws === 'number') throw new Error(`upgrade refused with ${ws}`)
    t.teardown(() => ws.close())
    t.equal(await echo(ws, 'hello'), 'hello')
    t.equal(stack.upstream.upgrades.length, before + 1)
    const authorization = stack.upstream.upgrades.at(-1)?.headers.authorization
    t.match(authorization, /^Bearer /)
    t.not(authorization, `Bearer ${userToken}`)
    t.match(jose.decodeJwt(String(authorization).slice(7)), { aud: 'orders-api', sub: 'alice' })
    t.notOk(JSON.stringify(stack.upstream.upgrades.at(-1)?.headers).includes(userToken), "the user's token appears in no header")
    // A Bearer client's upgrade: its token exchanged as well.
    const bearer = await provider.signJwt({ sub: 'service-b', aud: CLIENT_ID, scope: 'api' })
    const client = await openSocket(url, { authorization: `Bearer ${bearer}` })
    if (typeof client === 'number') throw new Error(`upgrade refused with ${client}`)
    t.teardown(() => client.close())
    t.equal(await echo(client, 'hi'), 'hi')
    const exchanged = String(stack.upstream.upgrades.at(-1)?.headers.authorization)
    t.not(exchanged, `Bearer ${bearer}`)
    t.match(jose.decodeJwt(exchanged.slice(7)), { aud: 'orders-api', sub: 'service-b' })
  })

  t.test("logout drops the session's cached exchanges", async (t) => {
    const erin = await stack.signedIn('erin')
    await erin.fetch(`${stack.gw}/fwd/x`, { headers: JSON_ACCEPT })
    const sessionToken = upstreamAuthorization()!.slice('Bearer '.length)
    const bearer = { ...JSON_ACCEPT, authorization: `Bearer ${sessionToken}` }
    const before = exchanges.length
    t.equal((await erin.fetch(`${stack.gw}/orders/a`, { headers: JSON_ACCEPT })).status, 200)
    t.equal((await fetch(`${stack.gw}/orders/a`, { headers: bearer })).status, 200)
    t.equal(exchanges.length, before + 1, 'the same access token as Bearer reuses the exchange of the session')
    t.equal((await erin.fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE' })).status, 200)
    // Logout revoked the grant at the provider (the stack's sessions hold a refresh token), but
    // the gateway's introspection result is still cached (60 s), so the token is accepted as
    // Bearer: only the exchange cache decides. A kept exchange would be handed over (200); a
    // dropped one is asked for again, and the provider refuses the revoked subject token.
    const after = await fetch(`${stack.gw}/orders/a`, { headers: bearer })
    t.equal(exchanges.length, before + 2, 'exchanged afresh: the cached exchange left with the session')
    t.match(exchanges.at(-1), { audience: 'orders-api', subjectValid: false })
    t.equal(after.status, 403)
    t.equal(await problemCode(after), 'token_exchange_refused')
  })

  t.test('back-channel logout drops every cached exchange of the process', async (t) => {
    const frank = await stack.signedIn('frank')
    const grace = await stack.signedIn('grace')
    const before = exchanges.length
    for (let i = 0; i < 2; i++) t.equal((await frank.fetch(`${stack.gw}/orders/b`, { headers: JSON_ACCEPT })).status, 200)
    t.equal(exchanges.length, before + 1, 'cached')
    const delivered: string[] = []
    provider.provider.on('backchannel.success', () => delivered.push('ok'))
    const done = await grace.confirmProviderLogout(`${provider.issuer}/session/end`)
    await done.response.body?.cancel()
    t.same(delivered, ['ok'], "grace's logout token was delivered and accepted")
    t.equal((await frank.fetch(`${stack.gw}/orders/b`, { headers: JSON_ACCEPT })).status, 200, "frank's session is untouched")
    t.equal(exchanges.length, before + 2, "but his exchange is made again (the ended sessions' tokens are not known there)")
  })

  t.test('provider down: 502 provider_unavailable', async (t) => {
    const dave = await stack.signedIn('dave')
    await provider.close()
    const res = await dave.fetch(`${stack.gw}/orders/x`, { headers: JSON_ACCEPT })
    t.equal(res.status, 502)
    t.equal(await problemCode(res), 'provider_unavailable')
  })
})
