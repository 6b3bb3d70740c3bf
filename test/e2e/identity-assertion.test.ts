// Signed identity for upstreams: an upstream verifies the assertion with jose against the JWKS the
// gateway publishes, as docs/features/identity-assertions.md shows.

import { generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as jose from 'jose'
import t from 'tap'
import { problems } from '../fixtures/config/base.ts'
import { startStack } from '../fixtures/stack.ts'

const JSON_ACCEPT = { accept: 'application/json' }
const dir = mkdtempSync(join(tmpdir(), 'ogw-assert-'))
const keyFile = (name: string, type: 'ec' | 'rsa'): string => {
  const path = join(dir, name)
  const { privateKey } = type === 'ec' ? generateKeyPairSync('ec', { namedCurve: 'P-256' }) : generateKeyPairSync('rsa', { modulusLength: 2048 })
  writeFileSync(path, privateKey.export({ format: 'pem', type: 'pkcs8' }))
  return path
}
const newKey = keyFile('new.pem', 'ec')
const oldKey = keyFile('old.pem', 'rsa')

interface Echo {
  headers: Record<string, string | undefined>
}

t.test('an upstream verifies the assertion against /.well-known/jwks.json', async (t) => {
  const stack = await startStack(t, {
    config: { assertions: { signingKeys: [newKey, oldKey] } },
    upstreams: [
      { name: 'app', identityAssertion: true },
      { name: 'plain', match: { pathPrefix: '/plain' } },
    ],
  })
  const browser = await stack.signedIn('alice')
  const first = (await (await browser.fetch(`${stack.gw}/x`, { headers: { ...JSON_ACCEPT, 'x-identity-assertion': 'forged' } })).json()) as Echo
  const assertion = first.headers['x-identity-assertion'] ?? ''
  t.not(assertion, 'forged', "a client's own header never reaches the upstream")

  // What an upstream does (docs/features/identity-assertions.md):
  const jwks = jose.createRemoteJWKSet(new URL(`${stack.gw}/.well-known/jwks.json`))
  const { payload, protectedHeader } = await jose.jwtVerify(assertion, jwks, { issuer: stack.gw, audience: 'app' })
  t.equal(protectedHeader.alg, 'ES256', 'the first key signs, ES256 for a P-256 key')
  t.equal(payload.sub, 'alice')
  t.equal(payload.email, 'alice@example.com')
  t.strictSame(payload.groups, ['admins', 'staff'])
  t.equal((payload.exp ?? 0) - (payload.iat ?? 0), 60, 'short-lived: assertions.ttlSeconds')

  const published = (await (await fetch(`${stack.gw}/.well-known/jwks.json`)).json()) as { keys: jose.JWK[] }
  t.strictSame(
    published.keys.map((key) => [key.kty, key.alg]),
    [
      ['EC', 'ES256'],
      ['RSA', 'PS256'],
    ],
    'both keys published (rotation)',
  )
  t.notOk(
    published.keys.some((key) => 'd' in key),
    'public halves only',
  )

  const second = (await (await browser.fetch(`${stack.gw}/y`, { headers: JSON_ACCEPT })).json()) as Echo
  t.equal(second.headers['x-identity-assertion'], assertion, 'cached per session and upstream: not signed per request')
  const plain = (await (await browser.fetch(`${stack.gw}/plain/x`, { headers: { ...JSON_ACCEPT, 'x-identity-assertion': 'forged' } })).json()) as Echo
  t.equal(plain.headers['x-identity-assertion'], undefined, 'an upstream without identityAssertion gets none, and no forgery either')
  const bob = await stack.signedIn('bob')
  const bobs = (await (await bob.fetch(`${stack.gw}/x`, { headers: JSON_ACCEPT })).json()) as Echo
  const bobPayload = (await jose.jwtVerify(bobs.headers['x-identity-assertion'] ?? '', jwks, { issuer: stack.gw, audience: 'app' })).payload
  t.equal(bobPayload.sub, 'bob', 'one assertion per session')
})

t.test('identityAssertion without assertions.signingKeys is refused naming the key', async (t) => {
  t.strictSame(problems({ upstreams: [{ name: 'app', target: 'http://127.0.0.1:3000', identityAssertion: true }] }), [
    'upstreams[0].identityAssertion: requires assertions.signingKeys',
  ])
  t.strictSame(problems({ assertions: { signingKeys: [join(dir, 'missing.pem')] } }), [
    'assertions.signingKeys[0]: must be a PEM or JWK private key, or the path of a file holding one (the file cannot be read: no such file)',
  ])
})
