import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { GatewayError } from '#src/contract/errors'
import { gitlabProjectGroups, gitlabProjectsUrl, MAX_GITLAB_PAGES, nextPage, parseGitlabProject } from '#src/oidc/gitlab-projects'
import { MAX_THROTTLE_RETRIES } from '#src/oidc/group-api'
import { projects, startGitlabApi } from '../fixtures/gitlab-api.ts'
import type { Teardown } from '../fixtures/stack.ts'

// GitLab project membership as groups (src/oidc/gitlab-projects.ts), against the fixture that
// plays GitLab's projects API by its documented rules (test/fixtures/gitlab-api.ts).

async function gitlab(t: Teardown, behaviour: Parameters<typeof startGitlabApi>[0]) {
  const g = await startGitlabApi(behaviour)
  t.teardown(() => g.close())
  return g
}

const wanted = (...specs: string[]) => specs.map((spec) => parseGitlabProject(spec)).filter((p) => typeof p !== 'string')

async function failure(promise: Promise<unknown>): Promise<GatewayError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  if (!(err instanceof GatewayError)) throw new Error(`expected a GatewayError, got ${String(err)}`)
  return err
}

t.test('a member at the level asked gets project:<path>; below it, archived or not a member, not', async (t) => {
  const g = await gitlab(t, {
    memberships: [
      { path: 'infra/deploy', level: 30 },
      { path: 'infra/docs', level: 10 },
      { path: 'infra/old', level: 50, archived: true },
    ],
  })
  const groups = await gitlabProjectGroups('user-token', wanted('infra/deploy=30', 'infra/docs', 'infra/old', 'infra/elsewhere'), {
    baseUrl: g.url,
    timeoutMs: 2000,
  })
  t.strictSame(groups, ['project:infra/deploy'], 'docs needs Reporter (20) by default; old is archived; elsewhere is not the user’s')
  t.ok(
    g.requests.every((r) => r.authorization === 'Bearer user-token'),
    "with the user's token",
  )
  t.strictSame([...new Set(g.requests.map((r) => r.query.get('min_access_level')))].sort(), ['20', '30'], 'one listing per level')
  t.ok(
    g.requests.every((r) => r.query.get('membership') === 'true' && r.query.get('archived') === 'false' && r.query.get('per_page') === '100'),
    'membership only, archived left out, the largest page',
  )
})

t.test("a path's case does not matter (GitLab's paths are case-insensitive); the configured spelling is the group", async (t) => {
  const g = await gitlab(t, { memberships: [{ path: 'Infra/Deploy', level: 20 }] })
  t.strictSame(await gitlabProjectGroups('tok', wanted('infra/deploy'), { baseUrl: g.url, timeoutMs: 2000 }), ['project:infra/deploy'])
})

t.test('pages are followed through x-next-page, and the listing stops once every project is seen', async (t) => {
  const g = await gitlab(t, { memberships: projects(250, 30) })
  t.strictSame(await gitlabProjectGroups('tok', wanted('team/project-249'), { baseUrl: g.url, timeoutMs: 2000 }), ['project:team/project-249'])
  t.strictSame(
    g.requests.map((r) => r.query.get('page')),
    ['1', '2', '3'],
    'three pages of 100',
  )
  const early = await gitlab(t, { memberships: projects(250, 30) })
  await gitlabProjectGroups('tok', wanted('team/project-5'), { baseUrl: early.url, timeoutMs: 2000 })
  t.equal(early.requests.length, 1, 'found on the first page: no more pages read')
})

t.test('more pages than the bound fails (502) rather than deciding on part of the list', async (t) => {
  const g = await gitlab(t, { memberships: projects(100 * MAX_GITLAB_PAGES + 1, 30) })
  const err = await failure(gitlabProjectGroups('tok', wanted('team/not-there'), { baseUrl: g.url, timeoutMs: 5000 }))
  t.equal(err.status, 502)
  t.match(err.message, /more than 20 pages/)
  t.equal(g.requests.length, MAX_GITLAB_PAGES)
})

t.test('a next page that does not follow the current one fails (no loop)', async (t) => {
  const g = await gitlab(t, { memberships: projects(150, 30), nextPageOverride: '1' })
  const err = await failure(gitlabProjectGroups('tok', wanted('team/not-there'), { baseUrl: g.url, timeoutMs: 2000 }))
  t.match(err.message, /does not follow page 1/)
  t.equal(g.requests.length, 1)
})

