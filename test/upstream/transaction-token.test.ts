// Minting Transaction Tokens (draft-ietf-oauth-transaction-tokens-10): the JOSE header of section
// 9.1, the claims of section 9.2, a short lifetime, one `txn` per transaction, and a `sub` unique
// within the trust domain; verified as a receiving workload does (section 12.2).

import { generateKeyPairSync } from 'node:crypto'
import * as jose from 'jose'
import t from 'tap'
import { DEFAULT_CLAIM_MAPPING } from '#src/contract/claim-path'
import type { Identity } from '#src/contract/identity'
import { parsePrivateKey, signingKey } from '#src/keys/private-key'
import { subjectQualified, transactionSubject, transactionTokenPolicy, TransactionTokens, TXN_TOKEN_TYP } from '#src/upstream/transaction-token'

const pem = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()
const key = await signingKey(parsePrivateKey(pem))
const jwks = jose.createLocalJWKSet({ keys: [key.publicJwk] })
const minter = new TransactionTokens({ keys: [key], issuer: 'https://gw.example.com' })

const alice: Identity = {
  claims: { sub: 'alice', email: 'alice@example.com', amr: ['pwd', 'otp'] },
  accessToken: 'the-access-token',
  provider: 'main',
  issuer: 'https://idp.example.com',
  mapping: DEFAULT_CLAIM_MAPPING,
}
const policy = transactionTokenPolicy(
  { name: 'api', transactionTokens: { trustDomain: 'trust-domain.example', scope: ['orders.read', 'orders.write'], ttlSeconds: 30 } },
  () => false,
)
if (policy === undefined) throw new Error('a policy for an upstream with transactionTokens')
const context = { identity: alice, method: 'POST', path: '/orders/7', transport: 'https', clientAddress: '203.0.113.9' }

t.test('a Txn-Token a receiving workload accepts: typ, signature, aud = the trust domain, not expired', async (t) => {
  const token = await minter.mint(policy, context)
  const { payload, protectedHeader } = await jose.jwtVerify(token, jwks, { typ: TXN_TOKEN_TYP, audience: 'trust-domain.example', algorithms: ['ES256'] })
  t.equal(protectedHeader.typ, 'txntoken+jwt', 'section 9.1')
  t.equal(protectedHeader.kid, key.kid, 'kid for key rotation (section 9.1)')
  t.equal(payload.exp! - payload.iat!, 30, 'transactionTokens.ttlSeconds')
  t.ok(Math.abs(payload.iat! - Date.now() / 1000) < 5, 'iat: the time of issuance')
  t.match(payload.txn, /^[0-9a-f-]{36}$/, 'txn: a UUID')
  t.strictSame(
    { ...payload, iat: 0, exp: 0, txn: '' },
    {
      iss: 'https://gw.example.com',
      iat: 0,
      exp: 0,
      aud: 'trust-domain.example',
      txn: '',
      sub: 'alice',
      scope: 'orders.read orders.write',
      req_wl: 'gw.example.com',
      rctx: { transport: 'https', req_ip: '203.0.113.9', authn: ['pwd', 'otp'] },
      tctx: { upstream: 'api', method: 'POST', path: '/orders/7', idp: 'https://idp.example.com' },
    },
    'every claim, and nothing else: no email, no access token (section 13.4)',
  )
  t.notOk(token.includes('the-access-token'), 'the access token is nowhere in it')
  await t.rejects(jose.jwtVerify(token, jwks, { typ: 'JWT', audience: 'trust-domain.example' }), { code: 'ERR_JWT_CLAIM_VALIDATION_FAILED' }, 'not a plain JWT')
  await t.rejects(
    jose.jwtVerify(token, jwks, { typ: TXN_TOKEN_TYP, audience: 'other.example' }),
    { code: 'ERR_JWT_CLAIM_VALIDATION_FAILED' },
    'refused outside its trust domain',
  )
})

t.test('one txn per transaction: every mint is a new token', async (t) => {
  const tokens = await Promise.all([minter.mint(policy, context), minter.mint(policy, context), minter.mint(policy, context)])
  const txns = tokens.map((token) => jose.decodeJwt(token).txn)
  t.equal(new Set(txns).size, 3)
})

t.test('rctx says only what the gateway knows: no req_ip without an address, no authn without amr', async (t) => {
  const bare: Identity = { ...alice, claims: { sub: 'alice' } }
  const claims = minter.claims(policy, { identity: bare, method: 'GET', path: '/', transport: 'http' }, 1000)
  t.strictSame(claims.rctx, { transport: 'http' })
  t.equal(claims.exp, 1030)
})

t.test('sub is unique within the trust domain: qualified by the issuer when several providers feed it', async (t) => {
  const upstreams = [
    { name: 'a', providers: ['one'], transactionTokens: { trustDomain: 'td1', scope: ['s'], ttlSeconds: 60 } },
    { name: 'b', providers: ['two'], transactionTokens: { trustDomain: 'td1', scope: ['s'], ttlSeconds: 60 } },
    { name: 'c', providers: ['one'], transactionTokens: { trustDomain: 'td2', scope: ['s'], ttlSeconds: 60 } },
    { name: 'd', providers: ['two'] },
  ]
  const qualified = subjectQualified(upstreams)
  t.equal(qualified('td1'), true, 'two providers in td1')
  t.equal(qualified('td2'), false, 'one provider in td2 (d mints nothing)')
  t.equal(transactionTokenPolicy(upstreams[0]!, qualified)?.qualifySubject, true)
  t.equal(transactionTokenPolicy(upstreams[2]!, qualified)?.qualifySubject, false)
  t.equal(transactionTokenPolicy(upstreams[3]!, qualified), undefined, 'no policy, no work, for an upstream without the key')
  t.equal(transactionSubject(alice, true), 'https://idp.example.com#alice')
  t.equal(transactionSubject(alice, false), 'alice')
})

t.test('no key, no minter', async (t) => {
  t.throws(() => new TransactionTokens({ keys: [], issuer: 'https://gw.example.com' }), TypeError)
})
