import * as jose from 'jose'
import type { IntrospectionResponse } from 'openid-client'
import t from 'tap'
import {
  accessTokenViolation,
  BearerVerifier,
  INTROSPECTION_TTL_MS,
  introspectionViolation,
  MAX_CONCURRENT_INTROSPECTIONS,
  REFUSED_TTL_MS,
  resourceAudienceViolation,
  type BearerOptions,
} from '#src/oidc/bearer'
import { manualClock, type ManualClock } from '../fixtures/clock.ts'
import type { GatewayError } from '#src/contract/errors'

// The Bearer verifier on its own: a local key set, a fake introspection endpoint and a clock the
// test moves (the end-to-end cases are in test/e2e/proxy-auth.test.ts and bearer-introspection).

const ISSUER = 'https://idp.example.com'
const AUDIENCE = 'gateway'
/** The gateway's client id, the `aud` of its ID tokens; AUDIENCE is an API it also accepts. */
const CLIENT_ID = 'gateway-client'
const T0 = 1_800_000_000_000

interface Harness {
  verifier: BearerVerifier
  clock: ManualClock
  keyLookups: () => number
  introspections: string[]
  warnings: unknown[]
  debug: Array<Record<string, unknown>>
  sign: (claims?: jose.JWTPayload, alg?: string) => Promise<string>
}

async function harness(
  options: Partial<BearerOptions> & { introspection?: (token: string) => Promise<IntrospectionResponse | undefined> } = {},
): Promise<Harness> {
  const rsa = await jose.generateKeyPair('RS256', { extractable: true })
  const ec = await jose.generateKeyPair('ES256', { extractable: true })
  const local = jose.createLocalJWKSet({
    keys: [
      { ...(await jose.exportJWK(rsa.publicKey)), kid: 'k1' },
      { ...(await jose.exportJWK(ec.publicKey)), kid: 'k2' },
    ],
  })
  let lookups = 0
  const clock = manualClock(T0)
  const introspections: string[] = []
  const warnings: unknown[] = []
  const debug: Array<Record<string, unknown>> = []
  const { introspection, ...rest } = options
  const verifier = new BearerVerifier({
    issuer: ISSUER,
    clientId: CLIENT_ID,
    audiences: [AUDIENCE],
    algorithms: ['RS256', 'ES256'],
    clockToleranceSeconds: 0,
    getKey: (header, token) => {
      lookups++
      return local(header, token)
    },
    log: { warn: (obj: unknown) => void warnings.push(obj), debug: (obj: Record<string, unknown>) => void debug.push(obj) },
    clock,
    ...(introspection === undefined
      ? {}
      : {
          introspect: (token: string) => {
            introspections.push(token)
            return introspection(token)
          },
        }),
    ...rest,
  })
  const sign = (claims: jose.JWTPayload = {}, alg = 'RS256'): Promise<string> => {
    const now = Math.floor(clock.now() / 1000)
    return new jose.SignJWT({ iss: ISSUER, aud: AUDIENCE, sub: 'svc', iat: now, exp: now + 300, ...claims })
      .setProtectedHeader({ alg, kid: alg === 'ES256' ? 'k2' : 'k1' })
      .sign(alg === 'ES256' ? ec.privateKey : rsa.privateKey)
  }
  return { verifier, clock, keyLookups: () => lookups, introspections, warnings, debug, sign }
}

t.test('JWTs: verified results are cached until exp, in a bounded cache', async (t) => {
  const h = await harness({ cacheEntries: 3 })
  const tokens = await Promise.all([1, 2, 3, 4, 5].map((i) => h.sign({ sub: `svc-${i}` })))
  for (const token of tokens) t.equal((await h.verifier.verify(token))?.sub !== undefined, true)
  t.equal(h.keyLookups(), 5)
  t.same(h.verifier.cacheSizes, { accepted: 3, refused: 0 }, 'never more than cacheEntries')
  t.equal((await h.verifier.verify(tokens[4] ?? ''))?.sub, 'svc-5')
  t.equal(h.keyLookups(), 5, 'a cached token is not verified again')
  t.equal((await h.verifier.verify(tokens[0] ?? ''))?.sub, 'svc-1')
  t.equal(h.keyLookups(), 6, 'the oldest entry was evicted and is verified again')
})

