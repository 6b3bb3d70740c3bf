import { GatewayError } from '../contract/errors.js'
import { apiCall, type ApiAnswer, isRecord, jsonOf } from './group-api.js'

// GitLab project membership as groups (provider.claimSources.gitlabProjects), what oauth2-proxy's
// `--gitlab-projects=group/project[=access_level]` does: a user who is a member of a listed project
// with at least its access level gets the group `project:group/project` (oauth2-proxy's prefix),
// which `allow.groups` names like any group. GitLab's own groups need no API: GitLab is an OpenID
// provider whose ID token carries `groups_direct` and whose UserInfo carries `groups`
// ("GitLab as OpenID Connect identity provider",
// https://docs.gitlab.com/integration/openid_connect_provider/#shared-information).
//
// The rules played, each from GitLab's REST API documentation:
// - "List all projects" (https://docs.gitlab.com/api/projects/#list-all-projects):
//   GET /api/v4/projects with `membership=true` ("Limit by projects that the current user is a
//   member of"), `min_access_level` ("Limit by current user minimal role"), `archived=false`
//   (an archived project grants nothing, as oauth2-proxy decides), `simple=true`; each project's
//   `path_with_namespace`. Authorised by the user's OAuth token as a Bearer token
//   (https://docs.gitlab.com/api/rest/authentication/#oauth-20-tokens) with the `read_api` scope
//   ("Grants read access to the API, including all groups and projects",
//   https://docs.gitlab.com/user/profile/personal_access_tokens/#personal-access-token-scopes).
// - Access levels (https://docs.gitlab.com/api/access_requests/#valid-access-levels; Planner, 15, since GitLab 17.7):
//   10 Guest, 15 Planner, 20 Reporter, 30 Developer, 40 Maintainer, 50 Owner. oauth2-proxy's
//   default, 20, is kept.
// - Offset pagination (https://docs.gitlab.com/api/rest/#offset-based-pagination): `page`,
//   `per_page` ("Number of items to list per page (default: 20, max: 100)"), and the answer's
//   `x-next-page` header ("The index of the next page", empty on the last). Only that number is
//   used: a `Link` header's URL is never followed, so the token never leaves gitlabUrl.
// - Status codes (https://docs.gitlab.com/api/rest/troubleshooting/#status-codes): 401 for a
//   user not authenticated (a token expired or revoked), 403 for a request not allowed (here: a
//   token without `read_api`, `insufficient_scope`), 429 past the rate limits, with Retry-After
//   (https://docs.gitlab.com/security/rate_limits/).
//
// Bounded: MAX_GITLAB_PAGES pages per access level, and the listing stops as soon as every
// configured project has been seen. A listing that cannot be read whole fails (502), since it
// could lack the project an allow rule needs.

/** oauth2-proxy's prefix of a project group: `project:group/project`. */
export const GITLAB_PROJECT_PREFIX = 'project:'
/** Reporter: oauth2-proxy's default when a project names no level. */
export const DEFAULT_GITLAB_ACCESS_LEVEL = 20
export const GITLAB_ACCESS_LEVELS: readonly number[] = [10, 15, 20, 30, 40, 50]
/** GitLab's largest page. */
const PER_PAGE = 100
/** Pages read at most per access level: 2,000 projects the user is a member of. */
export const MAX_GITLAB_PAGES = 20

export interface GitlabProject {
  /** `namespace/project`, as configured. */
  path: string
  minAccessLevel: number
}

export interface GitlabProjectsOptions {
  /** GitLab's root (where /api/v4 is). */
  baseUrl: string
  timeoutMs: number
}

/** A `gitlabProjects` item (`namespace/project[=level]`), or what is wrong with it. */
export function parseGitlabProject(spec: string): GitlabProject | string {
  const [path = '', level, ...rest] = spec.split('=')
  const wrong = `must be namespace/project or namespace/project=<access level> (${GITLAB_ACCESS_LEVELS.join(', ')})`
  // A project path: namespaces and the project's path, letters, digits, _ . and - only
  // (https://docs.gitlab.com/user/reserved_names/).
  if (rest.length > 0 || !/^[\w.-]+(\/[\w.-]+)+$/.test(path)) return wrong
  if (level === undefined) return { path, minAccessLevel: DEFAULT_GITLAB_ACCESS_LEVEL }
  const number = /^\d{1,2}$/.test(level) ? Number(level) : NaN
  return GITLAB_ACCESS_LEVELS.includes(number) ? { path, minAccessLevel: number } : wrong
}

