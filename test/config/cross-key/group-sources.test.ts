// provider.claimSources' group sources (docs/features/claim-sources.md): GitLab projects and
// Google Workspace groups; what the loader accepts, and what it refuses naming the key. `check`
// and `run` load through the same rules (src/config/load.ts).

import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import * as jose from 'jose'
import { problems, resolve } from '../../fixtures/config/base.ts'

const sources = (claimSources: Record<string, unknown>, provider: Record<string, unknown> = {}) => ({ provider: { claimSources, ...provider } })

const dir = mkdtempSync(join(tmpdir(), 'ogw-group-sources-'))
const { privateKey } = await jose.generateKeyPair('RS256', { extractable: true })
const KEY_JSON = JSON.stringify({ type: 'service_account', client_email: 'sa@p.iam.gserviceaccount.com', private_key_id: 'k1', private_key: await jose.exportPKCS8(privateKey) })
const keyFile = join(dir, 'sa.json')
writeFileSync(keyFile, KEY_JSON, { mode: 0o600 })
const notAKey = join(dir, 'user.json')
writeFileSync(notAKey, JSON.stringify({ type: 'authorized_user', client_id: 'x' }), { mode: 0o600 })
const google = (extra: Record<string, unknown>) => ({ googleGroups: { adminEmail: 'admin@example.com', ...extra } })

t.test('GitLab projects: namespace/project[=level], a GitLab access level', async (t) => {
  t.strictSame(problems(sources({ gitlabProjects: ['infra/deploy', 'infra/sub/app=40'] })), [])
  t.strictSame(resolve(sources({ gitlabProjects: ['infra/deploy'] })).providers[0]?.claimSources?.gitlabProjects, ['infra/deploy'])
  t.strictSame(problems(sources({ gitlabProjects: ['infra/deploy', 'deploy', 'infra/app=25'] })), [
    'provider.claimSources.gitlabProjects[1]: must be namespace/project or namespace/project=<access level> (10, 15, 20, 30, 40, 50)',
    'provider.claimSources.gitlabProjects[2]: must be namespace/project or namespace/project=<access level> (10, 15, 20, 30, 40, 50)',
  ])
})

t.test('gitlabUrl: https unless allowInsecureHttp, and only with gitlabProjects', async (t) => {
  t.strictSame(problems(sources({ gitlabProjects: ['a/b'], gitlabUrl: 'http://gitlab.test' })), [
    'provider.claimSources.gitlabUrl: must be an https URL (http only with provider.allowInsecureHttp: true)',
  ])
  t.strictSame(problems(sources({ gitlabProjects: ['a/b'], gitlabUrl: 'http://gitlab.test' }, { allowInsecureHttp: true })), [])
  t.strictSame(problems(sources({ gitlabUrl: 'https://gitlab.test' })), ['provider.claimSources.gitlabUrl: is only used with gitlabProjects; remove it'])
})

t.test('Google: the key from a file or from an environment variable, exactly one', async (t) => {
  t.strictSame(problems(sources(google({ serviceAccountKeyFile: keyFile }))), [])
  t.strictSame(problems(sources(google({ serviceAccountKeyEnv: 'GOOGLE_SA' })), { GOOGLE_SA: KEY_JSON }), [])
  const resolved = resolve(sources(google({ serviceAccountKeyFile: keyFile }))).providers[0]?.claimSources?.googleGroups
  t.strictSame(resolved, {
    adminEmail: 'admin@example.com',
    serviceAccountKeyFile: keyFile,
    tokenUrl: 'https://oauth2.googleapis.com/token',
    directoryUrl: 'https://admin.googleapis.com',
  })
  t.strictSame(problems(sources(google({}))), [
    'provider.claimSources.googleGroups.serviceAccountKeyFile: is required (or serviceAccountKeyEnv): the service account key Google groups are read with',
  ])
  t.strictSame(problems(sources(google({ serviceAccountKeyFile: keyFile, serviceAccountKeyEnv: 'GOOGLE_SA' })), { GOOGLE_SA: KEY_JSON }), [
    'provider.claimSources.googleGroups.serviceAccountKeyEnv: cannot be given with serviceAccountKeyFile: the key comes from one of them',
  ])
  t.strictSame(problems(sources({ googleGroups: { serviceAccountKeyFile: keyFile } })).length, 1, 'adminEmail is required')
})

