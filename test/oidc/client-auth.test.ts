import t from 'tap'
import * as oidc from 'openid-client'
import { generateKeyPairSync } from 'node:crypto'
import { decodeJwt } from 'jose'
import { assertionAudience, basicEncodingChanges, clientAssertionAlgorithm, clientAuthentication } from '#src/oidc/client-auth'

t.test('the client assertion algorithm is agreed with the provider metadata', async (t) => {
  const rsa = ['PS256', 'RS256'] as const
  t.equal(clientAssertionAlgorithm(rsa, ['RS256', 'PS256', 'ES256']), 'PS256', 'PS256 preferred when advertised')
  t.equal(clientAssertionAlgorithm(rsa, ['RS256', 'ES256']), 'RS256', 'RS256 when only it is advertised')
  t.equal(clientAssertionAlgorithm(rsa, undefined), 'RS256', 'nothing advertised: RS256, which every provider accepts')
  t.equal(clientAssertionAlgorithm(rsa, []), 'RS256')
  t.equal(clientAssertionAlgorithm(['ES256'], ['RS256']), undefined, 'no common algorithm')
  t.equal(clientAssertionAlgorithm(['ES256'], undefined), 'ES256')
  t.equal(clientAssertionAlgorithm(rsa, undefined, ['PS256', 'ES256']), 'PS256', 'a profile list: never RS256')
  t.equal(clientAssertionAlgorithm(rsa, ['RS256'], ['PS256', 'ES256']), undefined, 'the profile and the provider disagree')
})

t.test('client_secret_basic: which of the id and secret the Basic encoding (RFC 6749 2.3.1) changes, as openid-client sends it', async (t) => {
  t.same(basicEncodingChanges({ clientId: 'gateway', clientSecret: 'abcDEF0123' }), [], 'letters and digits pass unchanged')
  t.same(basicEncodingChanges({ clientId: 'gateway', clientSecret: 'a-b' }), ['clientSecret'])
  t.same(basicEncodingChanges({ clientId: 'my.client', clientSecret: 'a_b' }), ['clientId', 'clientSecret'])
  t.same(basicEncodingChanges({ clientId: 'gateway', clientSecret: undefined }), [])
  // The verdict agrees with what openid-client really sends, character by character.
  const sent = async (secret: string): Promise<string> => {
    const headers = new Headers()
    oidc.ClientSecretBasic(secret)({} as oidc.ServerMetadata, { client_id: 'gateway' } as oidc.ClientMetadata, new URLSearchParams(), headers)
    const basic = Buffer.from((headers.get('authorization') ?? '').slice(6), 'base64').toString('utf8')
    return basic.slice(basic.indexOf(':') + 1)
  }
  for (let code = 0x20; code < 0x7f; code++) {
    const c = String.fromCharCode(code)
    const changes = (await sent(`x${c}`)) !== `x${c}`
    t.equal(
      basicEncodingChanges({ clientId: 'gateway', clientSecret: `x${c}` }).length === 1,
      changes,
      `${JSON.stringify(c)}: ${changes ? 'changed' : 'unchanged'}`,
    )
  }
})

t.test("private_key_jwt: the assertion's aud is the issuer, or the token endpoint with clientAssertionAudience: token_endpoint", async (t) => {
  const server = { issuer: 'https://idp.example.com', token_endpoint: 'https://idp.example.com/oauth2/token' }
  t.equal(assertionAudience(undefined, server), undefined, "unset: openid-client's own, the issuer")
  t.equal(assertionAudience('issuer', server), undefined)
  t.equal(assertionAudience('token_endpoint', server), server.token_endpoint)
  t.throws(() => assertionAudience('token_endpoint', { issuer: server.issuer }), { name: 'ProviderMetadataError', message: /no token_endpoint/ })

  // What the authentication really sends, as openid-client builds the request.
  const clientKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
  const sentAudience = async (clientAssertionAudience?: 'issuer' | 'token_endpoint'): Promise<unknown> => {
    const auth = await clientAuthentication(
      { clientAuthMethod: 'private_key_jwt', clientSecret: undefined, clientKey, clientKeyId: undefined, clientAssertionAudience },
      server,
    )
    const body = new URLSearchParams()
    // Typed as returning nothing, it signs asynchronously (oauth4webapi's PrivateKeyJwt).
    await Promise.resolve(auth(server, { client_id: 'gateway' }, body, new Headers()))
    return decodeJwt(body.get('client_assertion') ?? '').aud
  }
  t.equal(await sentAudience(), server.issuer)
  t.equal(await sentAudience('token_endpoint'), server.token_endpoint)
})