/** The projects API page `page` of the user's projects with at least `level`. */
export function gitlabProjectsUrl(baseUrl: string, level: number, page: number): string {
  const url = new URL(`${baseUrl.replace(/\/+$/, '')}/api/v4/projects`)
  url.search = new URLSearchParams({
    membership: 'true',
    min_access_level: String(level),
    archived: 'false',
    simple: 'true',
    order_by: 'id',
    sort: 'asc',
    per_page: String(PER_PAGE),
    page: String(page),
  }).toString()
  return url.href
}

/**
 * The groups `project:<path>` of the configured `projects` the token's user is a member of with
 * their access level at least. Throws GatewayError `provider_unavailable` (502) when the
 * projects cannot be read.
 */
export async function gitlabProjectGroups(accessToken: string, projects: readonly GitlabProject[], options: GitlabProjectsOptions): Promise<string[]> {
  const found: string[] = []
  for (const level of new Set(projects.map((p) => p.minAccessLevel))) {
    // GitLab matches paths without regard to case (a project is reached as Group/Project too).
    const wanted = new Map(projects.filter((p) => p.minAccessLevel === level).map((p) => [p.path.toLowerCase(), p.path]))
    for (const path of await memberPaths(accessToken, level, new Set(wanted.keys()), options)) {
      const configured = wanted.get(path)
      if (configured !== undefined) found.push(`${GITLAB_PROJECT_PREFIX}${configured}`)
    }
  }
  return [...new Set(found)]
}

/** Lower-cased paths of the user's projects at `level`, read until every `wanted` one is seen or the last page. */
async function memberPaths(accessToken: string, level: number, wanted: ReadonlySet<string>, options: GitlabProjectsOptions): Promise<Set<string>> {
  const seen = new Set<string>()
  let page: number | undefined = 1
  for (let pages = 1; page !== undefined; pages++) {
    if (pages > MAX_GITLAB_PAGES) throw gitlabFailure(`GitLab listed more than ${MAX_GITLAB_PAGES} pages of the user's projects`)
    const answer = await apiCall({
      url: gitlabProjectsUrl(options.baseUrl, level, page),
      headers: { authorization: `Bearer ${accessToken}`, accept: 'application/json' },
      timeoutMs: options.timeoutMs,
      fail: gitlabFailure,
      throttled: (a) => a.status === 429,
    })
    refused(answer)
    const paths = projectPaths(answer.body)
    if (paths === undefined) throw gitlabFailure('GitLab answered something other than a list of projects')
    for (const path of paths) seen.add(path.toLowerCase())
    if ([...wanted].every((path) => seen.has(path))) break
    page = nextPage(answer.headers, page)
  }
  return seen
}

function refused(answer: ApiAnswer): void {
  if (answer.status === 200) return
  if (answer.status === 401) throw gitlabFailure('GitLab refused the access token (401): it is expired or revoked')
  if (answer.status === 403) {
    throw gitlabFailure(
      'GitLab refused the access token (403): the sign-in must ask for the read_api scope (provider.scopes) and the GitLab application allow it',
    )
  }
  throw gitlabFailure(`GitLab answered HTTP ${answer.status}`)
}

/** `x-next-page`: the next page's number, `undefined` on the last page (empty). Anything else is a failure. */
export function nextPage(headers: Headers, current: number): number | undefined {
  const next = headers.get('x-next-page')?.trim() ?? ''
  if (next === '') return undefined
  if (!/^\d{1,6}$/.test(next) || Number(next) <= current) throw gitlabFailure(`GitLab named a next page that does not follow page ${current}`)
  return Number(next)
}

function projectPaths(body: string): string[] | undefined {
  const parsed = jsonOf(body)
  if (!Array.isArray(parsed)) return undefined
  const paths: string[] = []
  for (const project of parsed as unknown[]) {
    if (!isRecord(project) || typeof project.path_with_namespace !== 'string') return undefined
    paths.push(project.path_with_namespace)
  }
  return paths
}

function gitlabFailure(why: string, cause?: unknown): GatewayError {
  return new GatewayError('provider_unavailable', `the user's GitLab projects could not be read: ${why}`, cause === undefined ? {} : { cause })
}
