// What an upstream receives, computed once for every exit (src/upstream/credentials.ts): the
// headers set for an identity in the two shapes (on the upstream request, or in an answer an
// ingress copies from), the request headers an edge must remove by exact name, and the names the
// proxy strips by pattern. The Identity objects are built by hand: no real provider issues an
// access token that is not a valid header value (RFC 6749 A.12 VSCHAR), which is the case the
// header-safety test is for.

import { generateKeyPairSync } from 'node:crypto'
import * as jose from 'jose'
import t from 'tap'
import { DEFAULT_CLAIM_MAPPING } from '#src/contract/claim-path'
import { GatewayError } from '#src/contract/errors'
import type { Identity } from '#src/contract/identity'
import type { UpstreamConfig } from '#src/options/types'
import { GATEWAY_ONLY_HEADERS, REQUEST_OVERRIDE_HEADER_NAMES } from '#src/upstream/header-policy'
import { assertionSigner, transactionTokenMinting, UpstreamCredentials, type CredentialRequest } from '#src/upstream/credentials'
import type { TokenExchanger } from '#src/upstream/token-exchange'
import { resolve } from '../fixtures/config/base.ts'

const pem = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()
const TRUST_DOMAIN = 'trust-domain.example'
const config = resolve({
  assertions: { signingKeys: [pem] },
  upstreams: [
    {
      name: 'app',
      target: 'http://127.0.0.1:3000',
      match: { pathPrefix: '/' },
      forwardAccessToken: true,
      identityAssertion: true,
      transactionTokens: { trustDomain: TRUST_DOMAIN, scope: ['orders.read'] },
      claimHeaders: { 'X-Tenant': 'tenant' },
    },
    { name: 'legacy', target: 'http://127.0.0.1:3001', match: { pathPrefix: '/legacy' }, identityHeaders: { user: 'X-Remote-User' } },
    { name: 'plain', target: 'http://127.0.0.1:3002', match: { pathPrefix: '/plain' } },
    { name: 'orders', target: 'http://127.0.0.1:3003', match: { pathPrefix: '/orders' }, tokenExchange: { audience: 'orders-api' } },
  ],
})
const upstream = (name: string): UpstreamConfig => {
  const found = config.upstreams.find((u) => u.name === name)
  if (found === undefined) throw new Error(`no upstream ${name}`)
  return found
}

/** An RFC 8693 exchange as the provider would answer it (token-exchange.test.ts tests the real one). */
const exchanger: TokenExchanger = {
  token: (u, identity) => {
    if (identity.claims.sub === 'refused') return Promise.reject(new GatewayError('forbidden', 'the provider refused the exchange'))
    return Promise.resolve(`exchanged-for-${u.name}-${identity.claims.sub}`)
  },
  forgetToken: () => undefined,
  forget: () => undefined,
}
const signer = await assertionSigner(config)
if (signer === undefined) throw new Error('assertions.signingKeys gives a signer')
const jwks = jose.createLocalJWKSet(signer.jwks)
const credentials = new UpstreamCredentials({
  upstreams: config.upstreams,
  assertions: { header: config.assertions.header, signer },
  transactionTokens: transactionTokenMinting(config, signer),
  exchanger,
  isGatewayCookie: (name) => name === 'ogw' || name.startsWith('ogw_'),
})

function identity(accessToken: string, sub = 'alice'): Identity {
  return {
    claims: { sub, email: `${sub}@example.com`, groups: ['staff'], tenant: 'acme' },
    accessToken,
    provider: 'default',
    issuer: 'https://idp.example.com/realms/main',
    mapping: DEFAULT_CLAIM_MAPPING,
  }
}
const alice = identity('opaque.access-token_0123~+/=')
const request: CredentialRequest = { method: 'GET', path: '/orders/7', transport: 'https', clientAddress: () => '203.0.113.9' }
const names = (set: ReadonlyArray<readonly [string, string]>): string[] => set.map(([name]) => name)
const valueOf = (set: ReadonlyArray<readonly [string, string]>, name: string): string | undefined => set.find(([n]) => n === name)?.[1]

