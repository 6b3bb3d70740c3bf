import { once } from 'node:events'
import { randomUUID } from 'node:crypto'
import Fastify, { type FastifyInstance } from 'fastify'
import { Redis } from 'ioredis'
import * as jose from 'jose'
import t from 'tap'
import { GatewayError } from '#src/contract/errors'
import { KeysNotLoadedError } from '#src/oidc/provider-keys'
import { JtiReplayGuard } from '#src/oidc/jti-replay'
import { systemClock } from '#src/lib/clock'
import { RedisKeys } from '#src/session/redis-keys'
import { Providers, type Provider } from '#src/oidc/providers'
import { BACKCHANNEL_LOGOUT_EVENT } from '#src/oidc/logout-token'
import { BACKCHANNEL_LOGOUT_PATH } from '#src/contract/endpoints'
import { backchannelLogoutRoute, MAX_BODY_BYTES } from '#src/routes/backchannel-logout'
import type { SessionSelector, SessionStore } from '#src/session/types'
import { startRedis } from '../fixtures/redis.ts'
import { CLIENT_ID, startStack } from '../fixtures/stack.ts'

const KEYS = new RedisKeys('test:')

// POST /api/v1/openid/backchannel-logout: the answers of section 2.8 through the whole gateway
// (tokens signed by the real dev provider), then the route alone with a local key, for what needs
// a store or a Redis the test controls: replay across replicas, outages.

function claims(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { aud: CLIENT_ID, sid: 'sid-1', sub: 'alice', jti: randomUUID(), events: { [BACKCHANNEL_LOGOUT_EVENT]: {} }, ...extra }
}

function post(url: string, body: string | URLSearchParams, type = 'application/x-www-form-urlencoded'): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { 'content-type': type }, body: body.toString() })
}

t.test('through the gateway: 200, 400 invalid_request, replay, body rules', async (t) => {
  const stack = await startStack(t, { backchannelLogout: true })
  const provider = stack.provider!
  const url = stack.gw + BACKCHANNEL_LOGOUT_PATH
  const token = await provider.signJwt(claims(), { typ: 'logout+jwt' })

  const ok = await post(url, new URLSearchParams({ logout_token: token }))
  t.equal(ok.status, 200)
  t.equal(await ok.text(), '', 'no body')
  t.equal(ok.headers.get('cache-control'), 'no-store')

  const replay = await post(url, new URLSearchParams({ logout_token: token }))
  t.equal(replay.status, 400, 'a replayed jti is refused')
  t.equal(replay.headers.get('cache-control'), 'no-store')
  t.match(replay.headers.get('content-type'), /^application\/json/)
  t.same(await replay.json(), { error: 'invalid_request', error_description: 'this logout token was already received (jti replayed)' })

  const foreign = await post(url, new URLSearchParams({ logout_token: await provider.signJwt(claims({ aud: 'another-client' })) }))
  t.equal(foreign.status, 400)
  t.match(await foreign.json(), { error: 'invalid_request', error_description: /aud/ })

  const unsigned = await post(url, new URLSearchParams({ logout_token: await provider.signJwt(claims(), { alg: 'none' }) }))
  t.equal(unsigned.status, 400, 'alg none')
  const confused = await post(url, new URLSearchParams({ logout_token: await provider.signJwt(claims(), { alg: 'HS256' }) }))
  t.equal(confused.status, 400, 'HMAC keyed with the public key')
  const unknownKid = await post(url, new URLSearchParams({ logout_token: await provider.signJwt(claims(), { kid: 'unknown' }) }))
  t.equal(unknownKid.status, 400, 'a key the provider does not publish')
  t.match(await unknownKid.json(), { error_description: /no applicable key|key/i })

  // The other variants of the token (the conformance plan's are test/conformance/backchannel-logout-rp.test.ts).
  const valid = await provider.signJwt(claims(), { typ: 'logout+jwt' })
  const [head, payload, signature = ''] = valid.split('.')
  const tampered = `${head}.${payload}.${signature.slice(0, -4)}${signature.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`
  for (const [name, bad] of [
    ['a bad signature', tampered],
    ['no iat', await provider.signJwt(claims({ iat: undefined }), { typ: 'logout+jwt' })],
    ['neither sid nor sub', await provider.signJwt(claims({ sid: undefined, sub: undefined }), { typ: 'logout+jwt' })],
  ] as const) {
    const res = await post(url, new URLSearchParams({ logout_token: bad }))
    t.equal(res.status, 400, name)
    t.equal(res.headers.get('cache-control'), 'no-store', name)
    await res.body?.cancel()
  }

  const missing = await post(url, new URLSearchParams({ other: 'x' }))
  t.equal(missing.status, 400)
  t.same(await missing.json(), { error: 'invalid_request', error_description: 'the request must carry exactly one logout_token' })
  const twice = new URLSearchParams([
    ['logout_token', await provider.signJwt(claims())],
    ['logout_token', await provider.signJwt(claims())],
  ])
  t.equal((await post(url, twice)).status, 400, 'two logout tokens')

  const json = await post(url, JSON.stringify({ logout_token: token }), 'application/json')
  t.equal(json.status, 415, 'only a form')
  await json.body?.cancel()
  const big = await post(url, `logout_token=${'a'.repeat(MAX_BODY_BYTES)}`)
  t.equal(big.status, 413, 'the body is bounded')
  await big.body?.cancel()
  const get = await fetch(url)
  t.equal(get.status, 405)
  t.equal(get.headers.get('allow'), 'POST')
  await get.body?.cancel()
})

