import Fastify from 'fastify'
import t from 'tap'
import { claimMappingOf } from '#src/contract/claim-path'
import { GatewayError } from '#src/contract/errors'
import type { Identity } from '#src/contract/identity'
import type { AuthenticationResult } from '#src/access/authenticate'
import { userinfoOf, userinfoRoute } from '#src/routes/userinfo'

// The userinfo answer's members (routes/userinfo.ts userinfoOf) from an identity and the claims its
// provider names, and the route's refusals for each authentication result. The route against a
// real provider, a session, a logout and a Bearer token is test/e2e/userinfo.test.ts.

function identity(claims: Record<string, unknown>, mapping: { userClaim?: string; groupsClaim?: string } = {}): Identity {
  return {
    claims: { sub: 'u1', ...claims },
    accessToken: 'secret-access-token',
    provider: 'default',
    issuer: 'https://op.example',
    mapping: claimMappingOf(mapping),
  }
}

t.test("oauth2-proxy's members: user, email, groups and preferredUsername left out when empty", async (t) => {
  t.strictSame(userinfoOf(identity({}), []), { user: 'u1', email: '' })
  t.strictSame(userinfoOf(identity({ email: 'a@example.com', groups: ['x', 'y'], preferred_username: 'al' }), []), {
    user: 'u1',
    email: 'a@example.com',
    groups: ['x', 'y'],
    preferredUsername: 'al',
  })
  t.strictSame(userinfoOf(identity({ groups: 'only' }), []).groups, ['only'], 'one group as a string')
  t.notOk('groups' in userinfoOf(identity({ groups: [] }), []), 'no groups: left out')
  t.strictSame(userinfoOf(identity({ groups: [1, 'a', null] }), []).groups, ['a'], 'only strings are groups')
})

t.test("the provider's claim mapping: userClaim and groupsClaim", async (t) => {
  const answer = userinfoOf(identity({ upn: 'al@corp', realm_access: { roles: ['r1'] } }, { userClaim: 'upn', groupsClaim: 'realm_access.roles' }), [])
  t.equal(answer.user, 'al@corp')
  t.strictSame(answer.groups, ['r1'])
})

t.test('named claims: added when the identity has them, never replacing a member, never a token', async (t) => {
  const answer = userinfoOf(identity({ email: 'a@example.com', department: 'eng', nested: { a: [1] }, user: 'other', groups: ['g'] }), [
    'department',
    'nested',
    'absent',
    'user',
    'email',
    'groups',
  ])
  t.strictSame(answer, { user: 'u1', email: 'a@example.com', groups: ['g'], department: 'eng', nested: { a: [1] } })
  t.notOk(JSON.stringify(answer).includes('secret-access-token'))
})

t.test('the route: 200 no-store for an identity, the contract 401 for each refusal', async (t) => {
  let result: AuthenticationResult
  const app = Fastify()
  t.teardown(() => app.close())
  app.setErrorHandler((err, _req, reply) => {
    if (!(err instanceof GatewayError)) return reply.code(500).send({ message: String(err) })
    return reply.code(err.status).headers(err.headers).send({ code: err.code, signInUrl: err.extensions.signInUrl })
  })
  await app.register(userinfoRoute, {
    authentication: { authenticate: async () => result },
    publicUrl: 'https://gw.example',
    additionalClaims: new Map([['default', ['department']]]),
  })
  result = identity({ department: 'eng', name: 'not named' })
  const ok = await app.inject({ method: 'GET', url: '/api/v1/openid/userinfo' })
  t.equal(ok.statusCode, 200)
  t.equal(ok.headers['cache-control'], 'no-store')
  t.strictSame(ok.json(), { user: 'u1', email: '', department: 'eng' })
  const cases: Array<[AuthenticationResult, string]> = [
    [undefined, 'Bearer'],
    ['expired', 'Bearer error="invalid_token"'],
    ['refreshable', 'Bearer error="invalid_token"'],
    ['invalid_token', 'Bearer error="invalid_token"'],
  ]
  for (const [refusal, challenge] of cases) {
    result = refusal
    const res = await app.inject({ method: 'GET', url: '/api/v1/openid/userinfo' })
    t.equal(res.statusCode, 401, String(refusal))
    t.equal(res.headers['www-authenticate'], challenge, String(refusal))
    t.equal(res.headers['cache-control'], 'no-store', String(refusal))
    t.strictSame(res.json(), { code: 'unauthenticated', signInUrl: 'https://gw.example/api/v1/openid/redirect' }, String(refusal))
  }
})
