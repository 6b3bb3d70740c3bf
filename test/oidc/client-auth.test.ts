import t from 'tap'
import type * as oidc from 'openid-client'
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

t.test('client_secret_basic: which of the id and secret the Basic encoding (RFC 6749 2.3.1) changes, as the gateway sends it', async (t) => {
  t.same(basicEncodingChanges({ clientId: 'gateway', clientSecret: 'abcDEF0123' }), [], 'letters and digits pass unchanged')
  t.same(basicEncodingChanges({ clientId: 'gateway', clientSecret: 'a-b.c_d~e' }), [], 'so do the other unreserved characters (RFC 3986 2.3)')
  t.same(basicEncodingChanges({ clientId: 'my-client', clientSecret: 'test-client-secret-0123456789abcdef' }), [])
  for (const secret of ['a+b', 'a%b', 'a:b', 'a/b', 'a b', 'a=b', 'a!b', 'é'])
    t.same(basicEncodingChanges({ clientId: 'gateway', clientSecret: secret }), ['clientSecret'], secret)
  t.same(basicEncodingChanges({ clientId: 'my:client', clientSecret: 'a/b' }), ['clientId', 'clientSecret'])
  t.same(basicEncodingChanges({ clientId: 'gateway', clientSecret: undefined }), [])
  // The verdict agrees with what the gateway really sends, character by character.
  const sent = async (clientId: string, secret: string): Promise<[string, string]> => {
    const headers = new Headers()
    const auth = await clientAuthentication(
      { clientAuthMethod: 'client_secret_basic', clientSecret: secret, clientAssertionAudience: 'issuer' },
      {} as oidc.ServerMetadata,
    )
    auth({} as oidc.ServerMetadata, { client_id: clientId } as oidc.ClientMetadata, new URLSearchParams(), headers)
    const basic = Buffer.from((headers.get('authorization') ?? '').replace(/^Basic /, ''), 'base64').toString('utf8')
    const colon = basic.indexOf(':')
    return [basic.slice(0, colon), basic.slice(colon + 1)]
  }
  for (let code = 0x20; code < 0x7f; code++) {
    const c = String.fromCharCode(code)
    const [, secret] = await sent('gateway', `x${c}`)
    const changes = secret !== `x${c}`
    t.equal(
      basicEncodingChanges({ clientId: 'gateway', clientSecret: `x${c}` }).length === 1,
      changes,
      `${JSON.stringify(c)}: ${changes ? 'changed' : 'unchanged'}`,
    )
    // RFC 6749 Appendix B: what a provider's form decoding reads is the value itself.
    t.equal(decodeURIComponent(secret.replaceAll('+', ' ')), `x${c}`, `${JSON.stringify(c)} decodes back`)
  }
  t.same(await sent('my:client', 'a b+c/d~'), ['my%3Aclient', 'a+b%2Bc%2Fd~'], 'the id too; a space as "+"')
  t.same(await sent('gateway', "!'()*é"), ['gateway', '%21%27%28%29%2A%C3%A9'], 'UTF-8, and the sub-delimiters encodeURIComponent keeps')
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