// The route alone, keyed with a local key, over any store and replay guard.
const ISSUER = 'https://op.example.com'
const { privateKey, publicKey } = await jose.generateKeyPair('RS256')

function sign(extra: Record<string, unknown> = {}): Promise<string> {
  return new jose.SignJWT({ iss: ISSUER, iat: Math.floor(Date.now() / 1000), ...claims(extra) })
    .setProtectedHeader({ alg: 'RS256', typ: 'logout+jwt' })
    .sign(privateKey)
}

interface Ended {
  selectors: SessionSelector[]
  fail: Error | undefined
}

async function routeApp(
  t: Tap,
  replay: JtiReplayGuard,
  options: { ready?: boolean; getKey?: () => Promise<jose.CryptoKey> } = {},
): Promise<{ app: FastifyInstance; ended: Ended }> {
  const ended: Ended = { selectors: [], fail: undefined }
  const store = {
    async end(selector: SessionSelector) {
      if (ended.fail !== undefined) throw ended.fail
      ended.selectors.push(selector)
    },
  } as unknown as SessionStore
  const app = Fastify()
  // The gateway's error handler, reduced to the status and code.
  app.setErrorHandler((err, _req, reply) => {
    if (err instanceof GatewayError) return reply.code(err.status).send({ code: err.code })
    return reply.code((err as { statusCode?: number }).statusCode ?? 500).send({ code: 'other' })
  })
  // The route reads a provider's issuer, client id and tolerance, and its client's algorithms and keys.
  const provider = {
    name: 'default',
    config: { issuer: ISSUER, clientId: CLIENT_ID, clockToleranceSeconds: 30 },
    client: { idTokenAlgorithms: options.ready === false ? undefined : ['RS256'], keys: { getKey: options.getKey ?? (async () => publicKey) } },
  } as unknown as Provider
  await app.register(backchannelLogoutRoute, {
    providers: new Providers([provider]),
    store,
    replay,
  })
  t.teardown(() => app.close())
  return { app, ended }
}

type Tap = { teardown(fn: () => unknown): void }

function inject(app: FastifyInstance, token: string) {
  return app.inject({
    method: 'POST',
    url: BACKCHANNEL_LOGOUT_PATH,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({ logout_token: token }).toString(),
  })
}

