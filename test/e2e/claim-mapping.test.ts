// Claim mapping against the real oidc-provider: its accounts carry Keycloak's nested
// `realm_access.roles` and `resource_access.<client>.roles`, an Auth0-style URL-named claim and
// claims of every JSON type. The provider maps the user to `email` and the groups to the realm
// roles (docs/features/claim-mapping.md); the upstream adds extra identity headers from claims.

import * as jose from 'jose'
import t from 'tap'
import { checkRequest, serveGatewayGrpc } from '../fixtures/ext-authz-grpc.ts'
import { checkRequestFor, HEADERS_TO_EXT_AUTHZ, sendCheck } from '../fixtures/envoy.ts'
import { rawRequest } from '../fixtures/http.ts'
import { generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gatewayCookies, startStack } from '../fixtures/stack.ts'
import { eventually } from '../fixtures/poll.ts'

const REALM_ROLES: Record<string, string[]> = { alice: ['realm-admin', 'user'], bob: ['user'] }

const extraClaims = {
  realm_access: (user: string) => ({ roles: REALM_ROLES[user] ?? [] }),
  resource_access: (user: string) => ({ 'my.app': { roles: user === 'alice' ? ['editor', 'viewer'] : ['viewer'] } }),
  'https://example.com/roles': () => ['auth0-role'],
  department: () => 'Engineering',
  employee_number: () => 42,
  on_call: () => false,
  office: () => ({ building: 'B' }),
}

const CLAIM_HEADERS = {
  'X-User-Name': 'name',
  'X-Department': 'department',
  'X-Client-Roles': 'resource_access["my.app"].roles',
  'X-Auth0-Roles': '["https://example.com/roles"]',
  'X-Employee': 'employee_number',
  'X-On-Call': 'on_call',
  // An object: never a header.
  'X-Office': 'office',
}

const keyDir = mkdtempSync(join(tmpdir(), 'ogw-claim-map-'))
const keyFile = join(keyDir, 'assertion.pem')
writeFileSync(keyFile, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }))

const UPSTREAMS = [
  { name: 'app', match: { pathPrefix: '/' }, publicPaths: ['/public/**'], identityAssertion: true, claimHeaders: CLAIM_HEADERS },
  { name: 'admin', match: { pathPrefix: '/admin' }, allow: { groups: ['realm-admin'] } },
  // `admins` is in the provider's own `groups` claim of alice, not in her realm roles.
  { name: 'legacy', match: { pathPrefix: '/legacy' }, allow: { groups: ['admins'] } },
]

const JSON_ACCEPT = { accept: 'application/json' }