t.test('set, shape upstream: the identity under the upstream’s names, Bearer, the assertion and a Txn-Token', async (t) => {
  const set = await credentials.of(upstream('app')).set(alice, request, 'upstream')
  t.strictSame(names(set), [
    'x-forwarded-user',
    'x-forwarded-email',
    'x-forwarded-groups',
    'x-forwarded-issuer',
    'x-tenant',
    'authorization',
    'x-identity-assertion',
    'txn-token',
  ])
  t.equal(valueOf(set, 'x-forwarded-user'), 'alice')
  t.equal(valueOf(set, 'x-tenant'), 'acme', 'claimHeaders')
  t.equal(valueOf(set, 'authorization'), `Bearer ${alice.accessToken}`, 'forwardAccessToken: a b64token, as sent')
  const assertion = await jose.jwtVerify(valueOf(set, 'x-identity-assertion') ?? '', jwks, { issuer: config.server.publicUrl, audience: 'app' })
  t.equal(assertion.payload.sub, 'alice')
  t.strictSame(assertion.payload.headers, { 'x-tenant': 'acme' })
  const txn = await jose.jwtVerify(valueOf(set, 'txn-token') ?? '', jwks, { typ: 'txntoken+jwt', audience: TRUST_DOMAIN })
  t.strictSame(txn.payload.rctx, { transport: 'https', req_ip: '203.0.113.9' })
  t.strictSame(txn.payload.tctx, { upstream: 'app', method: 'GET', path: '/orders/7', idp: alice.issuer })

  const legacy = await credentials.of(upstream('legacy')).set(alice, request, 'upstream')
  t.equal(valueOf(legacy, 'x-remote-user'), 'alice', "another upstream's own names")
  t.equal(valueOf(legacy, 'x-forwarded-user'), undefined)
  t.notOk(
    names(legacy).some((n) => ['authorization', 'x-identity-assertion', 'txn-token', 'x-tenant'].includes(n)),
    'only what it asks for',
  )
})

t.test('set, shape auth-request: oauth2-proxy’s X-Auth-Request-* names, the token in its own header', async (t) => {
  const set = await credentials.of(upstream('app')).set(alice, request, 'auth-request')
  t.equal(valueOf(set, 'x-auth-request-user'), 'alice')
  t.equal(valueOf(set, 'x-auth-request-email'), 'alice@example.com')
  t.equal(valueOf(set, 'x-forwarded-user'), undefined, "never the upstream's names: the ingress copies the answer's")
  t.equal(valueOf(set, 'x-auth-request-access-token'), alice.accessToken)
  t.equal(valueOf(set, 'authorization'), undefined, 'the ingress copies the token from its own header')
  t.ok(valueOf(set, 'x-identity-assertion'), 'the assertion, like every exit')
  t.ok(valueOf(set, 'txn-token'), 'a Txn-Token, like every exit')
  const exchanged = await credentials.of(upstream('orders')).set(alice, request, 'auth-request')
  t.equal(valueOf(exchanged, 'authorization'), 'Bearer exchanged-for-orders-alice', 'tokenExchange: Authorization to copy')
  t.equal(valueOf(exchanged, 'x-auth-request-access-token'), 'exchanged-for-orders-alice', 'and the token alone')
})

t.test('set: nothing for an anonymous pass; an exchange the provider refuses rejects', async (t) => {
  for (const shape of ['upstream', 'auth-request'] as const) t.strictSame(await credentials.of(upstream('app')).set(null, request, shape), [], shape)
  const exchanged = await credentials.of(upstream('orders')).set(alice, request, 'upstream')
  t.equal(valueOf(exchanged, 'authorization'), 'Bearer exchanged-for-orders-alice', "the upstream's own token, never the user's")
  t.notOk(JSON.stringify(exchanged).includes(alice.accessToken))
  await t.rejects(async () => credentials.of(upstream('orders')).set(identity('t', 'refused'), request, 'upstream'), { code: 'forbidden' })
})

t.test('an access token that is not a valid header value is never forwarded, and the client’s Authorization still goes', async (t) => {
  const writer = credentials.of(upstream('app'))
  for (const token of ['tok\u00e9n', 'line\r\nX-Injected: 1', 'tab\there', 'nul\u0000', '']) {
    const unsafe = identity(token)
    const upstreamShape = await writer.set(unsafe, request, 'upstream')
    t.equal(valueOf(upstreamShape, 'authorization'), undefined, JSON.stringify(token))
    t.equal(valueOf(upstreamShape, 'x-forwarded-user'), 'alice', 'the rest of the identity still goes')
    t.equal(valueOf(await writer.set(unsafe, request, 'auth-request'), 'x-auth-request-access-token'), undefined)
    const { remove } = await writer.headers(unsafe, request, { authorization: 'Bearer the-clients-own' })
    t.ok(remove.includes('authorization'), "the client's Authorization is removed: the gateway owns it")
  }
  const { set, remove } = await writer.headers(alice, request, { authorization: 'Bearer the-clients-own' })
  t.equal(valueOf(set, 'authorization'), `Bearer ${alice.accessToken}`)
  t.notOk(remove.includes('authorization'), 'set, so not removed (the edge overwrites the client’s)')
})

