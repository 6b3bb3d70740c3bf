import t from 'tap'
import { clientAssertionAlgorithm } from '../../src/oidc/client-auth.js'

t.test('the client assertion algorithm is agreed with the provider metadata', async (t) => {
  const rsa = ['PS256', 'RS256'] as const
  t.equal(clientAssertionAlgorithm(rsa, ['RS256', 'PS256', 'ES256']), 'PS256', 'PS256 preferred when advertised')
  t.equal(clientAssertionAlgorithm(rsa, ['RS256', 'ES256']), 'RS256', 'RS256 when only it is advertised')
  t.equal(clientAssertionAlgorithm(rsa, undefined), 'RS256', 'nothing advertised: RS256, which every provider accepts')
  t.equal(clientAssertionAlgorithm(rsa, []), 'RS256')
  t.equal(clientAssertionAlgorithm(['ES256'], ['RS256']), undefined, 'no common algorithm')
  t.equal(clientAssertionAlgorithm(['ES256'], undefined), 'ES256')
  t.equal(clientAssertionAlgorithm(rsa, undefined, ['PS256', 'ES256']), 'PS256', 'a profile list: never RS256')
  t.equal(clientAssertionAlgorithm(rsa, ['RS256'], ['PS256', 'ES256']), undefined, 'the profile and the provider disagree')
})
