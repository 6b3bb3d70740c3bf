// openid-gateway import oauth2-proxy (src/import/), as users run it: oauth2-proxy's own documented
// configurations (test/import/inputs/contrib-* and local-environment-*, each citing its source) and
// configurations shaped like the ones users post (user-*), each converted by the real command and
// the result checked by the real `check`; every error case with the exit code and the message that
// names the file and the option; and the secrets of the input never in anything it writes.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { parse } from 'yaml'
import { runImport } from '#src/import/command'
import { MAPPINGS } from '#src/import/mappings'
import { cli } from '../fixtures/cli.ts'

const INPUTS = 'test/import/inputs'
const dir = mkdtempSync(join(tmpdir(), 'ogw-import-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))

/** What the check of a converted file is given for its variables. */
const ENV = {
  OIDC_CLIENT_SECRET: 'client-secret-from-the-environment',
  COOKIE_SECRET: 'cookie-secret-from-the-environment-0123456789',
  REDIS_PASSWORD: 'redis-password',
}

/** The converter called in this process: exit code, stdout, stderr. */
function run(args: string[], cwd = process.cwd()): { code: number; stdout: string; stderr: string } {
  let stdout = ''
  let stderr = ''
  const code = runImport(args, { stdout: (s) => (stdout += s), stderr: (s) => (stderr += s), cwd })
  return { code, stdout, stderr }
}

function write(name: string, text: string): string {
  const path = join(dir, name)
  writeFileSync(path, text)
  return path
}

interface Example {
  args: string[]
  code: number
  /** Secret values of the input, never to be written anywhere. */
  secrets: string[]
  /** Keys the result must hold (a subset). */
  expect: Record<string, unknown>
  /** Substrings of the stderr report, one line each. */
  report: string[]
}

const EXAMPLES: Record<string, Example> = {
  'contrib/oauth2-proxy.cfg.example, every setting on': {
    args: [`${INPUTS}/contrib-oauth2-proxy.cfg.example-uncommented.cfg`],
    code: 1,
    secrets: [],
    expect: {
      server: { publicUrl: 'https://internalapp.yourcompany.com', host: '127.0.0.1', port: 4180 },
      provider: {
        issuer: 'https://accounts.google.com',
        clientId: '123456.apps.googleusercontent.com',
        redirectPath: '/oauth2/callback',
        scopes: ['openid', 'email', 'profile'],
      },
      cookies: { name: '_oauth2_proxy', secure: true, secrets: ['${COOKIE_SECRET}'] },
      session: { maxAgeSeconds: 604800 },
      upstreams: [
        {
          name: 'app',
          target: 'http://127.0.0.1:8080',
          allow: { emailDomains: ['yourcompany.com'] },
          passHostHeader: true,
          websocket: true,
          publicPaths: [{ regex: '^/probe.*$', methods: ['GET'] }, { regex: '^/metrics.*$' }],
        },
      ],
    },
    report: ['api_routes:', 'https_address: the gateway serves plain HTTP', 'reverse_proxy: it believes X-Forwarded-* from every peer'],
  },
  'contrib/local-environment/oauth2-proxy.cfg (Dex)': {
    args: [`${INPUTS}/local-environment-oauth2-proxy.cfg`],
    code: 1,
    secrets: ['OQINaROshtE9TcZkNAm-5Zs2Pv3xaWytBmc5W7sPX7w=', 'b2F1dGgyLXByb3h5LWNsaWVudC1zZWNyZXQK'],
    expect: {
      server: { publicUrl: 'http://oauth2-proxy.localtest.me:4180', host: '0.0.0.0', port: 4180 },
      provider: { issuer: 'http://dex.localtest.me:5556/dex', allowInsecureHttp: true, clientId: 'oauth2-proxy', clientSecret: '${OIDC_CLIENT_SECRET}' },
      cookies: { secure: false, domain: 'localtest.me' },
      redirects: { allowedHosts: ['.localtest.me'] },
      upstreams: [{ target: 'http://httpbin', allow: { emailDomains: ['example.com'] } }],
    },
    report: ['provider_display_name: the gateway has no sign-in page'],
  },
  'contrib/local-environment/oauth2-proxy-keycloak.cfg': {
    args: [`${INPUTS}/local-environment-oauth2-proxy-keycloak.cfg`],
    code: 1,
    secrets: ['OQINaROshtE9TcZkNAm-5Zs2Pv3xaWytBmc5W7sPX7w=', '72341b6d-7065-4518-a0e4-50ee15025608'],
    expect: {
      cookies: { domains: ['oauth2-proxy.localtest.me', 'keycloak.localtest.me'] },
      redirects: { allowedHosts: ['.localtest.me'] },
      provider: { issuer: 'http://keycloak.localtest.me:9080/realms/oauth2-proxy' },
    },
    report: ['provider_display_name:'],
  },
  'contrib/local-environment/oauth2-proxy-nginx.cfg (auth_request, static upstream)': {
    args: [`${INPUTS}/local-environment-oauth2-proxy-nginx.cfg`],
    code: 1,
    secrets: ['OQINaROshtE9TcZkNAm-5Zs2Pv3xaWytBmc5W7sPX7w=', 'b2F1dGgyLXByb3h5LWNsaWVudC1zZWNyZXQK'],
    expect: { upstreams: [{ name: 'app', target: 'http://127.0.0.1:9' }] },
    report: ["upstream static://200 (a static answer: the gateway answers an ingress's checks at /api/v1/openid/auth"],
  },
  'contrib/local-environment/oauth2-proxy-traefik.cfg (forward-auth)': {
    args: [`${INPUTS}/local-environment-oauth2-proxy-traefik.cfg`],
    code: 1,
    secrets: ['OQINaROshtE9TcZkNAm-5Zs2Pv3xaWytBmc5W7sPX7w=', 'b2F1dGgyLXByb3h5LWNsaWVudC1zZWNyZXQK'],
    expect: {
      cookies: { domain: 'oauth2-proxy.localhost' },
      redirects: { allowedHosts: ['.oauth2-proxy.localhost'] },
      server: { publicUrl: 'http://oauth2-proxy.oauth2-proxy.localhost' },
    },
    report: ['upstream static://202'],
  },
  'contrib/local-environment alpha configuration and its .cfg': {
    args: [`${INPUTS}/local-environment-oauth2-proxy-alpha-config.cfg`, '--alpha-config', `${INPUTS}/local-environment-oauth2-proxy-alpha-config.yaml`],
    code: 0,
    secrets: ['OQINaROshtE9TcZkNAm-5Zs2Pv3xaWytBmc5W7sPX7w=', 'b2F1dGgyLXByb3h5LWNsaWVudC1zZWNyZXQK'],
    expect: {
      server: { host: '0.0.0.0', port: 4180 },
      provider: { issuer: 'http://dex.localtest.me:5556/dex', clientId: 'oauth2-proxy', redirectPath: '/oauth2/callback' },
      upstreams: [{ name: 'app', target: 'http://httpbin', identityHeaders: { user: 'X-Forwarded-User', email: 'X-Forwarded-Email' } }],
    },
    report: [],
  },
  'a keycloak-oidc environment file': {
    args: [`${INPUTS}/user-keycloak.env`],
    code: 0,
    secrets: ['env-client-secret-3f9a1c', 'env-cookie-secret-0123456789abcd'],
    expect: {
      server: { publicUrl: 'https://dashboard.example.org', trustedProxies: ['10.0.0.0/8'] },
      provider: { scopes: ['openid', 'email', 'profile', 'groups'] },
      session: { maxAgeSeconds: 43200 },
      upstreams: [{ target: 'http://dashboard.internal:9090', allow: { groups: ['/admins', '/operators'] }, forwardAccessTokenHeader: true }],
    },
    report: [],
  },
  "a Deployment's args as a command line, sessions in Redis": {
    args: [`${INPUTS}/user-kubernetes-args.flags`],
    code: 1,
    secrets: ['flags-client-secret-77c2', 'flags-cookie-secret-0123456789ab', 'flags-redis-password'],
    expect: {
      provider: { audiences: ['kubernetes', 'kubernetes-api'] },
      session: { store: 'redis', redisUrl: 'redis://:${REDIS_PASSWORD}@redis.redis.svc:6379/0' },
      upstreams: [{ forwardIdToken: true }],
    },
    report: ['--cookie-refresh:', '--reverse-proxy:'],
  },
  'an nginx auth_request oauth2-proxy.cfg': {
    args: [`${INPUTS}/user-auth-request.cfg`],
    code: 1,
    secrets: ['toml-client-secret-b81e', 'toml-cookie-secret-0123456789abcd'],
    expect: {
      redirects: { allowedHosts: ['.example.com', '.example.io'] },
      cookies: { domains: ['example.com', 'example.io'], sameSite: 'lax' },
      server: { trustedProxies: ['127.0.0.1'] },
      upstreams: [{ publicPaths: [{ regex: '^/healthz$', methods: ['GET'] }, { regex: '^/static/.*$' }] }],
    },
    report: ['upstreams: upstream static://202'],
  },
  'an alpha configuration with two upstreams and the access token as Bearer': {
    args: [`${INPUTS}/user-alpha-keycloak.cfg`, `${INPUTS}/user-alpha-keycloak.yaml`],
    code: 0,
    secrets: ['alpha-client-secret-9d0e', 'alpha-cookie-secret-0123456789abc'],
    expect: {
      upstreams: [
        { name: 'app', forwardAccessToken: true, websocket: true, identityHeaders: { groups: 'X-Forwarded-Groups' }, allow: { groups: ['admins'] } },
        { name: 'app-api', match: { pathPrefix: '/api' }, websocket: false, timeoutMs: 60000 },
      ],
    },
    report: [],
  },
}

for (const [name, example] of Object.entries(EXAMPLES)) {
  t.test(name, async (t) => {
    const out = join(dir, `${name.replace(/[^A-Za-z0-9]+/g, '-')}.yaml`)
    const converted = await cli(['import', 'oauth2-proxy', ...example.args, '--out', out]).done
    t.equal(converted.code, example.code, `exit ${example.code}: ${converted.stderr}`)
    const text = readFileSync(out, 'utf8')
    t.match(parse(text), example.expect)
    const lines = converted.stderr
      .trimEnd()
      .split('\n')
      .filter((l) => l.startsWith('not carried: '))
    t.equal(lines.length > 0, example.code === 1, 'exit 1 exactly when something was not carried')
    for (const said of example.report)
      t.ok(
        lines.some((l) => l.includes(said)),
        `reported: ${said}`,
      )
    for (const secret of example.secrets) {
      t.notOk(text.includes(secret), 'no secret of the input in the configuration')
      t.notOk(converted.stderr.includes(secret), 'nor in the report')
    }
    t.match(converted.stderr, /^set OIDC_CLIENT_SECRET: /m, 'the variables are named')
    // The real check on the result, with the variables set.
    const checked = await cli(['check', '--config', out], ENV).done
    t.equal(checked.code, 0, checked.stderr)
    t.match(checked.stdout, /^OK: /)
  })
}

t.test('flags after --, over the environment and the file; --config among them is read', async (t) => {
  const cfg = write(
    'ranked.cfg',
    'provider = "oidc"\noidc_issuer_url = "https://idp.example.com"\nclient_id = "from-file"\nupstreams = ["http://127.0.0.1:3000"]\ncookie_name = "file_cookie"\n',
  )
  const env = write('ranked.env', 'OAUTH2_PROXY_CLIENT_ID=from-env\nOAUTH2_PROXY_COOKIE_NAME=env_cookie\n')
  const got = run([
    'oauth2-proxy',
    env,
    '--public-url',
    'https://app.example.com',
    '--',
    `--config=${cfg}`,
    '--client-id',
    'from-flags',
    '--email-domain=a.example',
    '--email-domain=b.example,c.example',
    '--pass-host-header=false',
    '--skip-provider-button',
  ])
  t.equal(got.code, 0, got.stderr)
  const config = parse(got.stdout) as Record<string, Record<string, unknown>>
  t.equal(config.provider?.clientId, 'from-flags')
  t.equal(config.cookies?.name, 'env_cookie', 'the environment over the file')
  t.equal(config.server?.publicUrl, 'https://app.example.com')
  t.equal(config.provider?.redirectPath, '/oauth2/callback', "without redirect_url: oauth2-proxy's callback under its prefix")
  t.match(
    config.upstreams,
    [{ allow: { emailDomains: ['a.example', 'b.example', 'c.example'] }, passHostHeader: false }],
    'a list flag repeated and comma-separated',
  )
})

t.test('settings that keep their meaning: claim paths, prefer-email-to-user, proxy prefix, whitelist wildcards', async (t) => {
  const got = run([
    'oauth2-proxy',
    '--public-url',
    'https://app.example.com',
    '--',
    '--provider=oidc',
    '--oidc-issuer-url=https://idp.example.com',
    '--client-id=a',
    '--upstream=http://127.0.0.1:3000/',
    '--upstream=http://127.0.0.1:3001/admin/',
    '--oidc-groups-claim=https://example.com/roles',
    '--prefer-email-to-user',
    '--proxy-prefix=/auth',
    '--whitelist-domain=*.example.com',
    '--whitelist-domain=example.org:*',
    '--cookie-samesite=none',
    '--code-challenge-method=S256',
  ])
  t.equal(got.code, 1, got.stderr)
  const config = parse(got.stdout) as Record<string, Record<string, unknown>>
  t.equal(config.provider?.groupsClaim, '["https://example.com/roles"]', 'a claim name with dots and slashes is quoted')
  t.equal(config.provider?.userClaim, 'email')
  t.equal(config.provider?.redirectPath, '/auth/callback', "the callback under oauth2-proxy's prefix")
  t.strictSame(config.redirects?.allowedHosts, ['.example.com'])
  t.match(config.upstreams, [{ name: 'app' }, { name: 'app-admin', match: { pathPrefix: '/admin' }, target: 'http://127.0.0.1:3001' }])
  t.match(got.stderr, /not carried: flags --proxy-prefix: the gateway's endpoints are under \/api\/v1\/openid/)
  t.match(got.stderr, /not carried: flags --whitelist-domain: redirects.allowedHosts has no port wildcard: example.org:\* not carried/)
  t.notMatch(got.stderr, /code-challenge-method/, 'S256 is what the gateway always does: nothing to report')
})

t.test('every error writes nothing and exits 2, naming the file and the option', async (t) => {
  const cases: Array<[string, string[], RegExp]> = [
    ['no such file', ['missing.cfg'], /^error: missing.cfg: cannot be read \(no such file\)$/m],
    ['a directory', [dir], /cannot be read \(a directory\)/],
    ['bad TOML', [write('bad.cfg', 'client_id = "unterminated\n')], /bad\.cfg:1:\d+: not TOML/],
    [
      'unknown option in the file',
      [write('unknown.cfg', 'client_idd = "x"\n')],
      /unknown\.cfg: unknown option client_idd: oauth2-proxy v7\.15 has no such setting/,
    ],
    ['a value of the wrong type', [write('type.cfg', 'cookie_secure = ["yes"]\n')], /type\.cfg cookie_secure: expects true or false/],
    ['unknown flag', ['--', '--client-idd=x'], /flags: unknown flag --client-idd/],
    ['a flag without its value', ['--', '--client-id'], /flags: --client-id needs a value/],
    ['an argument that is no flag', ['--', 'serve'], /unexpected argument "serve"/],
    ['unknown environment name', [write('unknown.env', 'OAUTH2_PROXY_ALLOWED_GROUP=admins\n')], /unknown\.env:1 OAUTH2_PROXY_ALLOWED_GROUP: unknown option/],
    ['an environment line that is not one', [write('broken.env', 'OAUTH2_PROXY_CLIENT_ID=a\nnot a line\n')], /broken\.env:2: not a NAME=value line/],
    ['bad YAML', [write('bad.yaml', 'providers: [\n')], /bad\.yaml:\d+: not YAML/],
    [
      'unknown alpha field',
      [write('field.yaml', 'upstreamConfig:\n  upstreams:\n    - id: a\n      path: /\n      url: http://x\n')],
      /field\.yaml upstreamConfig\.upstreams\[0\]\.url: unknown field/,
    ],
    ['two alpha providers', [write('two.yaml', 'providers:\n  - id: a\n  - id: b\n')], /runs one provider, this file lists 2/],
    [
      'SameSite=None without Secure',
      [write('samesite.cfg', 'cookie_samesite = "none"\ncookie_secure = false\n')],
      /samesite\.cfg cookie_samesite contradicts .*samesite\.cfg cookie_secure: a SameSite=None cookie must be Secure/,
    ],
    [
      'upstreams in both forms',
      [
        write('both.cfg', 'upstreams = ["http://127.0.0.1:1"]\n'),
        write('both.yaml', 'upstreamConfig:\n  upstreams:\n    - id: a\n      path: /\n      uri: http://127.0.0.1:2\n'),
      ],
      /both\.cfg upstreams: not an option beside an alpha configuration \(oauth2-proxy refuses it there\)/,
    ],
    [
      'a provider option beside the alpha provider',
      ['--', '--client-id=one', `--alpha-config=${write('client.yaml', 'providers:\n  - id: a\n    clientID: two\n')}`],
      /flags --client-id: not an option beside an alpha configuration/,
    ],
    [
      'a redis store without its URL',
      [write('redis.cfg', 'session_store_type = "redis"\n')],
      /redis\.cfg session_store_type: a redis session store needs redis_connection_url/,
    ],
    [
      'no redirect_url nor --public-url',
      ['--', '--oidc-issuer-url=https://idp.example.com', '--client-id=a', '--upstream=http://127.0.0.1:1'],
      /no redirect_url: the gateway needs its public origin/,
    ],
    ['no upstream', ['--public-url', 'https://a.example', '--', '--oidc-issuer-url=https://idp.example.com', '--client-id=a'], /no upstream/],
    ['no client id', ['--public-url', 'https://a.example', '--', '--oidc-issuer-url=https://idp.example.com', '--upstream=http://127.0.0.1:1'], /no client_id/],
    [
      'a result check would refuse',
      [
        '--public-url',
        'https://a.example',
        '--',
        '--oidc-issuer-url=https://idp.example.com',
        '--client-id=a',
        '--upstream=http://127.0.0.1:1',
        '--cookie-name=bad name!',
      ],
      /the converted configuration would not pass check:\n.*\n {2}cookies\.name: /,
    ],
    ['nothing to read', [], /nothing to read/],
    ['--public-url not an origin', ['--public-url', 'ftp://x', '--', '--client-id=a'], /--public-url ftp:\/\/x: an http\(s\) origin/],
    [
      '--out not writable',
      [
        '--out',
        join(dir, 'no', 'such', 'dir.yaml'),
        '--public-url',
        'https://a.example',
        '--',
        '--oidc-issuer-url=https://idp.example.com',
        '--client-id=a',
        '--upstream=http://127.0.0.1:1',
      ],
      /--out .*: cannot be written \(ENOENT\)/,
    ],
  ]
  for (const [name, args, message] of cases) {
    const got = run(['oauth2-proxy', ...args])
    t.equal(got.code, 2, name)
    t.equal(got.stdout, '', `${name}: nothing written`)
    t.match(got.stderr, message, name)
  }
  const other = run(['nginx', 'x.cfg'])
  t.equal(other.code, 2)
  t.match(other.stderr, /import reads oauth2-proxy's configuration/)
})

t.test('the real command: usage, help and exit codes', async (t) => {
  const help = await cli(['import', '--help']).done
  t.equal(help.code, 0)
  t.match(help.stdout, /Exit codes: 0 written, every setting carried; 1 written, with settings it could not carry/)
  const bad = await cli(['import', 'oauth2-proxy', 'no-such-file.cfg']).done
  t.equal(bad.code, 2)
  t.equal(bad.stdout, '')
  t.match(bad.stderr, /no-such-file\.cfg: cannot be read/)
  const top = await cli(['--help']).done
  t.match(top.stdout, /import oauth2-proxy \[FILE\.\.\.\] \[-- FLAG\.\.\.\]/)
})

t.test('the table: one row per option, each cfg name once', async (t) => {
  const flags = MAPPINGS.map((m) => m.flag)
  t.equal(new Set(flags).size, flags.length, 'no flag twice')
  const cfgs = MAPPINGS.flatMap((m) => m.cfg)
  t.equal(new Set(cfgs).size, cfgs.length, 'no cfg name twice')
  t.ok(flags.length > 160, `${flags.length} rows`)
})
