import * as jose from 'jose'
import t, { type Test } from 'tap'
import { BACKCHANNEL_LOGOUT_EVENT, LOGOUT_TOKEN_MAX_AGE_SECONDS, LogoutTokenError, verifyLogoutToken, type LogoutTokenContext } from '#src/oidc/logout-token'
import { manualClock } from '../fixtures/clock.ts'

// Every rule of Back-Channel Logout 1.0 section 2.6, one refused token each, signed with a local key.

const ISSUER = 'https://op.example.com'
const CLIENT_ID = 'gateway'
const NOW = Math.floor(Date.now() / 1000)

const { privateKey, publicKey } = await jose.generateKeyPair('RS256', { extractable: true })
const other = await jose.generateKeyPair('RS256')
const ec = await jose.generateKeyPair('ES256')
const publicPem = await jose.exportSPKI(publicKey)

const ctx: LogoutTokenContext = {
  issuer: ISSUER,
  clientId: CLIENT_ID,
  algorithms: ['RS256'],
  clockToleranceSeconds: 30,
  getKey: async () => publicKey,
  clock: manualClock(NOW * 1000),
}

const CLAIMS = {
  iss: ISSUER,
  aud: CLIENT_ID,
  iat: NOW,
  exp: NOW + 120,
  jti: 'jti-1',
  sid: 'sid-1',
  sub: 'alice',
  events: { [BACKCHANNEL_LOGOUT_EVENT]: {} },
}

async function sign(claims: Record<string, unknown>, header: Record<string, unknown> = {}, key: jose.CryptoKey | Uint8Array = privateKey): Promise<string> {
  const payload: Record<string, unknown> = { ...CLAIMS, ...claims }
  for (const [name, value] of Object.entries(payload)) if (value === undefined) delete payload[name]
  return new jose.SignJWT(payload).setProtectedHeader({ alg: 'RS256', typ: 'logout+jwt', ...header } as jose.JWTHeaderParameters).sign(key)
}

async function refused(t: Test, token: string, check: string, context: LogoutTokenContext = ctx): Promise<void> {
  const outcome = await verifyLogoutToken(token, context).then(
    () => 'accepted',
    (e: unknown) => (e instanceof LogoutTokenError ? e.check : String(e)),
  )
  t.equal(outcome, check, `refused (${check})`)
}

t.test('a valid logout token gives its jti, selector and how long it must be remembered', async (t) => {
  const token = await verifyLogoutToken(await sign({}), ctx)
  t.same(token, { jti: 'jti-1', selector: { sid: 'sid-1', sub: 'alice' }, acceptableUntil: NOW + 120 + 30 })
  const sidOnly = await verifyLogoutToken(await sign({ sub: undefined }), ctx)
  t.same(sidOnly.selector, { sid: 'sid-1' })
  const subOnly = await verifyLogoutToken(await sign({ sid: undefined }), ctx)
  t.same(subOnly.selector, { sub: 'alice' })
  // aud as an array containing the client; typ absent, JWT or application/logout+jwt.
  t.ok(await verifyLogoutToken(await sign({ aud: ['other', CLIENT_ID] }), ctx))
  t.ok(await verifyLogoutToken(await sign({}, { typ: undefined }), ctx))
  t.ok(await verifyLogoutToken(await sign({}, { typ: 'JWT' }), ctx))
  t.ok(await verifyLogoutToken(await sign({}, { typ: 'application/logout+jwt' }), ctx))
  // Without exp (2.4 does not require one) it is bounded by iat and the maximum age.
  const noExp = await verifyLogoutToken(await sign({ exp: undefined }), ctx)
  t.equal(noExp.acceptableUntil, NOW + LOGOUT_TOKEN_MAX_AGE_SECONDS + 30)
  // Other members of events, and unknown claims, are ignored (2.4).
  t.ok(await verifyLogoutToken(await sign({ events: { [BACKCHANNEL_LOGOUT_EVENT]: {}, 'urn:other': 1 }, extra: true }), ctx))
})

t.test('malformed: not a JWT', async (t) => {
  await refused(t, 'not-a-jwt', 'malformed')
  await refused(t, 'a.b.c', 'malformed')
})

t.test('alg: never none, never HMAC, only the provider algorithms', async (t) => {
  const unsecured = new jose.UnsecuredJWT({ ...CLAIMS }).encode()
  await refused(t, unsecured, 'alg')
  // The public key as an HMAC secret: the algorithm confusion attack.
  const hmac = await new jose.SignJWT({ ...CLAIMS }).setProtectedHeader({ alg: 'HS256', typ: 'logout+jwt' }).sign(new TextEncoder().encode(publicPem))
  await refused(t, hmac, 'alg')
  // Asymmetric, but not what this provider signs ID tokens with.
  const es = await new jose.SignJWT({ ...CLAIMS }).setProtectedHeader({ alg: 'ES256', typ: 'logout+jwt' }).sign(ec.privateKey)
  await refused(t, es, 'alg')
})