t.test('headers: the removals an edge applies by exact name', async (t) => {
  const union = credentials.union.names
  t.ok(
    ['x-forwarded-user', 'x-remote-user', 'x-auth-request-user', 'x-auth-request-access-token', 'x-identity-assertion', 'x-tenant', 'txn-token'].every((n) =>
      union.includes(n),
    ),
    "the union: every upstream's names, forward-auth's, the claim headers, the assertion and Txn-Token",
  )
  const received = { x_forwarded_user: 'mallory', 'x-forwarded-email': 'm@evil', X_Remote_User: 'mallory', x_auth_request_user: 'm', 'x-unrelated': '1' }

  const signedIn = await credentials.of(upstream('app')).headers(alice, request, received)
  const setNames = names(signedIn.set)
  t.notOk(
    signedIn.remove.some((n) => setNames.includes(n)),
    'nothing the answer sets is removed',
  )
  t.ok(signedIn.remove.includes('x-remote-user') && signedIn.remove.includes('x-auth-request-user'), 'the union names not set, whichever upstream uses them')
  t.ok(signedIn.remove.includes('x_forwarded_user'), 'an underscore spelling received is removed even when the canonical name is set')
  t.ok(signedIn.remove.includes('x_remote_user') && signedIn.remove.includes('x_auth_request_user'), 'each in the spelling it arrived with, lowercased')
  t.notOk(signedIn.remove.includes('x-unrelated'), 'other headers pass')
  t.ok(
    REQUEST_OVERRIDE_HEADER_NAMES.every((n) => signedIn.remove.includes(n)),
    'the request-target and method overrides',
  )

  const anonymous = await credentials.of(upstream('app')).headers(null, request, { authorization: 'Basic dXNlcjpwYXNz' })
  t.strictSame(anonymous.set, [], 'an anonymous pass sets nothing')
  t.ok(
    union.every((n) => anonymous.remove.includes(n)),
    'and removes every identity name',
  )
  t.ok(anonymous.remove.includes('authorization'), 'Authorization, where the gateway owns it (forwardAccessToken)')
  const plain = await credentials.of(upstream('plain')).headers(alice, request, { authorization: 'Bearer theirs' })
  t.notOk(plain.remove.includes('authorization'), 'an upstream that does not own Authorization gets the client’s')
  t.ok(plain.remove.includes('txn-token') && plain.remove.includes('x-identity-assertion'), 'what it does not ask for is removed, never forged')
})

t.test("headers: the gateway's cookies never reach the upstream", async (t) => {
  const writer = credentials.of(upstream('plain'))
  const mixed = await writer.headers(alice, request, { cookie: 'ogw=sealed; theme=dark; ogw_1=chunk' })
  t.equal(valueOf(mixed.set, 'cookie'), 'theme=dark', 'set without them')
  t.notOk(mixed.remove.includes('cookie'))
  const only = await writer.headers(alice, request, { cookie: 'ogw=sealed; ogw_1=chunk' })
  t.equal(valueOf(only.set, 'cookie'), undefined)
  t.ok(only.remove.includes('cookie'), 'removed when nothing is left')
  const theirs = await writer.headers(alice, request, { cookie: 'theme=dark' })
  t.equal(valueOf(theirs.set, 'cookie'), undefined, 'left as it is when it holds none')
  t.notOk(theirs.remove.includes('cookie'))
  const none = await writer.headers(alice, request, {})
  t.notOk(names(none.set).includes('cookie') || none.remove.includes('cookie'), 'no Cookie, nothing to do')
})

t.test('strippedNames: what the proxy strips by pattern', async (t) => {
  const app = credentials.of(upstream('app')).strippedNames
  t.strictSame(app, [...credentials.union.names, 'authorization', ...GATEWAY_ONLY_HEADERS], 'the union, Authorization where owned, the gateway-only headers')
  const plain = credentials.of(upstream('plain')).strippedNames
  t.strictSame(plain, [...credentials.union.names, ...GATEWAY_ONLY_HEADERS], 'the client’s Authorization passes where the gateway does not own it')
  t.ok(credentials.of(upstream('orders')).strippedNames.includes('authorization'), 'tokenExchange owns it too')
})

t.test('of: only an upstream of this configuration', async (t) => {
  t.throws(() => credentials.of({ ...upstream('app') }), /the upstream app is not one of this configuration's/)
})