t.test("JWTs: a cached token's claims are one frozen object, shared by its requests", async (t) => {
  const h = await harness()
  const token = await h.sign({ groups: ['staff'] })
  const first = await h.verifier.verify(token)
  t.equal(await h.verifier.verify(token), first, 'the same object on a cache hit')
  t.ok(Object.isFrozen(first) && Object.isFrozen(first?.groups), 'frozen to the leaves')
})

t.test('JWTs: a cached token is refused once it expires', async (t) => {
  const h = await harness()
  const token = await h.sign({ exp: Math.floor(T0 / 1000) + 60 })
  t.equal((await h.verifier.verify(token))?.sub, 'svc')
  h.clock.advance(59_000)
  t.equal((await h.verifier.verify(token))?.sub, 'svc', 'still valid')
  t.equal(h.keyLookups(), 1, 'from the cache')
  h.clock.advance(1_000)
  t.equal(await h.verifier.verify(token), undefined, 'expired: refused')
  t.same(h.verifier.cacheSizes, { accepted: 0, refused: 0 }, 'and dropped from the cache')
})

t.test('JWTs: only the configured algorithms', async (t) => {
  const h = await harness({ algorithms: ['ES256'] })
  t.equal(await h.verifier.verify(await h.sign()), undefined, 'RS256 is not configured')
  t.equal(h.keyLookups(), 0, 'refused before any key lookup')
  t.equal((await h.verifier.verify(await h.sign({}, 'ES256')))?.sub, 'svc')
  t.equal(h.introspections.length, 0)
})

t.test('JWTs are never introspected, even when introspection is on', async (t) => {
  const h = await harness({ introspection: async () => ({ active: true, sub: 'x', client_id: AUDIENCE }) })
  t.equal(await h.verifier.verify(await h.sign({ aud: 'another' })), undefined)
  t.same(h.introspections, [])
})

t.test('opaque tokens without introspection: refused, nothing asked', async (t) => {
  const h = await harness()
  t.equal(await h.verifier.verify('opaque-token'), undefined)
})

const active = (extra: Partial<IntrospectionResponse> = {}): IntrospectionResponse => ({
  active: true,
  sub: 'alice',
  client_id: AUDIENCE,
  iss: ISSUER,
  exp: Math.floor(T0 / 1000) + 3600,
  token_type: 'Bearer',
  ...extra,
})

t.test('introspection: identity from the response, cached at most 60 s', async (t) => {
  let response = active({ username: 'alice.a', email: 'alice@example.com', groups: ['staff'] })
  const h = await harness({ introspection: async () => response })
  const claims = await h.verifier.verify('opaque-1')
  t.same(claims, {
    sub: 'alice',
    client_id: AUDIENCE,
    iss: ISSUER,
    exp: Math.floor(T0 / 1000) + 3600,
    token_type: 'Bearer',
    username: 'alice.a',
    email: 'alice@example.com',
    groups: ['staff'],
    preferred_username: 'alice.a',
  })
  t.equal((await h.verifier.verify('opaque-1'))?.sub, 'alice')
  t.equal(h.introspections.length, 1, 'the second call is answered from the cache')
  response = { active: false }
  h.clock.advance(INTROSPECTION_TTL_MS - 1)
  t.equal((await h.verifier.verify('opaque-1'))?.sub, 'alice')
  h.clock.advance(1)
  t.equal(await h.verifier.verify('opaque-1'), undefined, 'after 60 s the provider is asked again (revoked meanwhile)')
  t.equal(h.introspections.length, 2)
})

t.test('introspection: cached no longer than exp', async (t) => {
  const h = await harness({ introspection: async () => active({ exp: Math.floor(T0 / 1000) + 10 }) })
  t.equal((await h.verifier.verify('opaque'))?.sub, 'alice')
  h.clock.advance(10_000)
  t.equal(await h.verifier.verify('opaque'), undefined, 'expired: asked again, and the answer is expired too')
  t.equal(h.introspections.length, 2)
})

