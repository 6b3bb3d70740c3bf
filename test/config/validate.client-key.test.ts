import { generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { problems, resolve } from '../fixtures/config/base.ts'
import { privateKeyJwt } from '../fixtures/config/values.ts'
import { formatEffectiveConfig } from '#src/config/mask'

const dir = mkdtempSync(join(tmpdir(), 'ogw-keys-'))
const pem = (key: ReturnType<typeof generateKeyPairSync>['privateKey']): string => key.export({ format: 'pem', type: 'pkcs8' }).toString()
const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey
const ecPem = pem(ec)
const ecFile = join(dir, 'client.pem')
writeFileSync(ecFile, ecPem)
const rsaJwk = JSON.stringify({ ...generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' }), kid: 'rsa-1' })
const notAKeyFile = join(dir, 'not-a-key.txt')
writeFileSync(notAKeyFile, 'hello')

t.test('private_key_jwt: the key inline or from a file, PEM or JWK', async (t) => {
  t.strictSame(problems(privateKeyJwt({ clientKey: ecPem })), [], 'PEM inline')
  t.strictSame(problems(privateKeyJwt({ clientKey: ecFile })), [], 'PEM file')
  t.strictSame(problems(privateKeyJwt({ clientKey: rsaJwk, clientKeyId: 'other' })), [], 'JWK inline, kid given')
  t.strictSame(problems(privateKeyJwt({ clientKey: pem(generateKeyPairSync('ed25519').privateKey) })), [], 'Ed25519')
  t.strictSame(problems(privateKeyJwt({ clientKey: ecPem, clientAssertionAudience: 'token_endpoint' })), [], 'the token endpoint as the audience (Ory Hydra)')
  t.strictSame(problems(privateKeyJwt({ clientKey: ecPem, clientAssertionAudience: 'issuer' })), [], 'the issuer as the audience')
})

t.test('private_key_jwt: what is refused, by key', async (t) => {
  const cases: Record<string, [Record<string, unknown>, string[]]> = {
    'an audience that is neither': [
      privateKeyJwt({ clientKey: ecPem, clientAssertionAudience: 'https://idp.example.com/token' }),
      ['provider.clientAssertionAudience: must be one of: issuer, token_endpoint'],
    ],
    'a missing file': [
      privateKeyJwt({ clientKey: join(dir, 'missing.pem') }),
      ['provider.clientKey: must be a PEM or JWK private key, or the path of a file holding one (the file cannot be read: no such file)'],
    ],
    'a file without a key': [privateKeyJwt({ clientKey: notAKeyFile }), ['provider.clientKey: names a file that holds neither a PEM nor a JWK private key']],
    'a public key': [
      privateKeyJwt({ clientKey: generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'pem', type: 'spki' }).toString() }),
      ['provider.clientKey: is not a readable private key (PEM: PKCS#8, PKCS#1 or SEC1; or a private JWK)'],
    ],
    'a broken JWK': [privateKeyJwt({ clientKey: '{"kty":"EC"' }), ['provider.clientKey: is not a readable private key (PEM: PKCS#8, PKCS#1 or SEC1; or a private JWK)']],
    'RSA 1024': [
      privateKeyJwt({ clientKey: pem(generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey) }),
      ['provider.clientKey: is an RSA key of fewer than 2048 bits'],
    ],
    'secp256k1': [
      privateKeyJwt({ clientKey: pem(generateKeyPairSync('ec', { namedCurve: 'secp256k1' }).privateKey) }),
      ['provider.clientKey: is an EC key on a curve other than P-256, P-384 or P-521'],
    ],
    'X25519 (not a signing key)': [
      privateKeyJwt({ clientKey: pem(generateKeyPairSync('x25519').privateKey) }),
      ['provider.clientKey: must be an RSA (2048 bits or more), EC (P-256, P-384, P-521) or Ed25519 key'],
    ],
    'a JWK alg the key cannot sign with': [
      privateKeyJwt({ clientKey: JSON.stringify({ ...ec.export({ format: 'jwk' }), alg: 'RS256' }) }),
      ['provider.clientKey: has alg RS256, which a ec:P-256 key cannot sign with here (ES256)'],
    ],
  }
  for (const [name, [patch, expected]] of Object.entries(cases)) t.strictSame(problems(patch), expected, name)
})

t.test('check masks an inline key, shows a key file', async (t) => {
  const inline = formatEffectiveConfig(resolve(privateKeyJwt({ clientKey: ecPem })))
  t.notMatch(inline, /BEGIN/)
  t.match(inline, /clientKey: '\*{8}'/)
  const file = formatEffectiveConfig(resolve(privateKeyJwt({ clientKey: ecFile })))
  t.match(file, `clientKey: ${ecFile}`)
  const jwk = formatEffectiveConfig(resolve(privateKeyJwt({ clientKey: rsaJwk })))
  t.notMatch(jwk, /"d"/)
})

t.test('check masks inline assertion keys, shows key files', async (t) => {
  const text = formatEffectiveConfig(resolve({ assertions: { signingKeys: [ecPem, ecFile] } }))
  t.notMatch(text, /BEGIN/)
  t.match(text, /signingKeys:\n\s+- '\*{8}'\n\s+- /)
  t.match(text, ecFile)
})