t.test('claim mapping: user, groups and extra identity headers from where the provider keeps them', async (t) => {
  const lines: string[] = []
  const stack = await startStack(t, {
    provider: { extraClaims },
    config: { provider: { userClaim: 'email', groupsClaim: 'realm_access.roles' }, assertions: { signingKeys: [keyFile] }, log: { level: 'info' } },
    upstreams: UPSTREAMS,
    logStream: { write: (line: string) => void lines.push(line) },
  })
  const alice = await gatewayCookies(stack, 'alice')
  const bob = await gatewayCookies(stack, 'bob')

  t.test('the upstream receives the mapped user and groups and the extra headers', async (t) => {
    const before = stack.upstream.requests.length
    const res = await rawRequest(stack.gw, '/page', { headers: { cookie: alice, ...JSON_ACCEPT } })
    t.equal(res.status, 200)
    const received = stack.upstream.requests[before]?.headers ?? {}
    t.equal(received['x-forwarded-user'], 'alice@example.com', 'the user is the email claim')
    t.equal(received['x-forwarded-groups'], 'realm-admin,user', 'the groups are the realm roles')
    t.equal(received['x-user-name'], 'Alice')
    t.equal(received['x-department'], 'Engineering')
    t.equal(received['x-client-roles'], 'editor,viewer', 'a client id with a dot, quoted')
    t.equal(received['x-auth0-roles'], 'auth0-role', 'a URL-named claim, quoted')
    t.equal(received['x-employee'], '42', 'a number as text')
    t.equal(received['x-on-call'], 'false', 'a boolean as text')
    t.equal(received['x-office'], undefined, 'an object is no header')
  })

  t.test("a client's copies of the extra headers never reach the upstream through the proxy", async (t) => {
    const forged = { 'X-Office': 'forged', X_Office: 'forged', 'x-user-name': 'Mallory', X_User_Name: 'Mallory' }
    for (const [path, credentials] of [
      ['/public/x', {}],
      ['/page', { cookie: alice }],
    ] as const) {
      const before = stack.upstream.requests.length
      const res = await rawRequest(stack.gw, path, { headers: { ...forged, ...credentials, ...JSON_ACCEPT } })
      t.equal(res.status, 200)
      const received = stack.upstream.requests[before]?.headers ?? {}
      t.equal(received['x-office'], undefined, `${path}: no X-Office`)
      t.equal(received.x_office, undefined, `${path}: no X_Office`)
      t.equal(received.x_user_name, undefined, `${path}: no X_User_Name`)
      t.equal(received['x-user-name'], path === '/page' ? 'Alice' : undefined, `${path}: X-User-Name is the session's or none`)
    }
  })

  t.test('allow.groups decides on the mapped groups', async (t) => {
    const status = async (path: string, cookie: string): Promise<number> => (await rawRequest(stack.gw, path, { headers: { cookie, ...JSON_ACCEPT } })).status
    t.equal(await status('/admin/x', alice), 200, 'alice has the realm role')
    t.equal(await status('/admin/x', bob), 403, 'bob has not')
    t.equal(await status('/legacy/x', alice), 403, "the provider's own `groups` claim is not read when groupsClaim names another")
  })

  t.test('forward-auth answers the mapped identity and the extra headers', async (t) => {
    const res = await rawRequest(stack.gw, '/api/v1/openid/auth', {
      headers: { cookie: alice, 'x-original-method': 'GET', 'x-original-url': `${stack.gw}/page` },
    })
    t.equal(res.status, 200)
    t.equal(res.headers['x-auth-request-user'], 'alice@example.com')
    t.equal(res.headers['x-auth-request-groups'], 'realm-admin,user')
    t.equal(res.headers['x-user-name'], 'Alice')
  })

  t.test('Envoy over HTTP: the allow sets the extra headers and names every forged copy for removal', async (t) => {
    const host = new URL(stack.gw).host
    for (const [path, credentials] of [
      ['/public/x', {}],
      ['/page', { cookie: alice }],
    ] as const) {
      const answer = await sendCheck(
        stack.gw,
        checkRequestFor({ method: 'GET', path, headers: { host, 'x-office': 'forged', x_user_name: 'Mallory', ...credentials } }, [
          ...HEADERS_TO_EXT_AUTHZ,
          'x-office',
          { contains: '_' },
        ]),
      )
      t.equal(answer.status, 200)
      const removed = String(answer.headers['x-envoy-auth-headers-to-remove']).split(',')
      t.ok(removed.includes('x-office'), 'x-office named for removal')
      t.ok(removed.includes('x_user_name'), 'the `_` spelling named for removal')
      t.equal(answer.headers['x-user-name'], 'cookie' in credentials ? 'Alice' : undefined)
      if ('cookie' in credentials) t.notOk(removed.includes('x-user-name'), 'a header the allow sets is not removed')
      else t.ok(removed.includes('x-user-name'), 'anonymous: every extra header named for removal')
    }
  })

  t.test('Envoy over gRPC: headers_to_remove names the extra headers in every spelling', async (t) => {
    const client = await serveGatewayGrpc(t, stack)
    const host = new URL(stack.gw).host
    const res = await client.check(
      checkRequest({
        method: 'GET',
        host,
        path: '/page',
        scheme: 'http',
        headers: { ':authority': host, cookie: alice, 'x-office': 'forged', x_user_name: 'Mallory' },
      }),
    )
    t.equal(res.status?.code, 0)
    const remove = res.ok_response?.headers_to_remove ?? []
    t.ok(remove.includes('x-office'))
    t.ok(remove.includes('x_user_name'))
    t.equal(res.ok_response?.headers.find((h) => h.header.key.toLowerCase() === 'x-user-name')?.header.value, 'Alice')
  })

  t.test("the request line names the mapped user beside the session's subject", async (t) => {
    await rawRequest(stack.gw, '/page?line=1', { headers: { cookie: alice, ...JSON_ACCEPT } })
    const line = await eventually('the request line', () =>
      lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'request' && l.url === '/page?line=1'),
    )
    t.equal(line.sub, 'alice')
    t.equal(line.user, 'alice@example.com')
  })

  t.test('the signed assertion: sub stays the subject, user and groups are mapped, the extra headers as sent', async (t) => {
    const before = stack.upstream.requests.length
    await rawRequest(stack.gw, '/page', { headers: { cookie: alice, ...JSON_ACCEPT } })
    const assertion = String(stack.upstream.requests[before]?.headers['x-identity-assertion'])
    const jwks = jose.createRemoteJWKSet(new URL(`${stack.gw}/.well-known/jwks.json`))
    const { payload } = await jose.jwtVerify(assertion, jwks, { issuer: stack.gw, audience: 'app' })
    t.equal(payload.sub, 'alice', "the provider's subject")
    t.equal(payload.user, 'alice@example.com')
    t.strictSame(payload.groups, ['realm-admin', 'user'])
    t.strictSame(payload.headers, {
      'x-user-name': 'Alice',
      'x-department': 'Engineering',
      'x-client-roles': 'editor,viewer',
      'x-auth0-roles': 'auth0-role',
      'x-employee': '42',
      'x-on-call': 'false',
    })
  })
})

t.test('a user without the mapped user claim is refused, not passed on without a user', async (t) => {
  const stack = await startStack(t, { provider: { extraClaims }, config: { provider: { userClaim: 'employee_id' } } })
  const alice = await gatewayCookies(stack, 'alice')
  const before = stack.upstream.requests.length
  const res = await rawRequest(stack.gw, '/page', { headers: { cookie: alice, ...JSON_ACCEPT } })
  t.equal(res.status, 403)
  t.equal(stack.upstream.requests.length, before, 'nothing reached the upstream')
})
