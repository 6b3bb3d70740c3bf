// Which refused pushed authorization requests (RFC 9126 2.3) are about the redirect URI: the
// answers of the providers the gateway meets, and the ones that must stay provider_unavailable.

import t from 'tap'
import { refusesRedirectUri } from '#src/oidc/client'

t.test('a refusal about the redirect URI', async (t) => {
  t.ok(refusesRedirectUri({ error: 'invalid_redirect_uri' }), "RFC 7591's code, whatever the description")
  t.ok(refusesRedirectUri({ error: 'invalid_redirect_uri', error_description: 'no' }))
  t.ok(
    refusesRedirectUri({ error: 'invalid_request', error_description: "redirect_uri did not match any of the client's registered redirect_uris" }),
    'oidc-provider 9',
  )
  t.ok(refusesRedirectUri({ error: 'invalid_request', error_description: 'Invalid parameter: redirect_uri' }), 'Keycloak 26 (ParEndpoint)')
  t.ok(refusesRedirectUri({ error: 'invalid_request', error_description: 'The redirect_uri is not valid for the given client' }), "RFC 9126 2.3's example")
  t.ok(refusesRedirectUri({ error: 'invalid_request', error_description: 'Invalid redirect URI' }), 'in words')
})

t.test('any other refusal is not', async (t) => {
  t.notOk(refusesRedirectUri({ error: 'invalid_request' }), 'invalid_request without a description')
  t.notOk(refusesRedirectUri({ error: 'invalid_request', error_description: 'Unsupported response type' }))
  t.notOk(refusesRedirectUri({ error: 'invalid_scope', error_description: 'redirect_uri fine, scope not' }), 'another code naming redirect_uri')
  t.notOk(refusesRedirectUri({ error: 'invalid_client', error_description: 'redirect_uri' }))
  t.notOk(refusesRedirectUri({ status: 500 }), 'a fault, no OAuth error')
})
