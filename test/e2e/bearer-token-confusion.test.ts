import t from 'tap'
import { startAdversarialStack } from '../fixtures/adversarial-provider.ts'
import { rawRequest } from '../fixtures/http.ts'
import { CLIENT_ID, type Stack } from '../fixtures/stack.ts'

// Provider-signed JWTs that are not access tokens do not sign a Bearer request in: an ID token
// for several audiences (RFC 8725 3.11 explicit typing, 3.12 tokens told apart by audience) and a
// token issued in the future. provider.bearer.requireAtJwt accepts RFC 9068 `typ: at+jwt` only.

const YEAR = 365 * 24 * 3600

function bearer(stack: Stack, token: string) {
  return rawRequest(stack.gw, '/api', { headers: { accept: 'application/json', authorization: `Bearer ${token}` } })
}

t.test('default rules', async (t) => {
  const { stack, provider } = await startAdversarialStack(t)

  t.test('an ID token for the client and another audience, typ JWT, no nonce: 401', async (t) => {
    const idToken = await provider.signJwt(
      { aud: [CLIENT_ID, 'https://other.example.com'], azp: CLIENT_ID, auth_time: Math.floor(Date.now() / 1000) },
      { typ: 'JWT' },
    )
    t.equal((await bearer(stack, idToken)).status, 401)
  })

  t.test('the same without any typ: 401', async (t) => {
    const idToken = await provider.signJwt({ aud: [CLIENT_ID, 'https://other.example.com'] }, { typ: null })
    t.equal((await bearer(stack, idToken)).status, 401)
  })

  t.test('an access token of the same audiences with a scope (Keycloak, Entra ID shapes): 200', async (t) => {
    const accessToken = await provider.signJwt({ aud: [CLIENT_ID, 'https://other.example.com'], scope: 'read' }, { typ: 'JWT' })
    t.equal((await bearer(stack, accessToken)).status, 200)
  })

  t.test('iat a year in the future: 401', async (t) => {
    const now = Math.floor(Date.now() / 1000)
    t.equal((await bearer(stack, await provider.signJwt({ iat: now + YEAR, exp: now + YEAR + 300 }))).status, 401)
  })

  t.test('iat within the clock tolerance: 200', async (t) => {
    const now = Math.floor(Date.now() / 1000)
    t.equal((await bearer(stack, await provider.signJwt({ iat: now + 5 }))).status, 200)
  })
})

t.test('provider.bearer.requireAtJwt: only typ at+jwt', async (t) => {
  const { stack, provider } = await startAdversarialStack(t, { config: { provider: { bearer: { requireAtJwt: true } } } })
  t.equal((await bearer(stack, await provider.signJwt({ scope: 'read' }, { typ: 'JWT' }))).status, 401, 'typ JWT, even with a scope')
  t.equal((await bearer(stack, await provider.signJwt({ scope: 'read' }, { typ: null }))).status, 401, 'no typ')
  t.equal((await bearer(stack, await provider.signJwt({}, { typ: 'at+jwt' }))).status, 200, 'at+jwt')
  t.equal((await bearer(stack, await provider.signJwt({}, { typ: 'application/at+jwt' }))).status, 200, 'application/at+jwt')
})
