// The legacy credentials an upstream may ask for (src/upstream/credentials.ts), in both shapes (on
// the upstream request: the proxy and Envoy; in an answer an ingress copies: forward-auth) and in
// what an edge must remove: the user as HTTP Basic (RFC 7617), the ID token as Bearer, the access
// token in X-Forwarded-Access-Token and X-Auth-Request-Access-Token. Identities are built by hand
// to reach the values no provider sends (a user-id with `:`, a token that is no header value).

import t from 'tap'
import { DEFAULT_CLAIM_MAPPING } from '#src/contract/claim-path'
import type { Identity } from '#src/contract/identity'
import type { UpstreamConfig } from '#src/options/types'
import { GATEWAY_ONLY_HEADERS } from '#src/upstream/header-policy'
import { UpstreamCredentials, type CredentialRequest } from '#src/upstream/credentials'
import type { TokenExchanger } from '#src/upstream/token-exchange'
import { resolve } from '../fixtures/config/base.ts'

const PASSWORD = 'pa:ss wörd'
const config = resolve(
  {
    upstreams: [
      { name: 'basic', target: 'http://127.0.0.1:3000', match: { pathPrefix: '/basic' }, forwardBasicAuth: { password: '${PW}' } },
      { name: 'email', target: 'http://127.0.0.1:3001', match: { pathPrefix: '/email' }, forwardBasicAuth: { user: 'email', password: '${PW}' } },
      { name: 'id', target: 'http://127.0.0.1:3002', match: { pathPrefix: '/id' }, forwardIdToken: true },
      { name: 'token', target: 'http://127.0.0.1:3003', match: { pathPrefix: '/token' }, forwardAccessTokenHeader: true },
      { name: 'both', target: 'http://127.0.0.1:3004', match: { pathPrefix: '/both' }, forwardAccessTokenHeader: true, forwardAccessToken: true },
      { name: 'plain', target: 'http://127.0.0.1:3005', match: { pathPrefix: '/plain' } },
    ],
  },
  { PW: PASSWORD },
)
const upstream = (name: string): UpstreamConfig => {
  const found = config.upstreams.find((u) => u.name === name)
  if (found === undefined) throw new Error(`no upstream ${name}`)
  return found
}
const exchanger: TokenExchanger = { token: () => Promise.reject(new Error('no exchange here')), forgetToken: () => undefined, forget: () => undefined }
const credentials = new UpstreamCredentials({
  upstreams: config.upstreams,
  assertions: { header: config.assertions.header, signer: undefined },
  transactionTokens: undefined,
  exchanger,
  isGatewayCookie: (name) => name === 'ogw',
})
const ID_TOKEN = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl'
function identity(sub: string, extra: Partial<Identity> = {}, email: unknown = `${sub}@example.com`): Identity {
  return {
    claims: { sub, email },
    accessToken: 'access.token-0123~+/=',
    provider: 'default',
    issuer: 'https://idp.example',
    mapping: DEFAULT_CLAIM_MAPPING,
    ...extra,
  }
}
const alice = identity('alice', { idToken: ID_TOKEN })
const request: CredentialRequest = { method: 'GET', path: '/', transport: 'https' }
const valueOf = (set: ReadonlyArray<readonly [string, string]>, name: string): string | undefined => set.find(([n]) => n === name)?.[1]
const basicOf = (user: string): string => `Basic ${Buffer.from(`${user}:${PASSWORD}`, 'utf8').toString('base64')}`
const sync = (value: Array<[string, string]> | Promise<Array<[string, string]>>): Array<[string, string]> => {
  if (value instanceof Promise) throw new Error('nothing here is signed or asked for')
  return value
}

t.test('forwardBasicAuth: the user as HTTP Basic, in every shape', async (t) => {
  const writer = credentials.of(upstream('basic'))
  t.equal(valueOf(sync(writer.set(alice, request, 'upstream')), 'authorization'), basicOf('alice'), 'the identity headers’ user, UTF-8, the password as given')
  t.equal(
    valueOf(sync(writer.set(alice, request, 'auth-request')), 'authorization'),
    basicOf('alice'),
    'an answer carries it as Authorization (--set-basic-auth)',
  )
  t.equal(valueOf(sync(credentials.of(upstream('email')).set(alice, request, 'upstream')), 'authorization'), basicOf('alice@example.com'), 'user: email')
  t.equal(valueOf(sync(writer.set(identity('zoë'), request, 'upstream')), 'authorization'), basicOf('zoë'), 'a non-ASCII user-id in UTF-8 (RFC 7617 2.1)')
  for (const [why, who] of [
    ['a colon in the user-id (RFC 7617 2)', identity('urn:alice')],
    ['a control character', identity('al\nice')],
    ['a lone surrogate', identity('al\ud800ice')],
  ] as const) {
    t.equal(valueOf(sync(writer.set(who, request, 'upstream')), 'authorization'), undefined, `no Basic: ${why}`)
  }
  t.equal(
    valueOf(sync(credentials.of(upstream('email')).set(identity('bob', {}, null), request, 'upstream')), 'authorization'),
    undefined,
    'no email: no Basic, never the user instead',
  )
  const edge = await writer.headers(identity('urn:alice'), request, { authorization: 'Basic bWFsbG9yeTpwdw==' })
  t.ok(edge.remove.includes('authorization'), "nothing to send: the client's own Authorization is removed all the same")
  const sent = await writer.headers(alice, request, { authorization: 'Basic bWFsbG9yeTpwdw==' })
  t.equal(valueOf(sent.set, 'authorization'), basicOf('alice'), 'set over the client’s')
  t.notOk(sent.remove.includes('authorization'))
  t.ok(writer.strippedNames.includes('authorization'), 'the proxy strips the client’s')
})

