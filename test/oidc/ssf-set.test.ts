import * as jose from 'jose'
import t, { type Test } from 'tap'
import { SET_MAX_AGE_SECONDS, SetError, verifySet, type SetContext, type SetErrorCode } from '#src/oidc/ssf-set'
import { manualClock } from '../fixtures/clock.ts'

// Every rule of the SET profile (RFC 8417, SSF 1.0 section 4) that ssf-set.ts enforces, one
// refused SET each, and the RFC 8935 section 2.4 error code each maps to.

const ISSUER = 'https://tx.example.com'
const AUDIENCE = 'gateway'
const NOW = Math.floor(Date.now() / 1000)
const EVENT = 'https://schemas.openid.net/secevent/caep/event-type/session-revoked'

const { privateKey, publicKey } = await jose.generateKeyPair('ES256', { extractable: true })
const other = await jose.generateKeyPair('ES256')
const publicPem = await jose.exportSPKI(publicKey)

const ctx: SetContext = {
  issuer: ISSUER,
  audience: AUDIENCE,
  getKey: async () => publicKey,
  clockToleranceSeconds: 30,
  clock: manualClock(NOW * 1000),
}

const CLAIMS = {
  iss: ISSUER,
  aud: AUDIENCE,
  iat: NOW,
  jti: 'jti-1',
  sub_id: { format: 'opaque', id: 'alice' },
  events: { [EVENT]: { event_timestamp: NOW } },
}

async function sign(claims: Record<string, unknown>, header: Record<string, unknown> = {}, key: jose.CryptoKey | Uint8Array = privateKey): Promise<string> {
  const payload: Record<string, unknown> = { ...CLAIMS, ...claims }
  for (const [name, value] of Object.entries(payload)) if (value === undefined) delete payload[name]
  return new jose.SignJWT(payload).setProtectedHeader({ alg: 'ES256', typ: 'secevent+jwt', ...header } as jose.JWTHeaderParameters).sign(key)
}

async function refused(t: Test, token: string, code: SetErrorCode, context: SetContext = ctx): Promise<void> {
  const outcome = await verifySet(token, context).then(
    () => 'accepted',
    (e: unknown) => (e instanceof SetError ? e.code : String(e)),
  )
  t.equal(outcome, code, `refused (${code})`)
}

t.test('a valid SET gives its one event, its sub_id and how long its jti must be remembered', async (t) => {
  const set = await verifySet(await sign({}), ctx)
  t.same(set, {
    jti: 'jti-1',
    type: EVENT,
    event: { event_timestamp: NOW },
    subId: { format: 'opaque', id: 'alice' },
    acceptableUntil: NOW + SET_MAX_AGE_SECONDS + 30,
    issuedAt: NOW,
  })
  // exp, when earlier than the maximum age, bounds it.
  t.equal((await verifySet(await sign({ exp: NOW + 60 }), ctx)).acceptableUntil, NOW + 60 + 30)
  // aud as an array naming the gateway; typ with its application/ prefix (RFC 8417 2.3).
  t.ok(await verifySet(await sign({ aud: ['other', AUDIENCE] }), ctx))
  t.ok(await verifySet(await sign({}, { typ: 'application/secevent+jwt' }), ctx))
  // No sub_id: the event's own subject is judged later (ssf-event.ts).
  t.equal((await verifySet(await sign({ sub_id: undefined }), ctx)).subId, undefined)
})

t.test('not a JWT: invalid_request', async (t) => {
  await refused(t, 'not-a-jwt', 'invalid_request')
  await refused(t, 'a.b.c', 'invalid_request')
})

t.test('typ: secevent+jwt, else invalid_request (a SET never passes as another JWT)', async (t) => {
  await refused(t, await sign({}, { typ: undefined }), 'invalid_request')
  await refused(t, await sign({}, { typ: 'JWT' }), 'invalid_request')
  await refused(t, await sign({}, { typ: 'logout+jwt' }), 'invalid_request')
})