t.test('introspection: refusals cached 10 s, bounded', async (t) => {
  const h = await harness({ introspection: async () => ({ active: false }), cacheEntries: 3 })
  t.equal(await h.verifier.verify('junk'), undefined)
  t.equal(await h.verifier.verify('junk'), undefined)
  t.equal(h.introspections.length, 1, 'a repeated junk token costs one request')
  h.clock.advance(REFUSED_TTL_MS)
  t.equal(await h.verifier.verify('junk'), undefined)
  t.equal(h.introspections.length, 2, 'asked again after 10 s')
  for (const token of ['j1', 'j2', 'j3', 'j4']) await h.verifier.verify(token)
  t.same(h.verifier.cacheSizes, { accepted: 0, refused: 3 })
})

t.test('introspection: a provider failure refuses the request, is logged, and not cached', async (t) => {
  let fail = true
  const h = await harness({
    introspection: async () => {
      if (fail) throw new TypeError('fetch failed')
      return active()
    },
  })
  t.equal(await h.verifier.verify('opaque'), undefined)
  t.equal(await h.verifier.verify('opaque'), undefined)
  t.equal(h.warnings.length, 1, 'logged once per interval')
  t.match(h.warnings[0], { err: { name: 'TypeError', message: 'fetch failed' } })
  t.notMatch(JSON.stringify(h.warnings), /opaque/, 'the token is not logged')
  fail = false
  t.equal((await h.verifier.verify('opaque'))?.sub, 'alice', 'the provider is back: accepted at once')
  t.equal(h.introspections.length, 3)
})

t.test('introspection: concurrent requests share one; at most 32 under way', async (t) => {
  const pending: Array<(response: IntrospectionResponse) => void> = []
  const h = await harness({ introspection: () => new Promise((resolve) => pending.push(resolve)) })
  const same = Array.from({ length: 10 }, () => h.verifier.verify('shared'))
  t.equal(h.introspections.length, 1, 'one request for ten concurrent uses of a token')
  const distinct = Array.from({ length: MAX_CONCURRENT_INTROSPECTIONS + 5 }, (_, i) => h.verifier.verify(`t-${i}`))
  t.equal(h.introspections.length, MAX_CONCURRENT_INTROSPECTIONS, 'the rest are turned away without a request')
  for (const resolve of pending) resolve(active())
  t.same(
    (await Promise.all(same)).map((c) => c?.sub),
    same.map(() => 'alice'),
  )
  const results = await Promise.allSettled(distinct)
  const busy = results.filter((r) => r.status === 'rejected').map((r) => (r.reason as GatewayError).code)
  t.same(busy, Array(6).fill('decision_unavailable'), 'over the cap: 503, not refused (the token may be valid)')
  t.equal(results.filter((r) => r.status === 'fulfilled' && r.value === undefined).length, 0, 'none refused')
  t.equal(h.warnings.length, 1, 'and logged')
})

