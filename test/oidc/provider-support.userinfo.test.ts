import t from 'tap'
import type { ServerMetadata } from 'openid-client'
import { supportVerdicts, userInfoAvailable } from '#src/oidc/provider-support'
import { resolve } from '../fixtures/config/base.ts'

// `check --online` with provider.claimSources.userInfo: the provider must advertise a UserInfo endpoint.

const SERVER: ServerMetadata = { issuer: 'https://idp.example.com/realms/main', userinfo_endpoint: 'https://idp.example.com/userinfo' }

t.test('a UserInfo endpoint is asked for only with claimSources.userInfo', async (t) => {
  const plain = resolve().providers[0]
  const asking = resolve({ provider: { claimSources: { userInfo: true } } }).providers[0]
  if (plain === undefined || asking === undefined) throw new Error('no provider')
  t.notOk(
    supportVerdicts(plain, SERVER, 'https://gw/bc').some((v) => v.item === 'UserInfo'),
    'not compared without the key',
  )
  t.ok(supportVerdicts(asking, SERVER, 'https://gw/bc').find((v) => v.item === 'UserInfo')?.ok)
  t.equal(userInfoAvailable(undefined).ok, false)
  t.match(userInfoAvailable(undefined).said, /no userinfo_endpoint/)
})
