// openid-gateway import oauth2-proxy: the provider-specific options it carries to the gateway's
// GitHub provider (provider.github) and group sources (provider.claimSources.gitlabProjects,
// googleGroups, UserInfo's groups), and each one it cannot carry, with why. Every converted result
// is checked by the real `check`, as users run it; the rules are oauth2-proxy v7.15's
// (providers/github.go, gitlab.go, google.go of oauth2-proxy/oauth2-proxy).

import { generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { parse } from 'yaml'
import { runImport } from '#src/import/command'
import { Draft } from '#src/import/draft'
import { MAPPINGS } from '#src/import/mappings'
import { cli } from '../fixtures/cli.ts'

const dir = mkdtempSync(join(tmpdir(), 'ogw-import-providers-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))

const ENV = { OIDC_CLIENT_SECRET: 'client-secret-from-the-environment', COOKIE_SECRET: 'cookie-secret-from-the-environment-0123456789' }
const CLIENT_SECRET = 'input-client-secret-7c1e'
const GITHUB_TOKEN = 'ghp_input0wner0token0never0written'

/** A Google service account's JSON key, as the Cloud console gives it (a fresh RSA key). */
const KEY_FILE = join(dir, 'google-groups.json')
writeFileSync(
  KEY_FILE,
  JSON.stringify({
    type: 'service_account',
    client_email: 'groups-reader@project.iam.gserviceaccount.com',
    private_key_id: 'k1',
    private_key: generateKeyPairSync('rsa', {
      modulusLength: 2048,
      privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
      publicKeyEncoding: { type: 'spki', format: 'pem' },
    }).privateKey,
  }),
  { mode: 0o400 },
)

/** oauth2-proxy.cfg with the settings every case shares, then `own`. */
function cfg(name: string, own: string): string {
  const path = join(dir, `${name}.cfg`)
  writeFileSync(
    path,
    [
      'redirect_url = "https://app.example.com/oauth2/callback"',
      'client_id = "client-0123"',
      `client_secret = "${CLIENT_SECRET}"`,
      'cookie_secret = "OQINaROshtE9TcZkNAm-5Zs2Pv3xaWytBmc5W7sPX7w="',
      'upstreams = ["http://127.0.0.1:3000/"]',
      'email_domains = ["*"]',
      own,
    ].join('\n'),
  )
  return path
}

interface Converted {
  code: number
  stderr: string
  config: Record<string, unknown>
  out: string
}

let outputs = 0
/** The converter, in this process; its output written to a file for `check`. */
function convert(name: string, own: string): Converted {
  const out = join(dir, `${name}-${++outputs}.yaml`)
  let stderr = ''
  const code = runImport(['oauth2-proxy', cfg(name, own), '--out', out], { stdout: () => undefined, stderr: (s) => (stderr += s), cwd: dir })
  let config: Record<string, unknown> = {}
  if (code !== 2) {
    const text = readFileSync(out, 'utf8')
    for (const secret of [CLIENT_SECRET, GITHUB_TOKEN]) if (text.includes(secret)) throw new Error(`${name}: a secret of the input was written`)
    config = parse(text) as Record<string, unknown>
  }
  return { code, stderr, config, out }
}

/** The real check on a converted file, with its variables set: it must pass. */
async function checked(t: Test, result: Converted): Promise<void> {
  const run = await cli(['check', '--config', result.out], ENV).done
  t.equal(run.code, 0, run.stderr)
  t.match(run.stdout, /^OK: /)
}

interface Case {
  own: string
  code: 0 | 1
  /** Keys the result must hold (a subset). */
  expect: Record<string, unknown>
  /** Keys (dotted paths) the result must not hold. */
  absent?: string[]
  /** Substrings of the stderr report. */
  report?: string[]
}

const PROVIDER = (type: string): string => `provider = "${type}"`

const CASES: Record<string, Case> = {
  'github: github_org with github_team slugs, github_users, scope': {
    own: [
      PROVIDER('github'),
      'github_org = "acme"',
      'github_team = "platform-admins, sre"',
      'github_users = ["octocat"]',
      'scope = "user:email read:org"',
    ].join('\n'),
    code: 0,
    expect: {
      provider: {
        issuer: 'https://github.com',
        userClaim: 'preferred_username',
        github: { teams: ['acme/platform-admins', 'acme/sre'], users: ['octocat'], scopes: ['user:email', 'read:org'] },
      },
    },
    // The team's org only scopes the teams: an organization entry would admit all of acme.
    absent: ['provider.github.organizations', 'provider.scopes'],
  },
  'github: github_org alone': {
    own: [PROVIDER('github'), 'github_org = "acme"'].join('\n'),
    code: 0,
    expect: { provider: { issuer: 'https://github.com', github: { organizations: ['acme'] } } },
    absent: ['provider.github.teams', 'provider.github.scopes'],
  },
  'github: github_repo without github_org': {
    own: [PROVIDER('github'), 'github_repo = "acme/infra"'].join('\n'),
    code: 0,
    expect: { provider: { github: { repositories: ['acme/infra'] } } },
  },
  'github: github_repo with github_token (an owner token for the collaborator check)': {
    own: [PROVIDER('github'), 'github_repo = "acme/infra"', `github_token = "${GITHUB_TOKEN}"`].join('\n'),
    code: 1,
    expect: { provider: { github: { repositories: ['acme/infra'] } } },
    report: ["github_token: the gateway has no owner's token: github.repositories asks GitHub with the user's own token"],
  },
  'github: github_repo beside github_org, which oauth2-proxy ignores': {
    own: [PROVIDER('github'), 'github_org = "acme"', 'github_repo = "acme/infra"'].join('\n'),
    code: 1,
    expect: { provider: { github: { organizations: ['acme'] } } },
    absent: ['provider.github.repositories'],
    report: ['github_repo: oauth2-proxy ignores github_repo when github_org is set'],
  },
  'github: github_team without github_org': {
    own: [PROVIDER('github'), 'github_team = "sre"'].join('\n'),
    code: 1,
    expect: { provider: { github: {} } },
    absent: ['provider.github.teams'],
    report: ['github_team: oauth2-proxy reads github_team only with github_org'],
  },
  'github: GitHub Enterprise Server by login_url, redeem_url and validate_url': {
    own: [
      PROVIDER('github'),
      'login_url = "https://ghe.example.com/login/oauth/authorize"',
      'redeem_url = "https://ghe.example.com/login/oauth/access_token"',
      'validate_url = "https://ghe.example.com/api/v3/"',
      'github_org = "acme"',
    ].join('\n'),
    code: 0,
    expect: { provider: { issuer: 'https://ghe.example.com', github: { organizations: ['acme'] } } },
  },
  'github: github.com API as validate_url': {
    own: [PROVIDER('github'), 'validate_url = "https://api.github.com/"'].join('\n'),
    code: 0,
    expect: { provider: { issuer: 'https://github.com' } },
  },
  'github: endpoints the GitHub provider does not use, or of two servers': {
    own: [
      PROVIDER('github'),
      'login_url = "https://ghe.example.com/login/oauth/authorize"',
      'redeem_url = "https://other.example.com/login/oauth/access_token"',
      'validate_url = "https://ghe.example.com/api/graphql"',
    ].join('\n'),
    code: 1,
    expect: { provider: { issuer: 'https://github.com' } },
    report: [
      'login_url: names another GitHub server than redeem_url',
      'redeem_url: names another GitHub server than login_url',
      "validate_url: the gateway's GitHub provider uses <issuer>/login/oauth/authorize, <issuer>/login/oauth/access_token and <issuer>/api/v3",
    ],
  },
  'github: OpenID Connect options, which oauth2-proxy does not read for GitHub': {
    own: [
      PROVIDER('github'),
      'oidc_issuer_url = "https://idp.example.com"',
      'oidc_groups_claim = "roles"',
      'oidc_extra_audiences = ["api"]',
      'oidc_enabled_signing_algs = ["RS256"]',
      'auth_request_response_mode = "form_post"',
    ].join('\n'),
    code: 1,
    expect: { provider: { issuer: 'https://github.com', github: {} } },
    absent: ['provider.groupsClaim', 'provider.audiences', 'provider.idTokenAlgorithms', 'provider.responseMode'],
    report: [
      "oidc_issuer_url: not read by oauth2-proxy's GitHub provider",
      "oidc_groups_claim: not read by oauth2-proxy's GitHub provider",
      "oidc_extra_audiences: not read by oauth2-proxy's GitHub provider",
      "oidc_enabled_signing_algs: not read by oauth2-proxy's GitHub provider",
      "auth_request_response_mode: not read by oauth2-proxy's GitHub provider",
    ],
  },
  'github options with another provider': {
    own: [PROVIDER('oidc'), 'oidc_issuer_url = "https://idp.example.com"', 'github_org = "acme"', 'github_users = ["octocat"]'].join('\n'),
    code: 1,
    expect: { provider: { issuer: 'https://idp.example.com' } },
    absent: ['provider.github'],
    report: ['github_org: read by oauth2-proxy with provider = "github" only', 'github_users: read by oauth2-proxy with provider = "github" only'],
  },
  'oidc: login_url is not read (discovery)': {
    own: [PROVIDER('oidc'), 'oidc_issuer_url = "https://idp.example.com"', 'login_url = "https://idp.example.com/authorize"'].join('\n'),
    code: 1,
    expect: {},
    report: ["login_url: the gateway reads the provider's endpoints and keys from its discovery document only"],
  },
  'gitlab: gitlab_groups and gitlab_projects, with allowed_groups': {
    own: [
      PROVIDER('gitlab'),
      'scope = "openid email"',
      'gitlab_groups = ["infra", "infra/platform"]',
      'gitlab_projects = ["infra/deploy=30", "infra/docs"]',
      'allowed_groups = ["admins"]',
    ].join('\n'),
    code: 0,
    expect: {
      provider: {
        issuer: 'https://gitlab.com',
        scopes: ['openid', 'email', 'read_api'],
        claimSources: { userInfo: true, gitlabProjects: ['infra/deploy=30', 'infra/docs'] },
      },
      upstreams: [{ allow: { groups: ['infra', 'infra/platform', 'project:infra/deploy', 'project:infra/docs', 'admins'] } }],
    },
  },
  'gitlab: gitlab_projects alone, the default scopes and read_api': {
    own: [PROVIDER('gitlab'), 'oidc_issuer_url = "https://gitlab.example.com"', 'gitlab_projects = ["infra/deploy"]'].join('\n'),
    code: 0,
    expect: {
      provider: {
        issuer: 'https://gitlab.example.com',
        scopes: ['openid', 'profile', 'email', 'read_api'],
        claimSources: { gitlabProjects: ['infra/deploy'] },
      },
      upstreams: [{ allow: { groups: ['project:infra/deploy'] } }],
    },
    absent: ['provider.claimSources.userInfo'],
  },
  'gitlab options with another provider': {
    own: [PROVIDER('oidc'), 'oidc_issuer_url = "https://idp.example.com"', 'gitlab_groups = ["infra"]', 'gitlab_projects = ["infra/deploy"]'].join('\n'),
    code: 1,
    expect: {},
    absent: ['provider.claimSources', 'upstreams.0.allow.groups'],
    report: ['gitlab_groups: read by oauth2-proxy with provider = "gitlab" only', 'gitlab_projects: read by oauth2-proxy with provider = "gitlab" only'],
  },
  'google: google_groups, google_admin_email and google_service_account_json': {
    own: [
      PROVIDER('google'),
      'google_groups = ["admins@example.com"]',
      'google_admin_email = "admin@example.com"',
      `google_service_account_json = "${KEY_FILE}"`,
    ].join('\n'),
    code: 0,
    expect: {
      provider: { issuer: 'https://accounts.google.com', claimSources: { googleGroups: { adminEmail: 'admin@example.com', serviceAccountKeyFile: KEY_FILE } } },
      upstreams: [{ allow: { groups: ['admins@example.com'] } }],
    },
    report: [`needs: provider.claimSources.googleGroups.serviceAccountKeyFile: ${KEY_FILE} must exist`],
  },
  'google: Application Default Credentials instead of a key': {
    own: [
      PROVIDER('google'),
      'google_groups = ["admins@example.com"]',
      'google_admin_email = "admin@example.com"',
      'google_use_application_default_credentials = true',
    ].join('\n'),
    code: 1,
    // The groups are still required: no session has them, so nobody is admitted (never open).
    expect: { upstreams: [{ allow: { groups: ['admins@example.com'] } }] },
    absent: ['provider.claimSources'],
    report: [
      'google_groups: the groups are read with provider.claimSources.googleGroups, which needs google_admin_email and google_service_account_json',
      "google_admin_email: the gateway reads Google groups with a service account's JSON key",
      'google_use_application_default_credentials: the gateway reads Google groups with a service account',
    ],
  },
  'google: a key without the administrator; impersonation, organization id, another Directory scope': {
    own: [
      'google_groups = ["admins@example.com"]',
      `google_service_account_json = "${KEY_FILE}"`,
      'google_target_principal = "reader@project.iam.gserviceaccount.com"',
      'google_use_organization_id = true',
      'google_admin_api_user_scope = "https://www.googleapis.com/auth/admin.directory.group"',
    ].join('\n'),
    code: 1,
    expect: { provider: { issuer: 'https://accounts.google.com' }, upstreams: [{ allow: { groups: ['admins@example.com'] } }] },
    absent: ['provider.claimSources'],
    report: [
      'google_groups: the groups are read with provider.claimSources.googleGroups, which needs google_admin_email and google_service_account_json',
      'google_service_account_json: provider.claimSources.googleGroups needs the administrator the service account acts as (google_admin_email)',
      'google_target_principal: the gateway reads Google groups with a service account',
      "google_use_organization_id: the gateway reads groups from the Directory, not the user's organization id",
      'google_admin_api_user_scope: the gateway asks the Directory for the scope https://www.googleapis.com/auth/admin.directory.group.readonly alone',
    ],
  },
  'google options with another provider': {
    own: [
      PROVIDER('gitlab'),
      'google_groups = ["admins@example.com"]',
      'google_admin_email = "admin@example.com"',
      `google_service_account_json = "${KEY_FILE}"`,
    ].join('\n'),
    code: 1,
    expect: {},
    absent: ['provider.claimSources', 'upstreams.0.allow.groups'],
    report: [
      'google_groups: read by oauth2-proxy with provider = "google" only',
      'google_admin_email: read by oauth2-proxy with provider = "google" only',
      'google_service_account_json: read by oauth2-proxy with provider = "google" only',
    ],
  },
}

function at(config: unknown, dotted: string): unknown {
  return dotted.split('.').reduce<unknown>((v, key) => (typeof v === 'object' && v !== null ? (v as Record<string, unknown>)[key] : undefined), config)
}

for (const [name, c] of Object.entries(CASES)) {
  t.test(name, async (t) => {
    const result = convert(name.replace(/[^a-z0-9]+/gi, '-'), c.own)
    t.equal(result.code, c.code, result.stderr)
    t.match(result.config, c.expect)
    for (const path of c.absent ?? []) t.equal(at(result.config, path), undefined, `${path} is not written`)
    for (const line of c.report ?? [])
      t.ok(
        result.stderr.split('\n').some((l) => l.includes(line)),
        `reported: ${line}`,
      )
    const notCarried = result.stderr.split('\n').filter((l) => l.startsWith('not carried: '))
    t.equal(notCarried.length, (c.report ?? []).filter((l) => !l.startsWith('needs: ')).length, 'every line not carried is expected')
    await checked(t, result)
  })
}

t.test('google: a key file that does not exist where the converter runs is refused, naming the key', async (t) => {
  const missing = join(dir, 'no-such-key.json')
  const result = convert(
    'google-missing-key',
    [PROVIDER('google'), 'google_groups = ["a@example.com"]', 'google_admin_email = "admin@example.com"', `google_service_account_json = "${missing}"`].join(
      '\n',
    ),
  )
  t.equal(result.code, 2)
  t.match(result.stderr, 'the converted configuration would not pass check:')
  t.match(result.stderr, /provider\.claimSources\.googleGroups\.serviceAccountKeyFile: \S+no-such-key\.json cannot be read \(no such file\)/)
})

t.test('Bitbucket and the legacy keycloak provider are said to be no OpenID providers', async (t) => {
  for (const name of ['bitbucket-team', 'bitbucket-repository', 'keycloak-group']) {
    const mapping = MAPPINGS.find((m) => m.flag === name)
    t.ok(mapping, name)
    t.match(mapping?.carry('x', new Draft(), new Map()), /is not an OpenID provider/, name)
  }
})