t.test('forwardIdToken: the ID token as Bearer, only when there is one and it is a header value', async (t) => {
  const writer = credentials.of(upstream('id'))
  t.equal(valueOf(sync(writer.set(alice, request, 'upstream')), 'authorization'), `Bearer ${ID_TOKEN}`)
  t.equal(
    valueOf(sync(writer.set(alice, request, 'auth-request')), 'authorization'),
    `Bearer ${ID_TOKEN}`,
    'an answer carries it as Authorization (--set-authorization-header)',
  )
  t.equal(valueOf(sync(writer.set(identity('alice'), request, 'upstream')), 'authorization'), undefined, 'a Bearer token’s identity has no ID token')
  t.equal(
    valueOf(sync(writer.set(identity('alice', { idToken: 'a.b.c\r\nX-Admin: 1' }), request, 'upstream')), 'authorization'),
    undefined,
    'not a header value',
  )
  const edge = await writer.headers(identity('alice'), request, { authorization: 'Bearer the-clients' })
  t.ok(edge.remove.includes('authorization'), "without one, the client's Authorization is removed")
  t.ok(writer.strippedNames.includes('authorization'))
})

t.test('forwardAccessTokenHeader: both names to the upstream, X-Auth-Request-Access-Token in an answer', async (t) => {
  const writer = credentials.of(upstream('token'))
  const set = sync(writer.set(alice, request, 'upstream'))
  t.equal(valueOf(set, 'x-forwarded-access-token'), alice.accessToken, '--pass-access-token')
  t.equal(valueOf(set, 'x-auth-request-access-token'), alice.accessToken, 'what an edge copied from oauth2-proxy’s answer')
  t.equal(valueOf(set, 'authorization'), undefined, 'Authorization is not this key’s')
  const answer = sync(writer.set(alice, request, 'auth-request'))
  t.strictSame(
    answer.filter(([n]) => n.includes('token')),
    [['x-auth-request-access-token', alice.accessToken]],
  )
  const both = sync(credentials.of(upstream('both')).set(alice, request, 'auth-request'))
  t.equal(both.filter(([n]) => n === 'x-auth-request-access-token').length, 1, 'with forwardAccessToken: once')
  t.strictSame(
    sync(writer.set(identity('alice', { accessToken: 'tok\nen' }), request, 'upstream')).filter(([n]) => n.includes('token')),
    [],
    'not a header value: neither',
  )
  const edge = await writer.headers(identity('alice', { accessToken: 'tok\nen' }), request, {
    'x-forwarded-access-token': 'forged',
    'x-auth-request-access-token': 'forged',
  })
  t.ok(
    edge.remove.includes('x-forwarded-access-token') && edge.remove.includes('x-auth-request-access-token'),
    'the client’s copies are removed when nothing is set',
  )
  t.notOk(writer.strippedNames.includes('authorization'), 'the client’s Authorization still passes here')
  const plain = await credentials.of(upstream('plain')).headers(alice, request, { 'x-forwarded-access-token': 'forged' })
  t.ok(plain.remove.includes('x-forwarded-access-token'), 'and at every upstream of a configuration that sets it')
  t.ok(
    GATEWAY_ONLY_HEADERS.includes('x-forwarded-*') && GATEWAY_ONLY_HEADERS.includes('x-auth-request-*'),
    'the proxy strips both families whatever the configuration',
  )
})

t.test("none of them: the client's Authorization passes, as it does today", async (t) => {
  const writer = credentials.of(upstream('plain'))
  t.notOk(writer.strippedNames.includes('authorization'))
  const edge = await writer.headers(alice, request, { authorization: 'Basic dXNlcjpwdw==' })
  t.notOk(edge.remove.includes('authorization'))
  t.equal(valueOf(edge.set, 'authorization'), undefined)
})
