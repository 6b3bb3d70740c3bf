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

t.test("redirectPath: a clean path outside the gateway's, one per provider, with no upstream at or below it", async (t) => {
  t.strictSame(problems({ provider: { redirectPath: '/oauth2/callback' } }), [], "oauth2-proxy's callback path")
  t.strictSame(problems({ provider: { redirectPath: '/' } }), ['provider.redirectPath: must not end with / (nor be /)'])
  t.strictSame(problems({ provider: { redirectPath: '/oauth2/callback/' } }), ['provider.redirectPath: must not end with / (nor be /)'])
  t.strictSame(problems({ provider: { redirectPath: 'oauth2/callback' } }), ['provider.redirectPath: must start with /'])
  t.strictSame(problems({ provider: { redirectPath: '/oauth2/:cb' } }), ['provider.redirectPath: must not contain : or *'])
  t.strictSame(problems({ provider: { redirectPath: '/api/v1/openid/cb' } }), ['provider.redirectPath: must not be /api/v1/openid or below it (the gateway serves that path)'])
  t.strictSame(problems(several([{ ...STAFF, redirectPath: '/oauth2/callback' }, { ...PARTNERS, redirectPath: '/oauth2/callback' }])), [
    'providers[1].redirectPath: duplicate of providers[0].redirectPath: each provider needs a redirect URI of its own',
  ])
  t.strictSame(problems(several([{ ...STAFF, redirectPath: '/oauth2/callback' }, PARTNERS])), [], 'another provider on the contract path')
  const upstreams = (pathPrefix: string) => ({
    provider: { redirectPath: '/oauth2/callback' },
    upstreams: [
      { name: 'app', target: 'http://127.0.0.1:3000' },
      { name: 'cb', target: 'http://127.0.0.1:3001', match: { pathPrefix } },
    ],
  })
  t.strictSame(problems(upstreams('/oauth2/callback/x')), [
    'upstreams[1].match.pathPrefix: is at or below provider.redirectPath (/oauth2/callback), which the gateway serves: this upstream would never receive a request',
  ])
  t.strictSame(problems(upstreams('/oauth2/callback')), [
    'upstreams[1].match.pathPrefix: is at or below provider.redirectPath (/oauth2/callback), which the gateway serves: this upstream would never receive a request',
  ])
  t.strictSame(problems(upstreams('/oauth2')), [], 'an upstream above it keeps the rest of its prefix')
  t.strictSame(problems(upstreams('/oauth2/callbacks')), [], 'a sibling on no segment boundary')
})
