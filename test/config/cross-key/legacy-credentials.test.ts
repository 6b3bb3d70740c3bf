// The cross-key rules of an upstream's legacy credentials (config/cross-key/legacy-credentials.ts):
// one credential per Authorization, each named with the key it collides with; the access token
// header against an exchange; a signed-in user; the ID token where it travels; and the Basic
// password from a secret, never written in the file.

import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { maskConfig } from '#src/config/mask'
import { exposedSecretFiles } from '#src/config/file-modes'
import YAML from 'yaml'
import { problems, resolve, type Tree, withUpstream } from '../../fixtures/config/base.ts'
import { recipe } from '../../fixtures/markdown.ts'
import { PARTNERS, STAFF, several } from '../../fixtures/config/values.ts'

const ENV = { APP_BASIC_PASSWORD: 'pw:with-colon' }
const basic = { password: '${APP_BASIC_PASSWORD}' }
const at = (key: string): string => `upstreams[0].${key}`

t.test('two credentials that want Authorization are refused, naming both keys', async (t) => {
  const both = (first: string, second: string): string =>
    `${at(second)}: cannot be given with ${at(first)}: both are sent as Authorization, which carries one credential`
  t.strictSame(problems(withUpstream({ forwardBasicAuth: basic, forwardIdToken: true }), ENV), [both('forwardIdToken', 'forwardBasicAuth')])
  t.strictSame(problems(withUpstream({ forwardBasicAuth: basic, forwardAccessToken: true }), ENV), [both('forwardAccessToken', 'forwardBasicAuth')])
  t.strictSame(problems(withUpstream({ forwardBasicAuth: basic, tokenExchange: { audience: 'a' } }), ENV), [both('tokenExchange', 'forwardBasicAuth')])
  t.strictSame(problems(withUpstream({ forwardIdToken: true, forwardAccessToken: true })), [both('forwardAccessToken', 'forwardIdToken')])
  t.strictSame(problems(withUpstream({ forwardIdToken: true, tokenExchange: { audience: 'a' } })), [both('tokenExchange', 'forwardIdToken')])
  t.strictSame(problems(withUpstream({ forwardBasicAuth: basic, forwardIdToken: true, forwardAccessToken: true }), ENV), [
    both('forwardAccessToken', 'forwardBasicAuth'),
    both('forwardIdToken', 'forwardBasicAuth'),
    both('forwardAccessToken', 'forwardIdToken'),
  ])
  // Each beside what writes no Authorization is accepted: the access token header goes with any of them.
  t.strictSame(problems(withUpstream({ forwardBasicAuth: basic, forwardAccessTokenHeader: true }), ENV), [])
  t.strictSame(problems(withUpstream({ forwardIdToken: true, forwardAccessTokenHeader: true })), [])
  t.strictSame(problems(withUpstream({ forwardAccessToken: true, forwardAccessTokenHeader: true })), [])
  t.strictSame(problems(withUpstream({ forwardIdToken: false, forwardAccessToken: true })), [], 'false wants nothing')
})

t.test("the access token header is refused beside an exchange, which keeps the user's token from the upstream", async (t) => {
  t.strictSame(problems(withUpstream({ forwardAccessTokenHeader: true, tokenExchange: { audience: 'a' } })), [
    `${at('forwardAccessTokenHeader')}: cannot be true with ${at('tokenExchange')}: the exchange keeps the user's own token from the upstream`,
  ])
})

t.test('each needs a signed-in user', async (t) => {
  const none = (key: string): string => `${at(key)}: needs a signed-in user: it does nothing with ${at('auth')}: none`
  t.strictSame(problems(withUpstream({ auth: 'none', forwardIdToken: true })), [none('forwardIdToken')])
  t.strictSame(problems(withUpstream({ auth: 'none', forwardAccessTokenHeader: true })), [none('forwardAccessTokenHeader')])
  t.strictSame(problems(withUpstream({ auth: 'none', forwardBasicAuth: basic }), ENV), [none('forwardBasicAuth')])
  t.strictSame(problems(withUpstream({ auth: 'optional', forwardBasicAuth: basic, forwardIdToken: false }), ENV), [])
})

t.test('the ID token only where it comes with the application’s requests', async (t) => {
  const refused = `${at('forwardIdToken')}: cannot be true with cookies.credentialsPath: /api/v1/openid: the ID token is kept in the cookie sent only there, never with the application's requests`
  t.strictSame(problems({ ...withUpstream({ forwardIdToken: true }), cookies: { credentialsPath: '/api/v1/openid' } }), [refused])
  t.strictSame(problems({ ...withUpstream({ forwardIdToken: true }), cookies: { credentialsPath: '/' } }), [])
  t.strictSame(problems({ ...withUpstream({ forwardIdToken: true }), cookies: { credentialsPath: '/api/v1/openid' }, session: { store: 'memory' } }), [], 'a server-side store keeps it')
})