t.test('typ: a token typed as something else is not a logout token', async (t) => {
  await refused(t, await sign({}, { typ: 'at+jwt' }), 'typ')
  await refused(t, await sign({}, { typ: 'secevent+jwt' }), 'typ')
})

t.test("signature: the provider's key, and an intact token", async (t) => {
  await refused(t, await sign({}, {}, other.privateKey), 'signature')
  const token = await sign({})
  const [h, p, s] = token.split('.') as [string, string, string]
  const forged = Buffer.from(JSON.stringify({ ...CLAIMS, sub: 'mallory' })).toString('base64url')
  await refused(t, `${h}.${forged}.${s}`, 'signature')
  t.ok(p)
  // A key that cannot be found (unknown kid, after the keys' own refetch) is a signature failure.
  await refused(t, token, 'signature', {
    ...ctx,
    getKey: async () => {
      throw new jose.errors.JWKSNoMatchingKey()
    },
  })
})

t.test('iss is the issuer', async (t) => {
  await refused(t, await sign({ iss: 'https://evil.example.com' }), 'iss')
  await refused(t, await sign({ iss: undefined }), 'iss')
})

t.test('aud contains the client id', async (t) => {
  await refused(t, await sign({ aud: 'another-client' }), 'aud')
  await refused(t, await sign({ aud: ['a', 'b'] }), 'aud')
  await refused(t, await sign({ aud: undefined }), 'aud')
})

t.test('iat: present, not in the future, not older than the maximum age (with the tolerance)', async (t) => {
  await refused(t, await sign({ iat: undefined }), 'iat')
  await refused(t, await sign({ iat: 'yesterday' }), 'iat')
  await refused(t, await sign({ iat: NOW + 31 }), 'iat')
  t.ok(await verifyLogoutToken(await sign({ iat: NOW + 29 }), ctx), 'within the tolerance')
  await refused(t, await sign({ iat: NOW - LOGOUT_TOKEN_MAX_AGE_SECONDS - 31, exp: undefined }), 'iat')
  // An exp far ahead does not make an old token acceptable.
  await refused(t, await sign({ iat: NOW - LOGOUT_TOKEN_MAX_AGE_SECONDS - 31, exp: NOW + 3600 }), 'iat')
  t.ok(await verifyLogoutToken(await sign({ iat: NOW - LOGOUT_TOKEN_MAX_AGE_SECONDS, exp: undefined }), ctx), 'at the maximum age')
})

t.test('exp, when present, is not past (with the tolerance)', async (t) => {
  await refused(t, await sign({ iat: NOW - 100, exp: NOW - 31 }), 'exp')
  t.ok(await verifyLogoutToken(await sign({ iat: NOW - 100, exp: NOW - 29 }), ctx), 'within the tolerance')
  await refused(t, await sign({ exp: 'soon' }), 'exp')
})

t.test('other claims jose checks (nbf) make the token malformed', async (t) => {
  await refused(t, await sign({ nbf: NOW + 600 }), 'malformed')
})

t.test('jti is present', async (t) => {
  await refused(t, await sign({ jti: undefined }), 'jti')
  await refused(t, await sign({ jti: '' }), 'jti')
  await refused(t, await sign({ jti: 42 }), 'jti')
})

t.test('events names the back-channel logout event, as an object', async (t) => {
  await refused(t, await sign({ events: undefined }), 'events')
  await refused(t, await sign({ events: 'logout' }), 'events')
  await refused(t, await sign({ events: {} }), 'events')
  await refused(t, await sign({ events: { [BACKCHANNEL_LOGOUT_EVENT]: 'yes' } }), 'events')
  await refused(t, await sign({ events: { [BACKCHANNEL_LOGOUT_EVENT]: null } }), 'events')
  await refused(t, await sign({ events: { [BACKCHANNEL_LOGOUT_EVENT]: [] } }), 'events')
  await refused(t, await sign({ events: [BACKCHANNEL_LOGOUT_EVENT] }), 'events')
})

t.test('sid and/or sub, non-empty strings', async (t) => {
  await refused(t, await sign({ sid: undefined, sub: undefined }), 'sid_sub')
  await refused(t, await sign({ sid: '', sub: undefined }), 'sid_sub')
  await refused(t, await sign({ sid: undefined, sub: '' }), 'sid_sub')
  await refused(t, await sign({ sid: 7 }), 'sid_sub')
  await refused(t, await sign({ sub: ['alice'] }), 'sid_sub')
})

t.test('no nonce: an ID token of a sign-in is never a logout token', async (t) => {
  await refused(t, await sign({ nonce: 'n-0S6_WzA2Mj' }), 'nonce')
  // An ID token (no events) is refused for its missing events claim already.
  await refused(t, await sign({ events: undefined, nonce: 'n' }, { typ: 'JWT' }), 'events')
})

t.test('errors that are not the token’s fault propagate unchanged', async (t) => {
  const outage = new Error('jwks unreachable')
  const err = await verifyLogoutToken(await sign({}), { ...ctx, getKey: async () => Promise.reject(outage) }).catch((e: unknown) => e)
  t.equal(err, outage)
})
