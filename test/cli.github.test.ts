import t from 'tap'
import { cli, configFile, SECRETS_ENV, valid } from './fixtures/cli.ts'

// provider.github (docs/providers/github.md): `check` and `run` refuse the OpenID Connect keys on a
// GitHub provider alike, naming each (src/config/cross-key/github.ts), and pass a GitHub provider
// without them.

const REFUSED = {
  idTokenAlgorithms: ['RS256'],
  dpop: true,
  responseMode: 'form_post',
  scopes: ['openid', 'profile', 'email', 'groups'],
  offlineAccess: true,
  audiences: ['api'],
  bearer: { introspection: true },
  postLogoutRedirectUri: 'http://127.0.0.1:8080/',
  claimSources: { userInfo: true },
}

t.test('check and run refuse each OpenID Connect key on a GitHub provider, naming it; check passes the provider without them', async (t) => {
  const config = valid(8080, 'http://127.0.0.1:3000')
  const github = { ...config.provider, issuer: 'http://127.0.0.1:9', github: { organizations: ['acme'] } }
  const refused = configFile({ ...config, provider: { ...github, ...REFUSED } })
  for (const command of [['check'], []]) {
    const run = await cli([...command, '--config', refused], SECRETS_ENV).done
    t.equal(run.code, 2, `${command[0] ?? 'run'} exits 2`)
    for (const key of [
      'idTokenAlgorithms',
      'dpop',
      'responseMode',
      'scopes',
      'offlineAccess',
      'audiences',
      'bearer.introspection',
      'postLogoutRedirectUri',
      'claimSources',
    ]) {
      t.match(run.stderr, `provider.${key}: is OpenID Connect's and cannot be used with provider.github`, `${command[0] ?? 'run'} names provider.${key}`)
    }
  }
  const ok = await cli(['check', '--config', configFile({ ...config, provider: github })], SECRETS_ENV).done
  t.equal(ok.code, 0, ok.stderr)
})
