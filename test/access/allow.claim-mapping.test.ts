// `allow.groups` under a provider's groupsClaim, and the userClaim verdict (access/allow.ts).

import t from 'tap'
import { createAllowPolicy, userClaimVerdict } from '#src/access/allow'
import { claimMappingOf, DEFAULT_CLAIM_MAPPING } from '#src/contract/claim-path'

const keycloak = claimMappingOf({ groupsClaim: 'realm_access.roles' })
const auth0 = claimMappingOf({ groupsClaim: '["https://example.com/roles"]' })

t.test('allow.groups reads the mapped claim, and only it', async (t) => {
  const policy = createAllowPolicy({ groups: ['admin'] })
  const claims = { sub: 's', groups: ['admin'], realm_access: { roles: ['user'] }, 'https://example.com/roles': ['admin'] }
  t.equal(policy(claims, 'default').allowed, true, 'the default mapping reads `groups`')
  t.equal(policy(claims, 'default', DEFAULT_CLAIM_MAPPING).allowed, true)
  t.match(policy(claims, 'default', keycloak), { allowed: false, rule: 'groups' }, "the provider's own `groups` beside the roles is not read")
  t.equal(policy({ sub: 's', realm_access: { roles: ['admin'] } }, 'default', keycloak).allowed, true)
  t.equal(policy({ sub: 's', realm_access: { roles: 'admin' } }, 'default', keycloak).allowed, true, 'one string')
  t.equal(policy(claims, 'default', auth0).allowed, true, 'a URL-named claim')
  t.match(
    policy({ sub: 's', realm_access: {} }, 'default', keycloak),
    { allowed: false, rule: 'groups', missingClaim: 'realm_access.roles' },
    'the missing claim is named by its path',
  )
  t.match(policy({ sub: 's', realm_access: { roles: { admin: true } } }, 'default', keycloak), { allowed: false, rule: 'groups' })
})

t.test('userClaim: a user without a usable mapped value is refused', async (t) => {
  const email = claimMappingOf({ userClaim: 'email' })
  t.equal(userClaimVerdict({ sub: 's', email: 'a@example.com' }, email).allowed, true)
  t.equal(userClaimVerdict({ sub: 's', email: 12 }, email).allowed, true, 'a number')
  for (const value of [undefined, '', null, ['a'], { a: 1 }]) {
    t.match(userClaimVerdict({ sub: 's', email: value }, email), { allowed: false, rule: 'userClaim', missingClaim: 'email' }, String(value))
  }
})
