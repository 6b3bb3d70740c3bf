// The access options of oauth2-proxy that `import oauth2-proxy` carries (src/import/mappings.ts):
// skip_auth_regex and skip_auth_routes as upstreams[].publicPaths regexes, several cookie_domains
// as cookies.domains, and the legacy credentials (pass_basic_auth, basic_auth_password,
// pass_authorization_header, pass_access_token, set_basic_auth, set_authorization_header) as
// forwardBasicAuth, forwardIdToken and forwardAccessTokenHeader. Each carried case and each case
// reported as not carried, every result checked by the real `check`; a translated pattern is
// compared with oauth2-proxy's own reading of it (Go's regexp.MatchString, a search) on paths.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { parse } from 'yaml'
import { compilePathRegex } from '#src/access/request-match'
import { runImport } from '#src/import/command'
import { anchoredRegex } from '#src/import/mappings'
import { cli } from '../fixtures/cli.ts'

const dir = mkdtempSync(join(tmpdir(), 'ogw-import-access-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))

const ENV = {
  OIDC_CLIENT_SECRET: 'client-secret-from-the-environment',
  COOKIE_SECRET: 'cookie-secret-from-the-environment-0123456789',
  BASIC_AUTH_PASSWORD: 'basic-password-from-the-environment',
}

const BASE = ['--provider=oidc', '--oidc-issuer-url=https://idp.example.com', '--client-id=app', '--redirect-url=https://auth.example.com/oauth2/callback']

interface Converted {
  code: number
  config: { cookies: Record<string, unknown>; redirects?: Record<string, unknown>; upstreams: Array<Record<string, unknown>> }
  stderr: string
  /** The report's lines, without their `not carried: flags ` start. */
  lost: string[]
}

let count = 0

/** The converter on flags (in this process, as command.test.ts calls it), and the real check on what it wrote. */
async function convert(t: Test, flags: string[]): Promise<Converted> {
  const out = join(dir, `${++count}.yaml`)
  let stderr = ''
  const code = runImport(['oauth2-proxy', '--out', out, '--', ...BASE, ...flags], { stdout: () => undefined, stderr: (s) => (stderr += s), cwd: process.cwd() })
  const got = { code, stderr }
  t.ok(got.code === 0 || got.code === 1, `written: ${got.stderr}`)
  const checked = await cli(['check', '--config', out], ENV).done
  t.equal(checked.code, 0, `check passes: ${checked.stderr}`)
  const lost = got.stderr
    .split('\n')
    .filter((l) => l.startsWith('not carried: '))
    .map((l) => l.slice('not carried: flags '.length))
  t.equal(got.code, lost.length === 0 ? 0 : 1, 'exit 1 exactly when something was not carried')
  return { code: got.code, config: parse(readFileSync(out, 'utf8')) as Converted['config'], stderr: got.stderr, lost }
}

/** oauth2-proxy's reading of a pattern: Go's regexp.MatchString, a search anywhere in the path (JavaScript's test searches alike for these patterns). */
const searches = (pattern: string, path: string): boolean => new RegExp(pattern).test(path)

t.test('a translated pattern matches exactly the paths oauth2-proxy skips', async (t) => {
  const paths = [
    '/',
    '/a',
    '/a/x',
    '/ab',
    '/x/a',
    '/b',
    '/c/b',
    '/c/b/d',
    '/healthz',
    '/healthz/x',
    '/x/healthz',
    '/public/p',
    '/static/',
    '/staticx',
    '/api-internal',
    '/x/api',
  ]
  const cases: Array<[string, string]> = [
    ['^/healthz$', '^/healthz$'],
    ['^/static/', '^/static/.*$'],
    ['/public/', '^.*/public/.*$'],
    ['/api$', '^.*/api$'],
    ['^/api', '^/api.*$'],
    ['^/a|/b', '^.*(?:^/a|/b).*$'],
    ['^/a$|^/b$', '^.*(?:^/a$|^/b$).*$'],
    ['^/(a|b)$', '^/(a|b)$'],
    ['', '^.*$'],
  ]
  for (const [pattern, expected] of cases) {
    const translated = anchoredRegex(pattern)
    t.equal(translated, expected, `${pattern} is ${expected}`)
    const gateway = compilePathRegex(translated)
    for (const path of paths) t.equal(gateway(path), searches(pattern, path), `${pattern} on ${path}: as oauth2-proxy`)
  }
})

t.test('skip_auth_regex and skip_auth_routes become publicPaths regexes, with methods', async (t) => {
  const got = await convert(t, [
    '--upstream=http://127.0.0.1:3000/',
    '--skip-auth-regex=^/healthz$',
    '--skip-auth-regex=/assets/',
    '--skip-auth-route=GET=^/probe',
    '--skip-auth-route=post=^/hooks/[a-z]+$',
    '--skip-auth-route=PUT=^/probe',
    '--skip-auth-route=^/a|^/b',
    '--skip-auth-route=^/healthz$',
    '--skip-auth-route=GET=^/healthz$',
  ])
  t.equal(got.code, 0, got.stderr)
  t.strictSame(got.config.upstreams[0]?.publicPaths, [
    { regex: '^/healthz$' },
    { regex: '^.*/assets/.*$' },
    { regex: '^/probe.*$', methods: ['GET', 'PUT'] },
    { regex: '^/hooks/[a-z]+$', methods: ['POST'] },
    { regex: '^.*(?:^/a|^/b).*$' },
  ])
})

t.test('each pattern the gateway refuses, and each METHOD!= route, is one line naming it', async (t) => {
  const got = await convert(t, [
    '--upstream=http://127.0.0.1:3000/',
    '--upstream=http://127.0.0.1:3001/admin/',
    '--skip-auth-route=GET!=^/admin',
    '--skip-auth-regex=^/café$',
    '--skip-auth-regex=^/\\p{L}+$',
    '--skip-auth-regex=^/a{101}$',
    '--skip-auth-route=^/ok$',
    '--skip-auth-regex=/admin',
  ])
  t.equal(got.code, 1)
  t.equal(got.lost.length, 5, got.lost.join('\n'))
  const line = (start: string): string | undefined => got.lost.find((l) => l.startsWith(start))
  t.match(line('--skip-auth-route: GET!=^/admin: '), /has no place in upstreams\[\]\.publicPaths/)
  t.match(line('--skip-auth-regex: ^/café$: '), /linear time: as "\^\/café\$": only printable ASCII/)
  t.match(line('--skip-auth-regex: ^/\\p{L}+$: '), /Unicode classes are refused/)
  t.match(line('--skip-auth-regex: ^/a{101}$: '), /repetition counts above 100/)
  t.match(line('--skip-auth-regex: /admin: '), /makes every path of \/admin public, which the gateway writes as auth: none on upstream app-admin/)
  const [app, admin] = got.config.upstreams
  t.strictSame(app?.publicPaths, [{ regex: '^.*/admin.*$' }, { regex: '^/ok$' }], 'the covering pattern stays on the upstream it does not cover')
  t.strictSame(admin?.publicPaths, [{ regex: '^/ok$' }])
})

t.test('several cookie_domains become cookies.domains, their domains allowed as redirect hosts', async (t) => {
  const both = await convert(t, ['--upstream=http://127.0.0.1:3000/', '--cookie-domain=.Example.com', '--cookie-domain=example.org:8443'])
  t.equal(both.code, 0, both.stderr)
  t.strictSame(both.config.cookies.domains, ['example.com', 'example.org'])
  t.equal(both.config.cookies.domain, undefined)
  t.strictSame(both.config.redirects?.allowedHosts, ['.example.com', '.example.org'])

  const covered = await convert(t, [
    '--upstream=http://127.0.0.1:3000/',
    '--cookie-domain=example.com,shop.example.org',
    '--whitelist-domain=*.example.org',
    '--whitelist-domain=app.example.com',
  ])
  t.strictSame(covered.config.redirects?.allowedHosts, ['.example.org', 'app.example.com', '.example.com'], 'only the domains whitelist_domains does not cover')

  const one = await convert(t, ['--upstream=http://127.0.0.1:3000/', '--cookie-domain=.example.com'])
  t.equal(one.config.cookies.domain, 'example.com', 'one domain stays cookies.domain')
  t.equal(one.config.redirects, undefined)
})

t.test('several cookie_domains not carried: SameSite=Strict, more than 10', async (t) => {
  const strict = await convert(t, ['--upstream=http://127.0.0.1:3000/', '--cookie-domain=example.com,example.org', '--cookie-samesite=strict'])
  t.strictSame(strict.lost, [
    '--cookie-domain: the gateway hands a sign-in to the other cookies.domains through cross-site redirects, which never carry a SameSite=Strict cookie (flags --cookie-samesite): example.com is carried as cookies.domain, example.org not',
  ])
  t.equal(strict.config.cookies.domain, 'example.com')
  t.equal(strict.config.cookies.sameSite, 'strict')

  const eleven = Array.from({ length: 11 }, (_, i) => `d${i}.example`)
  const many = await convert(t, ['--upstream=http://127.0.0.1:3000/', `--cookie-domain=${eleven.join(',')}`])
  t.strictSame(many.lost, ['--cookie-domain: cookies.domains holds at most 10 domains: d10.example not carried'])
  t.strictSame(many.config.cookies.domains, eleven.slice(0, 10))
})

t.test('legacy credentials become forwardBasicAuth, forwardIdToken and forwardAccessTokenHeader', async (t) => {
  const secret = 'the-basic-password-of-the-input'
  const basic = await convert(t, ['--upstream=http://127.0.0.1:3000/', '--pass-basic-auth', `--basic-auth-password=${secret}`])
  t.equal(basic.code, 0, basic.stderr)
  t.strictSame(basic.config.upstreams[0]?.forwardBasicAuth, { password: '${BASIC_AUTH_PASSWORD}' })
  t.match(basic.stderr, /^set BASIC_AUTH_PASSWORD: the password the application expects in HTTP Basic/m, 'the variable is named')
  t.notOk(basic.stderr.includes(secret) || JSON.stringify(basic.config).includes(secret), 'the password is written nowhere')

  const byDefault = await convert(t, ['--upstream=http://127.0.0.1:3000/', `--basic-auth-password=${secret}`, '--prefer-email-to-user'])
  t.strictSame(byDefault.config.upstreams[0]?.forwardBasicAuth, { user: 'email', password: '${BASIC_AUTH_PASSWORD}' }, 'pass_basic_auth is true by default')

  const off = await convert(t, ['--upstream=http://127.0.0.1:3000/', '--pass-basic-auth=false', `--basic-auth-password=${secret}`])
  t.equal(off.config.upstreams[0]?.forwardBasicAuth, undefined, 'pass_basic_auth false: no Basic')
  t.equal(off.code, 0)

  const answer = await convert(t, ['--upstream=static://202', '--set-basic-auth', `--basic-auth-password=${secret}`, '--pass-basic-auth=false'])
  t.strictSame(answer.config.upstreams[0]?.forwardBasicAuth, { password: '${BASIC_AUTH_PASSWORD}' }, 'set_basic_auth: in the forward-auth answer')

  const idToken = await convert(t, ['--upstream=http://127.0.0.1:3000/', '--pass-authorization-header', '--pass-access-token', '--set-xauthrequest'])
  t.equal(idToken.code, 0, idToken.stderr)
  t.match(idToken.config.upstreams[0], { forwardIdToken: true, forwardAccessTokenHeader: true })
  t.equal(idToken.config.upstreams[0]?.forwardBasicAuth, undefined)

  const setId = await convert(t, ['--upstream=http://127.0.0.1:3000/', '--set-authorization-header'])
  t.equal(setId.config.upstreams[0]?.forwardIdToken, true)

  const none = await convert(t, [
    '--upstream=http://127.0.0.1:3000/',
    '--pass-access-token=false',
    '--pass-authorization-header=false',
    '--set-basic-auth=false',
  ])
  t.equal(none.code, 0)
  for (const key of ['forwardIdToken', 'forwardAccessTokenHeader', 'forwardBasicAuth']) t.equal(none.config.upstreams[0]?.[key], undefined, `false: no ${key}`)
})

t.test('legacy credentials not carried: Basic with the ID token, set_basic_auth without a password', async (t) => {
  const both = await convert(t, ['--upstream=http://127.0.0.1:3000/', '--basic-auth-password=p', '--pass-basic-auth', '--pass-authorization-header'])
  t.equal(both.lost.length, 2, both.lost.join('\n'))
  t.match(
    both.lost.find((l) => l.startsWith('--pass-basic-auth: ')),
    /with flags --pass-authorization-header: HTTP Basic and the ID token would both be Authorization/,
  )
  t.match(
    both.lost.find((l) => l.startsWith('--pass-authorization-header: ')),
    /with flags --pass-basic-auth: .*choose upstreams\[\]\.forwardBasicAuth or forwardIdToken/,
  )
  t.equal(both.config.upstreams[0]?.forwardBasicAuth, undefined, 'neither is written')
  t.equal(both.config.upstreams[0]?.forwardIdToken, undefined)

  const answers = await convert(t, [
    '--upstream=static://202',
    '--set-basic-auth',
    '--set-authorization-header',
    '--basic-auth-password=p',
    '--pass-basic-auth=false',
  ])
  t.equal(answers.lost.filter((l) => /would both be Authorization/.test(l)).length, 2, 'in the forward-auth answer alike')

  const empty = await convert(t, ['--upstream=static://202', '--set-basic-auth'])
  t.match(
    empty.lost.find((l) => l.startsWith('--set-basic-auth: ')),
    /without basic_auth_password oauth2-proxy answers HTTP Basic with an empty password, which the gateway never sends/,
  )
  t.equal(empty.config.upstreams[0]?.forwardBasicAuth, undefined)
})