t.test('introspection rules', async (t) => {
  const ctx = { issuer: ISSUER, audiences: [AUDIENCE, 'api'], clockToleranceSeconds: 30, now: T0 }
  const now = T0 / 1000
  const cases: Array<[string, IntrospectionResponse, string | undefined]> = [
    ['active, client_id accepted', active(), undefined],
    ['inactive', { active: false, sub: 'alice', client_id: AUDIENCE }, 'the token is not active'],
    ['no sub', active({ sub: undefined }), 'the response names no subject (sub)'],
    ['empty sub', active({ sub: '' }), 'the response names no subject (sub)'],
    ['exp in the past beyond the tolerance', active({ exp: now - 31 }), 'exp is in the past'],
    ['exp in the past within the tolerance', active({ exp: now - 29 }), undefined],
    ['exp not a number', active({ exp: 'soon' as unknown as number }), 'exp is in the past'],
    ['no exp', active({ exp: undefined }), undefined],
    ['nbf in the future', active({ nbf: now + 60 }), 'nbf is in the future'],
    ['nbf now', active({ nbf: now }), undefined],
    ['iat a year in the future', active({ iat: now + 365 * 24 * 3600 }), 'iat is in the future'],
    ['iat in the future within the tolerance', active({ iat: now + 29 }), undefined],
    ['iat not a number', active({ iat: 'now' as unknown as number }), 'iat is not a number'],
    ['iss of another issuer', active({ iss: 'https://evil.example.com' }), 'iss is another issuer'],
    ['no iss', active({ iss: undefined }), undefined],
    ['aud naming an accepted audience', active({ aud: 'api', client_id: 'other-client' }), undefined],
    ['aud list with an accepted audience', active({ aud: ['x', 'api'] }), undefined],
    ['aud naming others, even with client_id accepted', active({ aud: ['x', 'y'] }), 'aud names none of provider.audiences'],
    ['no aud, client_id of another client', active({ client_id: 'other-client' }), 'without aud, client_id must be one of provider.audiences'],
    ['neither aud nor client_id', active({ client_id: undefined }), 'without aud, client_id must be one of provider.audiences'],
    ['token_type access_token (Duende)', active({ token_type: 'access_token' }), undefined],
    ['token_type bearer lower-case', active({ token_type: 'bearer' }), undefined],
    ['token_type refresh_token', active({ token_type: 'refresh_token' }), 'token_type is not Bearer'],
    ['token_type DPoP', active({ token_type: 'DPoP' }), 'token_type is not Bearer'],
    ['token_use refresh_token (Hydra)', active({ token_use: 'refresh_token' }), 'token_use is not access_token'],
    ['token_use access_token', active({ token_use: 'access_token' }), undefined],
    [
      'DPoP-bound (cnf.jkt)',
      active({ cnf: { jkt: 'abc' } }),
      'the token is sender-constrained (cnf): it needs a proof of possession, which a Bearer token does not carry',
    ],
    [
      'mTLS-bound (cnf x5t#S256)',
      active({ cnf: { 'x5t#S256': 'abc' } }),
      'the token is sender-constrained (cnf): it needs a proof of possession, which a Bearer token does not carry',
    ],
  ]
  for (const [name, response, expected] of cases) t.equal(introspectionViolation(response, ctx), expected, name)
})

t.test('JWTs: sub must be a non-empty string', async (t) => {
  const h = await harness()
  for (const sub of ['', 123, 0, true, null, ['svc'], { id: 'svc' }]) {
    t.equal(await h.verifier.verify(await h.sign({ sub: sub as string })), undefined, JSON.stringify(sub))
  }
  t.match(h.debug.at(-1), { reason: 'sub is not a non-empty string' }, 'the log says why')
  t.equal(h.verifier.cacheSizes.accepted, 0)
  t.equal((await h.verifier.verify(await h.sign({ sub: 'svc' })))?.sub, 'svc', 'control')
})

