import * as jose from 'jose'
import type { IntrospectionResponse } from 'openid-client'
import t from 'tap'
import {
  BearerVerifier,
  INTROSPECTION_TTL_MS,
  introspectionViolation,
  MAX_CONCURRENT_INTROSPECTIONS,
  REFUSED_TTL_MS,
  type BearerOptions,
} from '../../src/oidc/bearer.js'

// The Bearer verifier on its own: a local key set, a fake introspection endpoint and a clock the
// test moves (the end-to-end cases are in test/e2e/proxy-auth.test.ts and bearer-introspection).

const ISSUER = 'https://idp.example.com'
const AUDIENCE = 'gateway'
const T0 = 1_800_000_000_000

interface Harness {
  verifier: BearerVerifier
  clock: { now: number }
  keyLookups: () => number
  introspections: string[]
  warnings: unknown[]
  sign: (claims?: jose.JWTPayload, alg?: string) => Promise<string>
}

async function harness(options: Partial<BearerOptions> & { introspection?: (token: string) => Promise<IntrospectionResponse | undefined> } = {}): Promise<Harness> {
  const rsa = await jose.generateKeyPair('RS256', { extractable: true })
  const ec = await jose.generateKeyPair('ES256', { extractable: true })
  const local = jose.createLocalJWKSet({
    keys: [
      { ...(await jose.exportJWK(rsa.publicKey)), kid: 'k1' },
      { ...(await jose.exportJWK(ec.publicKey)), kid: 'k2' },
    ],
  })
  let lookups = 0
  const clock = { now: T0 }
  const introspections: string[] = []
  const warnings: unknown[] = []
  const { introspection, ...rest } = options
  const verifier = new BearerVerifier({
    issuer: ISSUER,
    audiences: [AUDIENCE],
    algorithms: ['RS256', 'ES256'],
    clockToleranceSeconds: 0,
    getKey: (header, token) => {
      lookups++
      return local(header, token)
    },
    log: { warn: (obj: unknown) => void warnings.push(obj) },
    now: () => clock.now,
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
    const now = Math.floor(clock.now / 1000)
    return new jose.SignJWT({ iss: ISSUER, aud: AUDIENCE, sub: 'svc', iat: now, exp: now + 300, ...claims })
      .setProtectedHeader({ alg, kid: alg === 'ES256' ? 'k2' : 'k1' })
      .sign(alg === 'ES256' ? ec.privateKey : rsa.privateKey)
  }
  return { verifier, clock, keyLookups: () => lookups, introspections, warnings, sign }
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

t.test('JWTs: a cached token is refused once it expires', async (t) => {
  const h = await harness()
  const token = await h.sign({ exp: Math.floor(T0 / 1000) + 60 })
  t.equal((await h.verifier.verify(token))?.sub, 'svc')
  h.clock.now = T0 + 59_000
  t.equal((await h.verifier.verify(token))?.sub, 'svc', 'still valid')
  t.equal(h.keyLookups(), 1, 'from the cache')
  h.clock.now = T0 + 60_000
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
  h.clock.now = T0 + INTROSPECTION_TTL_MS - 1
  t.equal((await h.verifier.verify('opaque-1'))?.sub, 'alice')
  h.clock.now = T0 + INTROSPECTION_TTL_MS
  t.equal(await h.verifier.verify('opaque-1'), undefined, 'after 60 s the provider is asked again (revoked meanwhile)')
  t.equal(h.introspections.length, 2)
})

t.test('introspection: cached no longer than exp', async (t) => {
  const h = await harness({ introspection: async () => active({ exp: Math.floor(T0 / 1000) + 10 }) })
  t.equal((await h.verifier.verify('opaque'))?.sub, 'alice')
  h.clock.now = T0 + 10_000
  t.equal(await h.verifier.verify('opaque'), undefined, 'expired: asked again, and the answer is expired too')
  t.equal(h.introspections.length, 2)
})

t.test('introspection: refusals cached 10 s, bounded', async (t) => {
  const h = await harness({ introspection: async () => ({ active: false }), cacheEntries: 3 })
  t.equal(await h.verifier.verify('junk'), undefined)
  t.equal(await h.verifier.verify('junk'), undefined)
  t.equal(h.introspections.length, 1, 'a repeated junk token costs one request')
  h.clock.now = T0 + REFUSED_TTL_MS
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
  t.equal(h.introspections.length, MAX_CONCURRENT_INTROSPECTIONS, 'the rest are refused without a request')
  for (const resolve of pending) resolve(active())
  t.same(
    (await Promise.all(same)).map((c) => c?.sub),
    same.map(() => 'alice'),
  )
  const results = await Promise.all(distinct)
  t.equal(results.filter((c) => c === undefined).length, 6, 'over the cap: refused')
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
    ['DPoP-bound (cnf.jkt)', active({ cnf: { jkt: 'abc' } }), 'the token is sender-constrained (cnf)'],
    ['mTLS-bound (cnf x5t#S256)', active({ cnf: { 'x5t#S256': 'abc' } }), 'the token is sender-constrained (cnf)'],
  ]
  for (const [name, response, expected] of cases) t.equal(introspectionViolation(response, ctx), expected, name)
})