t.test('alg: never none, never HMAC: invalid_key, before any key is looked up', async (t) => {
  let lookups = 0
  const counting: SetContext = {
    ...ctx,
    getKey: async () => {
      lookups++
      return publicKey
    },
  }
  const unsecured = new jose.UnsecuredJWT({ ...CLAIMS }).encode()
  await refused(t, unsecured, 'invalid_key', counting)
  // The public key as an HMAC secret: the algorithm confusion attack.
  const hmac = await new jose.SignJWT({ ...CLAIMS }).setProtectedHeader({ alg: 'HS256', typ: 'secevent+jwt' }).sign(new TextEncoder().encode(publicPem))
  await refused(t, hmac, 'invalid_key', counting)
  t.equal(lookups, 0, 'no key lookup (and so no JWKS refetch) for a refused algorithm')
})

t.test("signature: the transmitter's key, an intact token: invalid_key", async (t) => {
  await refused(t, await sign({}, {}, other.privateKey), 'invalid_key')
  const [h, , s] = (await sign({})).split('.') as [string, string, string]
  const forged = Buffer.from(JSON.stringify({ ...CLAIMS, sub_id: { format: 'opaque', id: 'bob' } })).toString('base64url')
  await refused(t, `${h}.${forged}.${s}`, 'invalid_key')
  await refused(t, await sign({}), 'invalid_key', {
    ...ctx,
    getKey: async () => {
      throw new jose.errors.JWKSNoMatchingKey()
    },
  })
})

t.test("iss is the transmitter's issuer: invalid_issuer", async (t) => {
  await refused(t, await sign({ iss: 'https://evil.example.com' }), 'invalid_issuer')
  await refused(t, await sign({ iss: undefined }), 'invalid_issuer')
})

t.test('aud names the gateway: invalid_audience', async (t) => {
  await refused(t, await sign({ aud: 'someone-else' }), 'invalid_audience')
  await refused(t, await sign({ aud: ['a', 'b'] }), 'invalid_audience')
  await refused(t, await sign({ aud: undefined }), 'invalid_audience')
})

t.test('iat: present, not in the future, at most 24 hours old (with the tolerance): invalid_request', async (t) => {
  await refused(t, await sign({ iat: undefined }), 'invalid_request')
  await refused(t, await sign({ iat: NOW + 31 }), 'invalid_request')
  t.ok(await verifySet(await sign({ iat: NOW + 29 }), ctx), 'within the tolerance')
  await refused(t, await sign({ iat: NOW - SET_MAX_AGE_SECONDS - 31 }), 'invalid_request')
  await refused(t, await sign({ iat: NOW - SET_MAX_AGE_SECONDS - 31, exp: NOW + 3600 }), 'invalid_request')
  t.ok(await verifySet(await sign({ iat: NOW - SET_MAX_AGE_SECONDS }), ctx), 'at the maximum age')
})

t.test('exp, when present, is not past: invalid_request', async (t) => {
  await refused(t, await sign({ iat: NOW - 100, exp: NOW - 31 }), 'invalid_request')
})

t.test('jti is present: invalid_request', async (t) => {
  await refused(t, await sign({ jti: undefined }), 'invalid_request')
  await refused(t, await sign({ jti: '' }), 'invalid_request')
  await refused(t, await sign({ jti: 42 }), 'invalid_request')
})

t.test('events: an object with exactly one event, itself an object: invalid_request', async (t) => {
  await refused(t, await sign({ events: undefined }), 'invalid_request')
  await refused(t, await sign({ events: 'session-revoked' }), 'invalid_request')
  await refused(t, await sign({ events: [EVENT] }), 'invalid_request')
  await refused(t, await sign({ events: {} }), 'invalid_request')
  await refused(t, await sign({ events: { [EVENT]: {}, 'urn:other': {} } }), 'invalid_request')
  await refused(t, await sign({ events: { [EVENT]: 'yes' } }), 'invalid_request')
  await refused(t, await sign({ events: { [EVENT]: null } }), 'invalid_request')
  await refused(t, await sign({ events: { [EVENT]: [] } }), 'invalid_request')
})

t.test("errors that are not the SET's fault propagate unchanged", async (t) => {
  const outage = new Error('jwks unreachable')
  const err = await verifySet(await sign({}), { ...ctx, getKey: async () => Promise.reject(outage) }).catch((e: unknown) => e)
  t.equal(err, outage)
})