t.test('the DPoP-bound access token is not put in a header either', async (t) => {
  const bound = { ...PARTNERS, dpop: true }
  const tree = several([STAFF, bound], { upstreams: [{ name: 'app', target: 'http://127.0.0.1:3000', providers: ['*'], forwardAccessTokenHeader: true }] })
  t.strictSame(problems(tree), [`${at('forwardAccessTokenHeader')}: cannot be true with providers[1].dpop: DPoP-bound access tokens are not forwarded`])
})

t.test('the Basic password: from the environment or a file, never written in the configuration', async (t) => {
  const literal = `${at('forwardBasicAuth.password')}: is written in the configuration: give it as \${VAR} from the environment, or use passwordFile`
  t.strictSame(problems(withUpstream({ forwardBasicAuth: { password: 'hunter2' } })), [literal])
  t.strictSame(problems(withUpstream({ forwardBasicAuth: { password: '${APP_BASIC_PASSWORD:-hunter2}' } }), ENV), [literal], 'a default is a literal')
  t.strictSame(problems(withUpstream({ forwardBasicAuth: { password: 'x${APP_BASIC_PASSWORD}' } }), ENV), [literal], 'text around it is a literal')
  t.strictSame(problems(withUpstream({ forwardBasicAuth: { password: '$${APP_BASIC_PASSWORD}' } }), ENV), [literal], 'an escaped reference is a literal')
  t.strictSame(problems(withUpstream({ forwardBasicAuth: basic }), {}), [`${at('forwardBasicAuth.password')}: environment variable APP_BASIC_PASSWORD is not set`])
  t.strictSame(problems(withUpstream({ forwardBasicAuth: basic }), { APP_BASIC_PASSWORD: 'a\nb' }), [`${at('forwardBasicAuth.password')}: holds a control character`], 'a control character')
  t.strictSame(problems(withUpstream({ forwardBasicAuth: { user: 'email' } })), [`${at('forwardBasicAuth')}: needs password (\${VAR}) or passwordFile`])

  const config = resolve(withUpstream({ forwardBasicAuth: basic }), ENV)
  t.strictSame(config.upstreams[0]?.forwardBasicAuth, { user: 'user', password: 'pw:with-colon' }, 'user defaults to the identity headers’ user')
  const masked = maskConfig(config) as { upstreams: Array<{ forwardBasicAuth: { password: string } }> }
  t.equal(masked.upstreams[0]?.forwardBasicAuth.password, '********', 'check masks it')

  const dir = mkdtempSync(join(tmpdir(), 'ogw-basic-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'password')
  writeFileSync(file, 'from-a-file\n', { mode: 0o600 })
  t.strictSame(problems(withUpstream({ forwardBasicAuth: { passwordFile: file } })), [])
  t.strictSame(problems(withUpstream({ forwardBasicAuth: { passwordFile: file, password: '${APP_BASIC_PASSWORD}' } }), ENV), [
    `${at('forwardBasicAuth.passwordFile')}: cannot be given with ${at('forwardBasicAuth.password')}: give the password one way`,
  ])
  t.strictSame(problems(withUpstream({ forwardBasicAuth: { passwordFile: join(dir, 'absent') } })), [
    `${at('forwardBasicAuth.passwordFile')}: cannot read ${join(dir, 'absent')} (no such file)`,
  ])
  const empty = join(dir, 'empty')
  writeFileSync(empty, '\n', { mode: 0o600 })
  t.strictSame(problems(withUpstream({ forwardBasicAuth: { passwordFile: empty } })), [`${at('forwardBasicAuth.passwordFile')}: ${empty} is empty`])
  const twoLines = join(dir, 'two-lines')
  writeFileSync(twoLines, 'a\nb\n', { mode: 0o600 })
  t.strictSame(problems(withUpstream({ forwardBasicAuth: { passwordFile: twoLines } })), [
    `${at('forwardBasicAuth.passwordFile')}: ${twoLines} holds a control character (a line break inside the password?)`,
  ])
  // Readable by others: warned about, as the other secret files are.
  const fileConfig = resolve(withUpstream({ forwardBasicAuth: { passwordFile: file } }))
  const configPath = join(dir, 'gateway.yaml')
  writeFileSync(configPath, 'not read for this\n', { mode: 0o600 })
  t.strictSame(exposedSecretFiles(fileConfig, configPath), [])
  chmodSync(file, 0o644)
  t.strictSame(exposedSecretFiles(fileConfig, configPath), [{ key: `${at('forwardBasicAuth.passwordFile')}`, path: file, mode: '0644' }])
})

t.test("docs/features/legacy-credentials.md's example is a valid configuration", async (t) => {
  const example = YAML.parse(recipe('docs/features/legacy-credentials.md', 'yaml')) as Tree
  t.strictSame(problems(example, { APP_BASIC_PASSWORD: 'from-the-environment' }), [])
  const config = resolve(example, { APP_BASIC_PASSWORD: 'from-the-environment' })
  t.strictSame(
    config.upstreams.map((u) => [u.name, u.forwardBasicAuth?.user, u.forwardIdToken, u.forwardAccessTokenHeader]),
    [
      ['wiki', 'email', false, false],
      ['dashboard', undefined, true, false],
      ['reports', undefined, false, true],
    ],
  )
})