t.test('a key written in the configuration is refused, naming the key', async (t) => {
  const inline =
    'holds the service account key itself: a key never belongs in the configuration; give the path of its JSON file (serviceAccountKeyFile) or the name of the environment variable that holds it (serviceAccountKeyEnv)'
  t.strictSame(problems(sources(google({ serviceAccountKeyFile: KEY_JSON }))), [`provider.claimSources.googleGroups.serviceAccountKeyFile: ${inline}`])
  t.strictSame(problems(sources(google({ serviceAccountKeyEnv: KEY_JSON }))), [`provider.claimSources.googleGroups.serviceAccountKeyEnv: ${inline}`])
  // `${VAR}` puts the variable's value in place: the key again, in the configuration.
  t.strictSame(problems(sources(google({ serviceAccountKeyFile: '${GOOGLE_SA}' })), { GOOGLE_SA: KEY_JSON }), [`provider.claimSources.googleGroups.serviceAccountKeyFile: ${inline}`])
  t.strictSame(problems(sources(google({ serviceAccountKeyEnv: '${GOOGLE_SA}' })), { GOOGLE_SA: KEY_JSON }), [`provider.claimSources.googleGroups.serviceAccountKeyEnv: ${inline}`])
  const pem = (await jose.exportPKCS8(privateKey)).trim()
  t.strictSame(problems(sources(google({ serviceAccountKeyFile: pem }))), [`provider.claimSources.googleGroups.serviceAccountKeyFile: ${inline}`], 'a PEM too')
  t.strictSame(problems(sources(google({ serviceAccountKeyEnv: 'google-sa' }))), [
    'provider.claimSources.googleGroups.serviceAccountKeyEnv: must be the name of an environment variable (letters, digits and _), not its value',
  ])
})

t.test('the key must be there and be a service account key', async (t) => {
  t.strictSame(problems(sources(google({ serviceAccountKeyEnv: 'GOOGLE_SA' }))), ['provider.claimSources.googleGroups.serviceAccountKeyEnv: environment variable GOOGLE_SA is not set'])
  t.strictSame(problems(sources(google({ serviceAccountKeyFile: join(dir, 'missing.json') }))), [
    `provider.claimSources.googleGroups.serviceAccountKeyFile: ${join(dir, 'missing.json')} cannot be read (no such file)`,
  ])
  t.strictSame(problems(sources(google({ serviceAccountKeyFile: notAKey }))), [
    'provider.claimSources.googleGroups.serviceAccountKeyFile: names a key that is not a service account key ("type" must be "service_account")',
  ])
  t.strictSame(problems(sources(google({ serviceAccountKeyEnv: 'GOOGLE_SA' })), { GOOGLE_SA: 'nonsense' }), [
    'provider.claimSources.googleGroups.serviceAccountKeyEnv: names a key that is not JSON: expected the JSON key Google gives for a service account',
  ])
})

t.test("Google's URLs are https unless allowInsecureHttp", async (t) => {
  t.strictSame(problems(sources(google({ serviceAccountKeyFile: keyFile, tokenUrl: 'http://127.0.0.1:1/token', directoryUrl: 'http://127.0.0.1:1' }))), [
    'provider.claimSources.googleGroups.tokenUrl: must be an https URL (http only with provider.allowInsecureHttp: true)',
    'provider.claimSources.googleGroups.directoryUrl: must be an https URL (http only with provider.allowInsecureHttp: true)',
  ])
  t.strictSame(problems(sources(google({ serviceAccountKeyFile: keyFile, tokenUrl: 'http://127.0.0.1:1/token' }), { allowInsecureHttp: true })), [])
})

t.test('both write the groups claim: a groupsClaim naming another claim is refused', async (t) => {
  t.strictSame(problems(sources({ gitlabProjects: ['a/b'] }, { groupsClaim: 'groups_direct' })), [
    "provider.claimSources.gitlabProjects: writes the session's groups claim, which provider.groupsClaim (groups_direct) does not read: remove groupsClaim",
  ])
  t.strictSame(problems(sources(google({ serviceAccountKeyFile: keyFile }), { groupsClaim: 'roles' })), [
    "provider.claimSources.googleGroups: writes the session's groups claim, which provider.groupsClaim (roles) does not read: remove groupsClaim",
  ])
  t.strictSame(problems(sources({ gitlabProjects: ['a/b'] }, { groupsClaim: 'groups' })), [])
})

t.test('in providers[] too, named at the provider', async (t) => {
  const providers = [
    { name: 'gitlab', issuer: 'https://gitlab.com', clientId: 'a', clientSecret: 'client-secret-Zq8xW3', claimSources: { gitlabProjects: ['deploy'] } },
    { name: 'google', issuer: 'https://accounts.google.com', clientId: 'b', clientSecret: 'client-secret-Zq8xW3', claimSources: google({ serviceAccountKeyFile: KEY_JSON }) },
  ]
  const found = problems({ provider: undefined, providers })
  t.ok(found.some((p) => p.startsWith('providers[0].claimSources.gitlabProjects[0]: must be namespace/project')))
  t.ok(found.some((p) => p.startsWith('providers[1].claimSources.googleGroups.serviceAccountKeyFile: holds the service account key itself')))
})