// An ID token (or another JWT the provider signs with the same keys) is never
// a Bearer access token. The shapes below are those the providers document; aud, typ and the
// distinguishing claims are what matter, the rest is trimmed.
t.test('JWTs: ID tokens are refused, access tokens accepted, in the shapes of Keycloak, Entra ID, Auth0 and Okta', async (t) => {
  const rsa = await jose.generateKeyPair('RS256')
  const local = jose.createLocalJWKSet({ keys: [{ ...(await jose.exportJWK(rsa.publicKey)), kid: 'k1' }] })
  const debug: Array<Record<string, unknown>> = []
  const verifier = new BearerVerifier({
    issuer: ISSUER,
    clientId: CLIENT_ID,
    // The default (provider.audiences empty) is [clientId]; APIs are added by the operator.
    audiences: [CLIENT_ID, 'api://default', 'https://api.example.com'],
    algorithms: ['RS256'],
    clockToleranceSeconds: 0,
    getKey: local,
    log: { warn: () => undefined, debug: (obj: Record<string, unknown>) => void debug.push(obj) },
    clock: manualClock(T0),
  })
  const now = Math.floor(T0 / 1000)
  const sign = (claims: jose.JWTPayload, typ?: string): Promise<string> =>
    new jose.SignJWT({ iss: ISSUER, sub: 'user-1', iat: now, exp: now + 300, ...claims })
      .setProtectedHeader({ alg: 'RS256', kid: 'k1', ...(typ === undefined ? {} : { typ }) })
      .sign(rsa.privateKey)

  const idTokens: Array<[string, jose.JWTPayload, string?]> = [
    ['Keycloak ID token', { typ: 'ID', aud: CLIENT_ID, azp: CLIENT_ID, nonce: 'n', at_hash: 'h', sid: 's', auth_time: now }, 'JWT'],
    ['Keycloak ID token, no nonce, no at_hash', { typ: 'ID', aud: CLIENT_ID, azp: CLIENT_ID, sid: 's' }, 'JWT'],
    ['Keycloak ID token with a scope claim', { typ: 'ID', aud: CLIENT_ID, scope: 'openid' }, 'JWT'],
    ['Keycloak refresh token', { typ: 'Refresh', aud: ISSUER, azp: CLIENT_ID, scope: 'openid' }, 'JWT'],
    ['Keycloak logout token', { typ: 'Logout', aud: CLIENT_ID, events: {} }],
    ['Entra ID v2 ID token', { aud: CLIENT_ID, ver: '2.0', tid: 't', oid: 'o', nonce: 'n', aio: 'a', rh: 'r', uti: 'u' }, 'JWT'],
    ['Entra ID v2 ID token, no nonce (refresh)', { aud: CLIENT_ID, ver: '2.0', tid: 't', oid: 'o', aio: 'a' }, 'JWT'],
    ['Entra ID ID token with app roles, no nonce', { aud: CLIENT_ID, ver: '2.0', roles: ['Admin'], oid: 'o' }, 'JWT'],
    ['Auth0 ID token', { aud: CLIENT_ID, nonce: 'n', sid: 's', nickname: 'u' }],
    ['Auth0 ID token, no nonce', { aud: CLIENT_ID, sid: 's', nickname: 'u' }],
    ['Okta ID token', { aud: CLIENT_ID, amr: ['pwd'], idp: 'i', auth_time: now, at_hash: 'h', nonce: 'n', ver: 1 }],
    ['Okta ID token, no nonce, no at_hash', { aud: CLIENT_ID, amr: ['pwd'], idp: 'i', auth_time: now, ver: 1 }],
    ['an ID token with aud as a one-element list', { aud: [CLIENT_ID], auth_time: now }],
    ['an ID token for several audiences, with a nonce', { aud: [CLIENT_ID, 'https://api.example.com'], azp: CLIENT_ID, nonce: 'n' }],
    ['an ID token for several audiences, no nonce', { aud: [CLIENT_ID, 'https://api.example.com'], azp: CLIENT_ID, auth_time: now }, 'JWT'],
    ['an ID token with c_hash for an API audience', { aud: 'https://api.example.com', c_hash: 'h' }],
    ['a back-channel logout token', { aud: CLIENT_ID, events: { 'http://schemas.openid.net/event/backchannel-logout': {} }, jti: 'j' }, 'logout+jwt'],
    ['an ID token typed as such', { aud: CLIENT_ID, scope: 'openid' }, 'id_token+jwt'],
  ]
  for (const [name, claims, typ] of idTokens) {
    const before = debug.length
    t.equal(await verifier.verify(await sign(claims, typ)), undefined, `refused: ${name}`)
    t.equal(debug.length, before + 1, `${name}: the log says why`)
  }
  t.equal(verifier.cacheSizes.accepted, 0)

  const accessTokens: Array<[string, jose.JWTPayload, string?]> = [
    ['Keycloak access token (audience mapper)', { typ: 'Bearer', aud: [CLIENT_ID, 'account'], azp: CLIENT_ID, scope: 'openid email' }, 'JWT'],
    ['Keycloak access token for the client alone', { typ: 'Bearer', aud: CLIENT_ID, azp: CLIENT_ID, sid: 's' }, 'JWT'],
    ['Keycloak before 24: access token with the nonce', { typ: 'Bearer', aud: CLIENT_ID, azp: CLIENT_ID, nonce: 'n', scope: 'openid' }, 'JWT'],
    ['Entra ID v2 access token for the own API', { aud: CLIENT_ID, scp: 'access_as_user', azp: 'spa', azpacr: '0', ver: '2.0' }, 'JWT'],
    ['Entra ID app-only access token', { aud: CLIENT_ID, roles: ['Task.Read'], azp: 'daemon', azpacr: '1', idtyp: 'app' }, 'JWT'],
    ['Entra ID v1 access token', { aud: CLIENT_ID, scp: 'user_impersonation', appid: 'spa', appidacr: '0', ver: '1.0' }, 'JWT'],
    ['Auth0 access token for an API', { aud: ['https://api.example.com', 'https://tenant.auth0.com/userinfo'], azp: CLIENT_ID, scope: 'openid profile' }],
    ['Auth0 client-credentials token without scope', { aud: 'https://api.example.com', azp: 'm2m', gty: 'client-credentials' }],
    ['Auth0 RFC 9068 profile', { aud: 'https://api.example.com', client_id: CLIENT_ID, scope: 'read' }, 'at+jwt'],
    ['Okta access token', { aud: 'api://default', cid: CLIENT_ID, scp: ['openid'], uid: 'u', ver: 1 }],
    ['RFC 9068 for the client alone', { aud: CLIENT_ID }, 'application/at+jwt'],
    ['RFC 9068 with client_id', { aud: CLIENT_ID, client_id: 'spa' }, 'AT+JWT'],
  ]
  for (const [name, claims, typ] of accessTokens) {
    t.equal((await verifier.verify(await sign(claims, typ)))?.sub, 'user-1', `accepted: ${name}`)
  }
})

