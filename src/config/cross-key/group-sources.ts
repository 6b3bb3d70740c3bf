// The group sources of provider.claimSources (docs/features/claim-sources.md): GitLab projects
// (src/oidc/gitlab-projects.ts) and Google Workspace groups (src/oidc/google-groups.ts).
//
// - Each `gitlabProjects` item is `namespace/project[=level]` with one of GitLab's access levels.
// - The URLs that receive the user's token (gitlabUrl) or the service account's assertion and
//   token (tokenUrl, directoryUrl) are https, as the issuer is, unless allowInsecureHttp.
// - The service account's key comes from a file or an environment variable, exactly one, and
//   never from the configuration itself: a key written in place of the path or the variable's
//   name is refused naming the key, so that it is never kept (and shown) with the configuration.
//   The key must be there and be a service account key, so that `check` says so rather than every
//   sign-in failing.
// - Both write the session's `groups` claim: a groupsClaim naming another claim would never read
//   them.

import { parseGitlabProject } from '../../oidc/gitlab-projects.js'
import { parseServiceAccount, serviceAccountText } from '../../oidc/google-groups.js'
import type { Env } from '../env.js'
import { formatPath, type Issue, type Path } from '../path.js'
import { providerPaths } from './providers.js'
import { isBoolean, isRecord, isString, type Read, valueAt } from './read.js'

/** A value that is a key itself: JSON, or PEM. */
const KEY_TEXT = /^\s*\{|-----BEGIN [A-Z ]*PRIVATE KEY-----|"private_key"/
/** An environment variable's name (POSIX.1-2017 8.1, as the shell writes them). */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

export function groupSourceRules(read: Read, data: unknown, env: Env): Issue[] {
  return providerPaths(data).flatMap((at) => [...checkGitlab(read, at), ...checkGoogle(read, data, at, env)])
}

function checkGitlab(read: Read, at: Path): Issue[] {
  const sources = [...at, 'claimSources']
  const issues: Issue[] = []
  const projects = read([...sources, 'gitlabProjects'], (v): v is unknown[] => Array.isArray(v)) ?? []
  projects.forEach((spec, index) => {
    const parsed = typeof spec === 'string' ? parseGitlabProject(spec) : undefined
    if (typeof parsed === 'string') issues.push({ path: [...sources, 'gitlabProjects', index], message: parsed })
  })
  const url = read([...sources, 'gitlabUrl'], isString)
  if (url !== undefined && projects.length === 0) issues.push({ path: [...sources, 'gitlabUrl'], message: 'is only used with gitlabProjects; remove it' })
  issues.push(...httpsOnly(read, at, [...sources, 'gitlabUrl']))
  if (projects.length > 0) issues.push(...groupsClaimRead(read, at, [...sources, 'gitlabProjects']))
  return issues
}

function checkGoogle(read: Read, data: unknown, at: Path, env: Env): Issue[] {
  const google = [...at, 'claimSources', 'googleGroups']
  if (!isRecord(valueAt(data, google))) return []
  const issues: Issue[] = [...httpsOnly(read, at, [...google, 'tokenUrl']), ...httpsOnly(read, at, [...google, 'directoryUrl']), ...groupsClaimRead(read, at, google)]
  const file = read([...google, 'serviceAccountKeyFile'], isString)
  const name = read([...google, 'serviceAccountKeyEnv'], isString)
  const inline = (key: string): Issue => ({
    path: [...google, key],
    message: 'holds the service account key itself: a key never belongs in the configuration; give the path of its JSON file (serviceAccountKeyFile) or the name of the environment variable that holds it (serviceAccountKeyEnv)',
  })
  if (file !== undefined && KEY_TEXT.test(file)) return [...issues, inline('serviceAccountKeyFile')]
  if (name !== undefined && KEY_TEXT.test(name)) return [...issues, inline('serviceAccountKeyEnv')]
  if (name !== undefined && !ENV_NAME.test(name)) {
    return [...issues, { path: [...google, 'serviceAccountKeyEnv'], message: 'must be the name of an environment variable (letters, digits and _), not its value' }]
  }
  if (file !== undefined && name !== undefined) {
    return [...issues, { path: [...google, 'serviceAccountKeyEnv'], message: 'cannot be given with serviceAccountKeyFile: the key comes from one of them' }]
  }
  if (file === undefined && name === undefined) {
    // Either may be absent because it has another problem already reported: say nothing more then.
    const given = valueAt(data, [...google, 'serviceAccountKeyFile']) !== undefined || valueAt(data, [...google, 'serviceAccountKeyEnv']) !== undefined
    return given ? issues : [...issues, { path: [...google, 'serviceAccountKeyFile'], message: 'is required (or serviceAccountKeyEnv): the service account key Google groups are read with' }]
  }
  const keyPath = [...google, name === undefined ? 'serviceAccountKeyFile' : 'serviceAccountKeyEnv']
  const text = serviceAccountText({ ...(file === undefined ? {} : { serviceAccountKeyFile: file }), ...(name === undefined ? {} : { serviceAccountKeyEnv: name }) }, env)
  if (typeof text !== 'string') return [...issues, { path: keyPath, message: text.why }]
  const account = parseServiceAccount(text)
  if (typeof account === 'string') issues.push({ path: keyPath, message: `names a key that ${account}` })
  return issues
}

function httpsOnly(read: Read, at: Path, path: Path): Issue[] {
  const url = read(path, isString)
  if (url === undefined || !/^http:/i.test(url) || read([...at, 'allowInsecureHttp'], isBoolean) === true) return []
  return [{ path, message: `must be an https URL (http only with ${formatPath([...at, 'allowInsecureHttp'])}: true)` }]
}

function groupsClaimRead(read: Read, at: Path, path: Path): Issue[] {
  const claim = read([...at, 'groupsClaim'], isString)
  if (claim === undefined || claim === 'groups') return []
  return [{ path, message: `writes the session's groups claim, which ${formatPath([...at, 'groupsClaim'])} (${claim}) does not read: remove groupsClaim` }]
}
