// The cross-key rules of provider and providers[] (config/cross-key/providers.ts): one form, names
// and issuers that select one provider, and each provider's own rules, named where the provider is.

import { generateKeyPairSync } from 'node:crypto'
import t from 'tap'
import { problems } from '../../fixtures/config/base.ts'
import { PARTNERS, STAFF, privateKeyJwt, several } from '../../fixtures/config/values.ts'

const ecPem = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()

t.test('exactly one of provider and providers', async (t) => {
  t.strictSame(problems({ providers: [STAFF] }), ['providers: cannot be given with provider: use providers alone (name the former provider in it)'])
  t.strictSame(problems({ provider: undefined }), ['provider: is required (or providers, a list, for several providers)'])
  t.strictSame(problems(several([])), ['providers: must not be empty'])
})

t.test('names and issuers are unique: each selects one provider', async (t) => {
  t.strictSame(problems(several([STAFF, { ...PARTNERS, name: 'Staff' }])), ['providers[1].name: duplicate of providers[0].name'])
  t.strictSame(problems(several([STAFF, { ...PARTNERS, issuer: STAFF.issuer }])), [
    "providers[1].issuer: same issuer as providers[0]: a token's iss must select one provider",
  ])
  t.strictSame(problems(several([{ ...STAFF, name: undefined }])), ['providers[0].name: is required'])
  t.match(problems(several([{ ...STAFF, name: 'a b' }])), [/^providers\[0\]\.name: must start with a letter or digit/])
})

t.test("each provider's own rules name the key where it is", async (t) => {
  t.strictSame(problems(several([STAFF, { ...PARTNERS, issuer: 'http://partners.example.net' }])), [
    'providers[1].issuer: must be an https URL (http only with providers[1].allowInsecureHttp: true)',
  ])
  t.strictSame(problems(several([STAFF, { ...PARTNERS, clientSecret: undefined }])), ['providers[1].clientSecret: is required'])
  t.strictSame(problems(several([STAFF, { ...PARTNERS, profile: 'fapi2' }])), [
    'providers[1].clientAuthMethod: must be private_key_jwt with providers[1].profile: fapi2',
  ])
})

t.test('an http issuer only with allowInsecureHttp; a client secret with the shared secret methods', async (t) => {
  t.strictSame(problems({ provider: { issuer: 'http://idp.example.com' } }), ['provider.issuer: must be an https URL (http only with provider.allowInsecureHttp: true)'], 'http issuer')
  t.strictSame(problems({ provider: { issuer: 'http://127.0.0.1:9000', allowInsecureHttp: true } }), [], 'http issuer allowed explicitly')
  t.strictSame(problems({ provider: { clientSecret: undefined } }), ['provider.clientSecret: is required'], 'clientSecret missing')
})

t.test('private_key_jwt: its key and nothing of the shared secret methods, and the FAPI 2.0 audience', async (t) => {
  t.strictSame(problems(privateKeyJwt({})), ['provider.clientKey: is required by clientAuthMethod: private_key_jwt'], 'no key')
  t.strictSame(problems(privateKeyJwt({ clientKey: ecPem, clientSecret: 'a-secret' })), ['provider.clientSecret: is not used with clientAuthMethod: private_key_jwt; remove it'], 'a secret too')
  t.strictSame(problems({ provider: { clientKey: ecPem, clientKeyId: 'k' } }), [
        'provider.clientKey: is only used with clientAuthMethod: private_key_jwt',
        'provider.clientKeyId: is only used with clientAuthMethod: private_key_jwt',
      ], 'a key with a shared secret method')
  t.strictSame(problems({ provider: { clientAssertionAudience: 'token_endpoint' } }), ['provider.clientAssertionAudience: is only used with clientAuthMethod: private_key_jwt'], 'an assertion audience with a shared secret method')
  t.strictSame(problems(privateKeyJwt({ clientKey: ecPem, profile: 'fapi2', clientAssertionAudience: 'token_endpoint' })), ['provider.clientAssertionAudience: must be issuer with provider.profile: fapi2'], 'another assertion audience than the issuer with the FAPI 2.0 profile (5.3.2.1)')
  t.strictSame(problems({ provider: { clientSecret: undefined } }), ['provider.clientSecret: is required'], 'no secret with a shared secret method')
})

// The form post's transaction cookie is SameSite=None; Secure whatever cookies.secure says.
t.test('form_post: only on an https or loopback public URL', async (t) => {
  t.strictSame(problems({ server: { publicUrl: 'http://app.example.com' }, cookies: { secure: false }, provider: { responseMode: 'form_post' } }), ['provider.responseMode: form_post needs server.publicUrl on https (or a loopback host): its transaction cookie must be SameSite=None; Secure, which browsers drop over plain http'], 'form_post on a plain-http public URL')
  t.strictSame(problems({ provider: { responseMode: 'form_post' } }), [], 'form_post on https')
  t.strictSame(problems({ server: { publicUrl: 'http://localhost:8080' }, cookies: { secure: false }, provider: { responseMode: 'form_post' } }), [], 'form_post on http://localhost with insecure cookies')
  t.strictSame(problems({ server: { publicUrl: 'http://127.0.0.1:8080' }, cookies: { secure: false }, provider: { responseMode: 'form_post' } }), [], 'form_post on http://127.0.0.1')
})
