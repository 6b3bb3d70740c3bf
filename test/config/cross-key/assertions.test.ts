// The cross-key rules of assertions (config/cross-key/assertions.ts): an upstream's identity
// assertions and Transaction Tokens are signed with configured keys, the same on every replica.

import { generateKeyPairSync } from 'node:crypto'
import t from 'tap'
import { problems, withUpstream } from '../../fixtures/config/base.ts'

const KEY = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()

t.test('identityAssertion: true requires assertions.signingKeys', async (t) => {
  t.strictSame(problems(withUpstream({ identityAssertion: true })), ['upstreams[0].identityAssertion: requires assertions.signingKeys'])
  t.strictSame(problems(withUpstream({ identityAssertion: false })), [], 'false asks for nothing')
  t.strictSame(problems({ ...withUpstream({ identityAssertion: true }), assertions: { signingKeys: [KEY] } }), [], 'with keys')
})

t.test('transactionTokens requires assertions.signingKeys', async (t) => {
  const tokens = { trustDomain: 'trust-domain.example', scope: ['orders'] }
  t.strictSame(problems(withUpstream({ transactionTokens: tokens })), ['upstreams[0].transactionTokens: requires assertions.signingKeys'])
  t.strictSame(problems({ ...withUpstream({ transactionTokens: tokens }), assertions: { signingKeys: [KEY] } }), [], 'with keys')
})