t.test('accessTokenViolation names the reason', async (t) => {
  const h = { alg: 'RS256' }
  t.equal(accessTokenViolation({ ...h, typ: 'logout+jwt' }, { aud: 'x' }, 'c'), 'the typ header is not an access token type')
  t.equal(accessTokenViolation({ ...h, typ: 42 as unknown as string }, { aud: 'x' }, 'c'), 'the typ header is not an access token type')
  t.equal(accessTokenViolation(h, { typ: 'ID', aud: 'x' }, 'c'), 'the typ claim is not Bearer (a Keycloak ID, refresh or logout token)')
  t.equal(accessTokenViolation(h, { aud: 'x', at_hash: 'a' }, 'c'), 'it carries at_hash, an ID token claim')
  t.equal(accessTokenViolation(h, { aud: 'x', s_hash: 'a' }, 'c'), 'it carries s_hash, an ID token claim')
  t.equal(
    accessTokenViolation(h, { aud: 'c' }, 'c'),
    'it is shaped like an ID token (aud names the client id, or a nonce) and nothing marks it as an access token',
  )
  t.equal(accessTokenViolation(h, { aud: ['x', 'y'], nonce: 'n' }, 'c'), accessTokenViolation(h, { aud: 'c' }, 'c'))
  t.equal(
    accessTokenViolation(h, { aud: ['c', 'api'] }, 'c'),
    accessTokenViolation(h, { aud: 'c' }, 'c'),
    'an API audience next to the client, no nonce: an ID token for several audiences',
  )
  t.equal(accessTokenViolation(h, { aud: ['c', 'api'], scope: 'read' }, 'c'), undefined, 'the same with a scope')
  t.equal(accessTokenViolation({ ...h, typ: 'JWT' }, { aud: 'api' }, 'c'), undefined)
})

// tokenAudience: resource (RFC 8707 2): verify's `resource` replaces provider.audiences, and what
// was accepted for one audience is never a cache hit for another.
const RESOURCE = 'https://gw.example/mcp'
const OTHER_RESOURCE = 'https://gw.example/other'

