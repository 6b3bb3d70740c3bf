import t from 'tap'
import { claimSourcesOf, claimSourcesWanted, hasGroupOverage, mergedClaims, trustedEndpoint, userInfoSubjectMismatch } from '#src/oidc/claim-sources'

// The rules of src/oidc/claim-sources.ts on their own; against real providers: test/e2e/claim-sources.test.ts.

t.test('mergedClaims: the ID token speaks for the claims it defines, UserInfo for the others', async (t) => {
  const idToken = { iss: 'https://op', sub: 'u1', aud: 'gw', acr: 'mfa', amr: ['pwd'], auth_time: 1, sid: 's1', email: 'old@example.com', groups: ['a'] }
  const userInfo = { sub: 'u1', iss: 'https://evil', acr: 'none', sid: 'other', email: 'new@example.com', name: 'New', groups: ['b'], _claim_names: { x: 'y' } }
  t.same(mergedClaims(idToken, userInfo), {
    iss: 'https://op',
    sub: 'u1',
    aud: 'gw',
    acr: 'mfa',
    amr: ['pwd'],
    auth_time: 1,
    sid: 's1',
    email: 'new@example.com',
    groups: ['b'],
    name: 'New',
  })
})

t.test('userInfoSubjectMismatch: Core 5.3.2, an exact match', async (t) => {
  t.notOk(userInfoSubjectMismatch('u1', { sub: 'u1' }))
  t.ok(userInfoSubjectMismatch('u1', { sub: 'U1' }))
  t.ok(userInfoSubjectMismatch('u1', {}))
})

t.test('claimSourcesOf reads Core 5.6.2 and leaves out what is malformed', async (t) => {
  const sources = claimSourcesOf({
    _claim_names: { address: 'src1', phone_number: 'src1', payment: 'src2', broken: 'missing', odd: 7 },
    _claim_sources: { src1: { JWT: 'a.b.c' }, src2: { endpoint: 'https://bank.example/claims', access_token: 'ksj3' } },
  })
  t.same(sources, [
    { name: 'src1', claims: ['address', 'phone_number'], kind: 'aggregated', jwt: 'a.b.c' },
    { name: 'src2', claims: ['payment'], kind: 'distributed', endpoint: 'https://bank.example/claims', accessToken: 'ksj3' },
  ])
  t.same(claimSourcesOf({ _claim_names: { a: '__proto__' }, _claim_sources: {} }), [])
  t.same(claimSourcesOf({}), [])
})

t.test('trust and overage verdicts', async (t) => {
  t.ok(trustedEndpoint('https://bank.example/claims', ['https://bank.example/claims']))
  t.notOk(trustedEndpoint('https://bank.example/claims/', ['https://bank.example/claims']), 'exactly as written')
  t.ok(hasGroupOverage({ _claim_names: { groups: 'src1' } }))
  t.ok(hasGroupOverage({ hasgroups: true }))
  t.notOk(hasGroupOverage({ groups: ['a'] }))
  const off = {
    userInfo: false,
    trustedIssuers: [],
    trustedEndpoints: [],
    entraGroupOverage: false,
    graphBaseUrl: 'https://graph.microsoft.com',
    gitlabProjects: [],
  }
  t.notOk(claimSourcesWanted(undefined))
  t.notOk(claimSourcesWanted(off), 'a block that asks for nothing does nothing')
  t.ok(claimSourcesWanted({ ...off, userInfo: true }))
  t.ok(claimSourcesWanted({ ...off, gitlabProjects: ['group/project'] }), 'GitLab projects are a source')
  const google = {
    adminEmail: 'admin@example.com',
    serviceAccountKeyEnv: 'KEY',
    tokenUrl: 'https://oauth2.googleapis.com/token',
    directoryUrl: 'https://admin.googleapis.com',
  }
  t.ok(claimSourcesWanted({ ...off, googleGroups: google }), 'Google groups are a source')
})
