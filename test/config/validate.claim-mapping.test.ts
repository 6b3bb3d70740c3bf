// providers[].userClaim, groupsClaim and upstreams[].claimHeaders: what the schema refuses, each
// naming the key (docs/features/claim-mapping.md); claimHeaders' names, checked across keys, are
// tested in test/config/cross-key/upstreams.test.ts.

import t from 'tap'
import { problems, resolve, withUpstream } from '../fixtures/config/base.ts'

t.test('claim paths: valid ones are kept as written, unset maps nothing', async (t) => {
  t.strictSame(problems({ provider: { userClaim: 'email', groupsClaim: 'resource_access["my.app"].roles' } }), [])
  t.strictSame(problems({ provider: { groupsClaim: '["https://example.com/roles"]' } }), [])
  t.strictSame(problems(withUpstream({ claimHeaders: { 'X-User-Name': 'name', 'X-Roles': 'realm_access.roles' } })), [])
  const config = resolve({ provider: { userClaim: 'email' } })
  t.equal(config.providers[0]?.userClaim, 'email')
  t.equal(resolve().providers[0]?.userClaim, undefined)
  t.equal(resolve().upstreams[0]?.claimHeaders, undefined)
})

t.test('claim paths: a URL left unquoted or a malformed path is refused, naming the key', async (t) => {
  t.match(problems({ provider: { groupsClaim: 'https://example.com/roles' } }), [/^provider\.groupsClaim: must be a claim path: an unquoted segment/])
  t.match(problems({ provider: { userClaim: 'a..b' } }), [/^provider\.userClaim: must be a claim path/])
  t.match(problems(withUpstream({ claimHeaders: { 'X-A': '' } })), [/^upstreams\[0\]\.claimHeaders\.X-A: must be a claim path/])
})

