import t from 'tap'
import { problemCode } from '../fixtures/http.ts'
import { CLIENT_ID, startStack } from '../fixtures/stack.ts'

// GET /api/v1/openid/userinfo against the dev provider: the signed-in user as oauth2-proxy's
// /oauth2/userinfo answers it (user, email, groups, preferredUsername) plus the claims the
// provider's `additionalClaims` names; the contract's 401 without a session, after a logout, or
// with a refused Bearer token; 405 for another method. Every answer is `no-store`.

const USERINFO = '/api/v1/openid/userinfo'
const JSON_ACCEPT = { accept: 'application/json' }

const stack = await startStack(t, {
  provider: { extraClaims: { department: (username) => `dept-${username}`, employee_number: () => 42 } },
  // `name` is a claim of the ID token that nobody names: it is neither kept nor answered.
  config: { provider: { additionalClaims: ['department', 'employee_number', 'email'] } },
})

t.test('signed in: the user, email, groups, preferred username and the named claims; never a token', async (t) => {
  const browser = await stack.signedIn('alice')
  const res = await browser.fetch(stack.gw + USERINFO, { headers: JSON_ACCEPT })
  t.equal(res.status, 200)
  t.match(res.headers.get('content-type'), /^application\/json/)
  t.equal(res.headers.get('cache-control'), 'no-store')
  t.strictSame(await res.json(), {
    user: 'alice',
    email: 'alice@example.com',
    groups: ['admins', 'staff'],
    preferredUsername: 'alice',
    department: 'dept-alice',
    employee_number: 42,
  })
})

t.test('a user without groups: `groups` is left out, as oauth2-proxy does', async (t) => {
  const browser = await stack.signedIn('carol')
  const res = await browser.fetch(stack.gw + USERINFO, { headers: JSON_ACCEPT })
  t.equal(res.status, 200)
  const body = (await res.json()) as Record<string, unknown>
  t.notOk('groups' in body)
  t.equal(body.user, 'carol')
})

t.test('without a session: 401 unauthenticated with a Bearer challenge', async (t) => {
  const res = await fetch(stack.gw + USERINFO, { headers: JSON_ACCEPT })
  t.equal(res.status, 401)
  t.equal(res.headers.get('www-authenticate'), 'Bearer')
  t.equal(res.headers.get('cache-control'), 'no-store')
  t.equal(await problemCode(res), 'unauthenticated')
})

t.test('after a logout: 401', async (t) => {
  const browser = await stack.signedIn('bob')
  const before = await browser.fetch(stack.gw + USERINFO, { headers: JSON_ACCEPT })
  t.equal(before.status, 200)
  await before.body?.cancel()
  const out = await browser.fetch(stack.gw + '/api/v1/openid/logout', { method: 'DELETE', headers: JSON_ACCEPT })
  t.equal(out.status, 200)
  await out.body?.cancel()
  const res = await browser.fetch(stack.gw + USERINFO, { headers: JSON_ACCEPT })
  t.equal(res.status, 401)
  t.equal(await problemCode(res), 'unauthenticated')
})

t.test('a Bearer token of the provider answers with its claims; a refused one is 401 invalid_token', async (t) => {
  const token = await stack.provider!.signJwt({ sub: 'service-a', aud: CLIENT_ID, scope: 'api', email: 'svc@example.com', department: 'ops', name: 'Service' })
  const res = await fetch(stack.gw + USERINFO, { headers: { ...JSON_ACCEPT, authorization: `Bearer ${token}` } })
  t.equal(res.status, 200)
  t.equal(res.headers.get('cache-control'), 'no-store')
  t.strictSame(await res.json(), { user: 'service-a', email: 'svc@example.com', department: 'ops' })
  const refused = await fetch(stack.gw + USERINFO, { headers: { ...JSON_ACCEPT, authorization: 'Bearer not-a-token' } })
  t.equal(refused.status, 401)
  t.match(refused.headers.get('www-authenticate'), /^Bearer error="invalid_token"/)
  t.equal(await problemCode(refused), 'unauthenticated')
})

t.test('another method: 405 naming GET and HEAD', async (t) => {
  const browser = await stack.signedIn('alice')
  const res = await browser.fetch(stack.gw + USERINFO, { method: 'POST', headers: JSON_ACCEPT })
  t.equal(res.status, 405)
  t.equal(res.headers.get('allow'), 'GET, HEAD')
  t.equal(await problemCode(res), 'method_not_allowed')
})
