// providers[].userClaim, groupsClaim and upstreams[].claimHeaders: what the schema and
// cross-key-rules.ts refuse, each naming the key (docs/features/claim-mapping.md).

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

t.test('claimHeaders names: checked like identityHeaders', async (t) => {
  t.match(problems(withUpstream({ claimHeaders: { Authorization: 'name' } })), [/claimHeaders.*must not be a header that HTTP or the gateway itself manages/])
  t.match(problems(withUpstream({ claimHeaders: { 'X-Auth-Request-User': 'name' } })), [/must not be a header that HTTP or the gateway itself manages/])
  t.match(problems(withUpstream({ claimHeaders: { 'Bad Name': 'name' } })), [/must be a valid HTTP header name/])
  t.strictSame(problems(withUpstream({ claimHeaders: { 'X-Forwarded-User': 'name' } })), [
    'upstreams[0].claimHeaders.X-Forwarded-User: same header as identityHeaders.user',
  ])
  t.strictSame(problems(withUpstream({ claimHeaders: { x_forwarded_email: 'name' } })), [
    'upstreams[0].claimHeaders.x_forwarded_email: same header as identityHeaders.email',
  ])
  t.strictSame(problems(withUpstream({ claimHeaders: { 'X-Identity-Assertion': 'name' } })), [
    'upstreams[0].claimHeaders.X-Identity-Assertion: same header as assertions.header',
  ])
  t.strictSame(problems(withUpstream({ claimHeaders: { 'X-Name': 'name', x_name: 'department' } })), [
    'upstreams[0].claimHeaders.x_name: same header as claimHeaders.X-Name',
  ])
  t.match(problems(withUpstream({ claimHeaders: {} })), [/claimHeaders: must not be empty/])
})