t.test('resourceAudienceViolation: exactly the resource, a string or a list of it alone', async (t) => {
  t.equal(resourceAudienceViolation(RESOURCE, RESOURCE), undefined)
  t.equal(resourceAudienceViolation([RESOURCE], RESOURCE), undefined)
  t.ok(resourceAudienceViolation([RESOURCE, OTHER_RESOURCE], RESOURCE), 'another audience could replay it here')
  t.ok(resourceAudienceViolation(OTHER_RESOURCE, RESOURCE))
  t.ok(resourceAudienceViolation(`${RESOURCE}/`, RESOURCE), 'the path as published: no trailing slash added or dropped')
  t.equal(
    resourceAudienceViolation('HTTPS://GW.Example/mcp', RESOURCE),
    undefined,
    'an uppercase scheme and host are the same resource (MCP "Canonical Server URI")',
  )
  t.ok(resourceAudienceViolation('https://gw.example/MCP', RESOURCE), 'the path is compared exactly')
  t.ok(resourceAudienceViolation('https://gw.example.evil/mcp', RESOURCE))
  t.ok(resourceAudienceViolation(undefined, RESOURCE))
  t.ok(resourceAudienceViolation([], RESOURCE))
  t.ok(resourceAudienceViolation(AUDIENCE, RESOURCE), "the provider's audience")
})

t.test('JWTs for a resource: its audience alone, and the cache keyed by audience', async (t) => {
  const h = await harness()
  const forResource = await h.sign({ aud: RESOURCE, scope: 'mcp:tools' })
  t.equal(await h.verifier.verify(forResource), undefined, 'not one of provider.audiences: refused where they are asked')
  t.equal((await h.verifier.verify(forResource, undefined, RESOURCE))?.sub, 'svc', 'accepted for its resource')
  t.equal((await h.verifier.verify(forResource, undefined, RESOURCE))?.sub, 'svc', 'again, from the cache')
  t.equal(await h.verifier.verify(forResource, undefined, OTHER_RESOURCE), undefined, 'accepted (and cached) for one resource: refused for another')
  t.equal(await h.verifier.verify(forResource), undefined, "and for the provider's audiences")
  const forProvider = await h.sign({ scope: 'read' })
  t.equal((await h.verifier.verify(forProvider))?.sub, 'svc', "a token for the provider's audience, accepted there (and cached)")
  t.equal(await h.verifier.verify(forProvider, undefined, RESOURCE), undefined, 'refused at the resource')
  t.equal(await h.verifier.verify(await h.sign({ aud: [RESOURCE, OTHER_RESOURCE] }), undefined, RESOURCE), undefined, 'two resources: refused')
})

t.test('introspection for a resource: aud exactly the resource; client_id alone vouches for nothing', async (t) => {
  const responses: Record<string, IntrospectionResponse> = {
    own: { active: true, sub: 'u', aud: RESOURCE },
    both: { active: true, sub: 'u', aud: [RESOURCE, AUDIENCE] },
    client: { active: true, sub: 'u', client_id: AUDIENCE },
    provider: { active: true, sub: 'u', aud: AUDIENCE },
  }
  const h = await harness({ introspection: async (token) => responses[token] })
  t.equal((await h.verifier.verify('own', undefined, RESOURCE))?.sub, 'u')
  t.equal(await h.verifier.verify('own', undefined, OTHER_RESOURCE), undefined, 'accepted for one resource, refused for another')
  t.equal(await h.verifier.verify('own'), undefined, "refused for the provider's audiences")
  t.equal(await h.verifier.verify('both', undefined, RESOURCE), undefined)
  t.equal(await h.verifier.verify('client', undefined, RESOURCE), undefined)
  t.equal(await h.verifier.verify('provider', undefined, RESOURCE), undefined)
  t.equal((await h.verifier.verify('provider'))?.sub, 'u', "the provider's audience where it is asked")
  t.equal(
    introspectionViolation(responses.both!, { issuer: ISSUER, audiences: [RESOURCE], clockToleranceSeconds: 0, now: T0, resource: RESOURCE }),
    "aud is not exactly this upstream's resource identifier",
  )
})