t.test('the selector of the token reaches the store: sid (with sub), or sub alone', async (t) => {
  const { app, ended } = await routeApp(t, new JtiReplayGuard({ clock: systemClock }))
  t.equal((await inject(app, await sign())).statusCode, 200)
  t.equal((await inject(app, await sign({ sid: undefined }))).statusCode, 200)
  t.equal((await inject(app, await sign({ sub: undefined }))).statusCode, 200)
  t.same(ended.selectors, [
    { sid: 'sid-1', sub: 'alice', provider: 'default' },
    { sub: 'alice', provider: 'default' },
    { sid: 'sid-1', provider: 'default' },
  ])
})

t.test('a logout that fails is a 5xx, and the provider may send the same token again', async (t) => {
  const { app, ended } = await routeApp(t, new JtiReplayGuard({ clock: systemClock }))
  const token = await sign()
  ended.fail = new GatewayError('session_store_unavailable', 'down')
  const failed = await inject(app, token)
  t.equal(failed.statusCode, 503)
  t.same(failed.json(), { code: 'session_store_unavailable' })
  ended.fail = undefined
  t.equal((await inject(app, token)).statusCode, 200, 'the retry is not taken for a replay')
  t.equal((await inject(app, token)).statusCode, 400, 'the next one is')
  t.same(ended.selectors.length, 1)
})

t.test('before discovery: 503 not_ready, the token is not judged', async (t) => {
  const { app, ended } = await routeApp(t, new JtiReplayGuard({ clock: systemClock }), { ready: false })
  const res = await inject(app, await sign())
  t.equal(res.statusCode, 503)
  t.same(res.json(), { code: 'not_ready' })
  t.same(ended.selectors, [])
})

t.test("the provider's keys cannot be had: 503 not_ready before they are loaded, else 502", async (t) => {
  const loading = await routeApp(t, new JtiReplayGuard({ clock: systemClock }), { getKey: () => Promise.reject(new KeysNotLoadedError('not yet')) })
  const notReady = await inject(loading.app, await sign())
  t.equal(notReady.statusCode, 503)
  t.same(notReady.json(), { code: 'not_ready' })
  const down = await routeApp(t, new JtiReplayGuard({ clock: systemClock }), { getKey: () => Promise.reject(new TypeError('fetch failed')) })
  const unavailable = await inject(down.app, await sign())
  t.equal(unavailable.statusCode, 502)
  t.same(unavailable.json(), { code: 'provider_unavailable' })
})

t.test('redis: a token replayed to another replica is refused', async (t) => {
  const server = await startRedis(t)
  const a = new Redis(server.url)
  const b = new Redis(server.url)
  t.teardown(() => {
    a.disconnect()
    b.disconnect()
  })
  const one = await routeApp(t, new JtiReplayGuard({ redis: a, keys: KEYS, clock: systemClock }))
  const two = await routeApp(t, new JtiReplayGuard({ redis: b, keys: KEYS, clock: systemClock }))
  const token = await sign()
  t.equal((await inject(one.app, token)).statusCode, 200, 'replica one ends the sessions')
  const replay = await inject(two.app, token)
  t.equal(replay.statusCode, 400, 'replica two refuses the replay')
  t.equal(replay.json().error, 'invalid_request')
  t.equal(two.ended.selectors.length, 0)
  const keys = await a.keys('test:logout-jti:*')
  t.equal(keys.length, 1, 'one key per jti, digested')
  const ttl = await a.ttl(keys[0]!)
  t.ok(ttl > 0 && ttl <= 300 + 30, `kept until the token could no longer be accepted (${ttl} s)`)
})

t.test('redis unreachable: 503 session_store_unavailable, never a logout taken for done', async (t) => {
  const server = await startRedis(t)
  const redis = new Redis(server.url, { commandTimeout: 300, maxRetriesPerRequest: 0, enableOfflineQueue: false })
  t.teardown(() => redis.disconnect())
  await once(redis, 'ready')
  const { app, ended } = await routeApp(t, new JtiReplayGuard({ redis, keys: KEYS, clock: systemClock }))
  await server.stop()
  const res = await inject(app, await sign())
  t.equal(res.statusCode, 503)
  t.same(res.json(), { code: 'session_store_unavailable' })
  t.same(ended.selectors, [])
})