t.test('a 429 is waited out for its Retry-After; past the bound it fails', async (t) => {
  const g = await gitlab(t, { memberships: projects(3, 30), throttle: 2, retryAfter: '0' })
  t.strictSame(await gitlabProjectGroups('tok', wanted('team/project-1'), { baseUrl: g.url, timeoutMs: 2000 }), ['project:team/project-1'])
  t.equal(g.requests.length, 3, 'two throttled, then the page')
  const many = await gitlab(t, { memberships: projects(3, 30), throttle: 10, retryAfter: '0' })
  const err = await failure(gitlabProjectGroups('tok', wanted('team/project-1'), { baseUrl: many.url, timeoutMs: 2000 }))
  t.match(err.message, /throttled/)
  t.equal(many.requests.length, MAX_THROTTLE_RETRIES + 1)
})

t.test('401 and 403 fail with what to do', async (t) => {
  const g = await gitlab(t, { memberships: projects(3, 30), token: () => 'unauthenticated' })
  t.match((await failure(gitlabProjectGroups('tok', wanted('team/project-1'), { baseUrl: g.url, timeoutMs: 2000 }))).message, /401.*expired or revoked/)
  g.set({ token: () => 'insufficient_scope' })
  t.match((await failure(gitlabProjectGroups('tok', wanted('team/project-1'), { baseUrl: g.url, timeoutMs: 2000 }))).message, /403.*read_api/)
})

t.test('an answer that is not a list of projects, another status, or no answer, fails', async (t) => {
  const g = await gitlab(t, {})
  t.match((await failure(gitlabProjectGroups('tok', wanted('a/b'), { baseUrl: `${g.url}/elsewhere`, timeoutMs: 2000 }))).message, /HTTP 404/)
  const closed = await gitlab(t, {})
  await closed.close()
  t.match((await failure(gitlabProjectGroups('tok', wanted('a/b'), { baseUrl: closed.url, timeoutMs: 2000 }))).message, /could not be reached/)
})

/** An adversarial GitLab (group-api.ts's bounds): `handle` answers as it likes. */
async function adversary(t: Teardown, handle: Parameters<typeof createServer>[1]): Promise<string> {
  const server: Server = createServer(handle)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  )
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

t.test('a GitLab that never answers fails within the time limit; a redirect is never followed with the token', async (t) => {
  const silent = await adversary(t, () => undefined)
  const started = Date.now()
  t.match((await failure(gitlabProjectGroups('tok', wanted('a/b'), { baseUrl: silent, timeoutMs: 300 }))).message, /could not be reached/)
  t.ok(Date.now() - started < 2000, 'within the time limit')
  const g = await gitlab(t, { memberships: projects(1, 30) })
  const redirecting = await adversary(t, (req, res) => res.writeHead(302, { location: `${g.url}${req.url ?? '/'}` }).end())
  t.match((await failure(gitlabProjectGroups('tok', wanted('team/project-0'), { baseUrl: redirecting, timeoutMs: 2000 }))).message, /HTTP 302/)
  t.equal(g.requests.length, 0, 'the token never went where the redirect pointed')
})

t.test('verdicts', async (t) => {
  t.strictSame(parseGitlabProject('group/project'), { path: 'group/project', minAccessLevel: 20 }, "oauth2-proxy's default: Reporter")
  t.strictSame(parseGitlabProject('group/sub.group/my-project=40'), { path: 'group/sub.group/my-project', minAccessLevel: 40 })
  for (const wrong of ['project', 'group/project=25', 'group/project=', 'group/project=30=40', 'group project/x', '/x', 'group/project=reporter']) {
    t.type(parseGitlabProject(wrong), 'string', `${wrong} refused`)
  }
  t.equal(
    gitlabProjectsUrl('https://gitlab.example.com/gitlab/', 30, 2),
    'https://gitlab.example.com/gitlab/api/v4/projects?membership=true&min_access_level=30&archived=false&simple=true&order_by=id&sort=asc&per_page=100&page=2',
    'a self-managed GitLab under a relative URL root',
  )
  t.equal(nextPage(new Headers({ 'x-next-page': '' }), 3), undefined, 'the last page')
  t.equal(nextPage(new Headers(), 3), undefined, 'no header: the last page')
  t.equal(nextPage(new Headers({ 'x-next-page': '4' }), 3), 4)
  t.throws(() => nextPage(new Headers({ 'x-next-page': 'https://evil.example/?page=4' }), 3), 'only a page number')
})
