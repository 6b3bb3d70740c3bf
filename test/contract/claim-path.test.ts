// Claim paths (contract/claim-path.ts): one spelling names one claim, nested or dotted, and only
// own properties of objects are walked.

import t from 'tap'
import {
  claimAt,
  claimMappingOf,
  DEFAULT_CLAIM_MAPPING,
  formatClaimPath,
  keptClaimNames,
  mappedGroups,
  mappedUser,
  parseClaimPath,
} from '#src/contract/claim-path'

t.test('paths: bare segments joined by `.`, quoted ones in brackets', async (t) => {
  t.strictSame(parseClaimPath('sub'), ['sub'])
  t.strictSame(parseClaimPath('realm_access.roles'), ['realm_access', 'roles'])
  t.strictSame(parseClaimPath('resource_access.my-app.roles'), ['resource_access', 'my-app', 'roles'])
  t.strictSame(parseClaimPath('resource_access["my.app"].roles'), ['resource_access', 'my.app', 'roles'])
  t.strictSame(parseClaimPath('["https://example.com/roles"]'), ['https://example.com/roles'])
  t.strictSame(parseClaimPath('["a\\"b"].c'), ['a"b', 'c'], 'a JSON string, escapes included')
  t.strictSame(parseClaimPath('a["b"]["c"]'), ['a', 'b', 'c'])
  t.strictSame(parseClaimPath('cognito:groups'), ['cognito:groups'], "AWS Cognito's, unquoted")
  for (const path of ['realm_access.roles', 'resource_access["my.app"].roles', '["https://example.com/roles"]', 'a["b c"]']) {
    t.equal(formatClaimPath(parseClaimPath(path)), path, `${path} written back as read`)
  }
})

t.test('paths: anything ambiguous or malformed is refused', async (t) => {
  for (const path of [
    '',
    'https://example.com/roles',
    'a..b',
    'a.',
    '.a',
    'a b',
    '["a"',
    "['a']",
    '[""]',
    '["a"]b',
    'a[b]',
    '["a"x]',
    'a.["b"]',
    'r\u00f4le',
  ]) {
    t.throws(() => parseClaimPath(path), TypeError, JSON.stringify(path))
  }
})

t.test('claimAt walks own properties of objects only', async (t) => {
  const claims = { sub: 'x', realm_access: { roles: ['a'] }, list: [{ a: 1 }], 'https://example.com/roles': ['r'] }
  t.strictSame(claimAt(claims, ['realm_access', 'roles']), ['a'])
  t.strictSame(claimAt(claims, ['https://example.com/roles']), ['r'])
  t.equal(claimAt(claims, ['realm_access', 'missing']), undefined)
  t.equal(claimAt(claims, ['list', '0']), undefined, 'no array index')
  t.equal(claimAt(claims, ['sub', 'length']), undefined, 'nothing of a string')
  t.equal(claimAt(claims, ['constructor']), undefined, 'never Object.prototype')
  t.equal(claimAt(claims, ['realm_access', '__proto__']), undefined)
  t.equal(claimAt({ a: null }, ['a', 'b']), undefined)
})

t.test('mapping: the default is one shared object; the user is a string or a number', async (t) => {
  t.equal(claimMappingOf({}), DEFAULT_CLAIM_MAPPING)
  t.equal(claimMappingOf({ userClaim: 'sub', groupsClaim: 'groups' }), DEFAULT_CLAIM_MAPPING, 'the defaults written out map nothing')
  const mapping = claimMappingOf({ userClaim: 'email', groupsClaim: 'realm_access.roles' })
  t.equal(mapping.isDefault, false)
  t.equal(mappedUser({ sub: 's', email: 'a@example.com' }, mapping), 'a@example.com')
  t.equal(mappedUser({ sub: 's', email: 7 }, mapping), '7')
  for (const email of [undefined, '', null, true, ['a'], { a: 1 }, Number.NaN]) t.equal(mappedUser({ sub: 's', email }, mapping), undefined, String(email))
  t.strictSame(mappedGroups({ sub: 's', groups: ['g'], realm_access: { roles: ['r'] } }, mapping), ['r'])
  t.equal(mappedGroups({ sub: 's', groups: ['g'] }, mapping), undefined, 'never the `groups` claim beside it')
})

t.test('the session keeps the top-level claims the mapping, the allow rules and the extra headers read', async (t) => {
  t.strictSame(
    keptClaimNames({
      providers: [{ userClaim: 'email', groupsClaim: 'resource_access["my.app"].roles' }, {}],
      upstreams: [
        { claimHeaders: { 'X-Name': 'name', 'X-Roles': '["https://example.com/roles"]' } },
        { allow: { claims: { tenant: ['a'] } }, rules: [{ allow: { claims: { department: ['b'] } } }, { allow: {} }] },
        {},
      ],
    }).sort(),
    ['department', 'email', 'groups', 'https://example.com/roles', 'name', 'resource_access', 'sub', 'tenant'],
  )
})
