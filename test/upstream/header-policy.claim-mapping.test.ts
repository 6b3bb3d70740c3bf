// The identity headers under a provider's claim mapping and an upstream's extra identity headers
// (header-policy.ts): values rendered by the headerValue rules, computed once per frozen claims.

import t from 'tap'
import { claimMappingOf, DEFAULT_CLAIM_MAPPING } from '#src/contract/claim-path'
import { claimHeadersOf, claimHeaderValue, identityHeadersToRemove, identityHeaderUnion, identityHeaderValues } from '#src/upstream/header-policy'
import { DEFAULT_IDENTITY_HEADER_NAMES } from '../fixtures/config/base.ts'

const ISSUER = 'https://idp.example.com'
const names = { ...DEFAULT_IDENTITY_HEADER_NAMES }

t.test('extra header values: text for scalars, lists comma-joined, objects never', async (t) => {
  t.equal(claimHeaderValue('Alice'), 'Alice')
  t.equal(claimHeaderValue(42), '42')
  t.equal(claimHeaderValue(-1.5), '-1.5')
  t.equal(claimHeaderValue(true), 'true')
  t.equal(claimHeaderValue(false), 'false')
  t.equal(claimHeaderValue(['a', 1, true]), 'a,1,true')
  t.equal(claimHeaderValue(['a', 'b,c', { x: 1 }, ['n'], null, 'd']), 'a,d', 'elements with `,`, objects and nested lists left out')
  for (const refused of [{ building: 'B' }, null, undefined, Number.NaN, Infinity, '', ' padded', 'a\r\nX-Injected: 1', 'nul\u0000', 'nel\u0085', [], [{}]]) {
    t.equal(claimHeaderValue(refused), null, JSON.stringify(refused) ?? String(refused))
  }
  t.equal(claimHeaderValue('Zoë'), Buffer.from('Zoë', 'utf8').toString('latin1'), 'UTF-8 bytes, as the identity headers')
})

t.test('the mapped user and groups, and the extra headers, in the identity headers', async (t) => {
  const mapping = claimMappingOf({ userClaim: 'email', groupsClaim: 'realm_access.roles' })
  const extra = claimHeadersOf({ 'X-User-Name': 'name', 'X-Roles': '["https://example.com/roles"]', 'X-Office': 'office' })
  const claims = Object.freeze({
    sub: 'opaque-0123',
    email: 'alice@example.com',
    name: 'Alice',
    groups: ['not-these'],
    realm_access: Object.freeze({ roles: Object.freeze(['admin', 'user,evil']) }),
    'https://example.com/roles': Object.freeze(['r1']),
    office: Object.freeze({ building: 'B' }),
  })
  const values = identityHeaderValues(claims, names, ISSUER, mapping, extra)
  t.equal(values['x-forwarded-user'], 'alice@example.com')
  t.equal(values['x-forwarded-groups'], 'admin', 'a group with `,` is left out, as always')
  t.equal(values['x-user-name'], 'Alice')
  t.equal(values['x-roles'], 'r1')
  t.equal(values['x-office'], undefined)
  t.equal(identityHeaderValues(claims, names, ISSUER, mapping, extra), values, 'computed once per frozen claims')
  const plain = identityHeaderValues(claims, names, ISSUER)
  t.equal(plain['x-forwarded-user'], 'opaque-0123', 'the default mapping reads `sub`, cached apart')
  t.equal(plain['x-forwarded-groups'], 'not-these')
  t.equal(plain['x-user-name'], undefined)
  t.equal(identityHeaderValues(claims, names, ISSUER, DEFAULT_CLAIM_MAPPING, claimHeadersOf(undefined)), plain, 'mapping nothing is the cache it always was')
  const other = claimMappingOf({ userClaim: 'name' })
  t.equal(identityHeaderValues(claims, names, ISSUER, other, extra)['x-forwarded-user'], 'Alice', 'another mapping (a reload) is not served from the first one')
  t.equal(claimHeadersOf(undefined).length, 0)
  const config = { 'X-A': 'a' }
  t.equal(claimHeadersOf(config), claimHeadersOf(config), 'parsed once per configuration')
})

t.test('the extra header names join the union: stripped by the proxy, named for removal by the checks', async (t) => {
  const union = identityHeaderUnion([names], 'X-Identity-Assertion', ['X-User-Name'])
  t.ok(union.names.includes('x-user-name'))
  t.ok(union.has('X_User_Name'), '`_` folded')
  t.strictSame(
    identityHeadersToRemove(union, { x_user_name: 'forged' }, new Set(['x-forwarded-user'])).filter((n) => n.includes('user-name') || n.includes('user_name')),
    ['x-user-name', 'x_user_name'],
  )
  t.notOk(identityHeaderUnion([names], 'X-Identity-Assertion').has('x-user-name'), 'without claimHeaders, as before')
})
