// The group sources people use (docs/features/claim-sources.md, docs/providers/gitlab.md,
// docs/providers/google.md), admitting and refusing through `allow.groups` at the proxy,
// forward-auth and Envoy's ext_authz (HTTP and gRPC):
//
// - GitLab's groups: the real oidc-provider plays GitLab as an OpenID provider, `groups_direct` in
//   the ID token and `groups` from UserInfo ("GitLab as OpenID Connect identity provider",
//   https://docs.gitlab.com/integration/openid_connect_provider/#shared-information).
// - GitLab's projects: test/fixtures/gitlab-api.ts plays the projects API beside it.
// - Google Workspace groups: test/fixtures/google-directory.ts plays Google's token endpoint
//   (verifying the gateway's signed assertion) and the Directory API; the sign-in is
//   oidc-provider's, as Google's ID tokens carry no groups.

import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import YAML from 'yaml'
import { checkRequest, serveGatewayGrpc } from '../fixtures/ext-authz-grpc.ts'
import { startAdversarialStack } from '../fixtures/adversarial-provider.ts'
import { checkRequestFor, sendCheck } from '../fixtures/envoy.ts'
import { startGitlabApi } from '../fixtures/gitlab-api.ts'
import { startGoogleDirectory } from '../fixtures/google-directory.ts'
import { rawRequest } from '../fixtures/http.ts'
import { recipe } from '../fixtures/markdown.ts'
import { devAccountClaims } from '../fixtures/provider.ts'
import { gatewayCookies, startStack, type Stack } from '../fixtures/stack.ts'

const JSON_ACCEPT = { accept: 'application/json' }

interface Recipe {
  provider: { claimSources: Record<string, unknown> }
  upstreams: Array<Record<string, unknown>>
}

/** The configuration a provider page shows (its one yaml block): its claimSources and upstreams are run as written. */
function pageRecipe(file: string): Recipe {
  return YAML.parse(recipe(file, 'yaml')) as Recipe
}

// GitLab's shared information: groups_direct in the ID token, groups (with the groups inherited
// from ancestors) from UserInfo only.
function gitlabAccount(sub: string): { sub: string; [claim: string]: unknown } {
  // bob's provider says he has a project's group: only the projects API may say so.
  return {
    sub,
    email: `${sub}@example.com`,
    email_verified: true,
    groups: sub === 'alice' ? ['infra', 'infra/platform'] : ['marketing', 'project:infra/deploy'],
  }
}
const gitlabExtraClaims = { groups_direct: (sub: string) => (sub === 'alice' ? ['infra/platform'] : ['marketing']) }

/** The proxy's status for `path` with `cookie`, and the groups the upstream received. */
async function proxy(stack: Stack, path: string, cookie: string): Promise<{ status: number; groups: string | undefined }> {
  const before = stack.upstream.requests.length
  const res = await rawRequest(stack.gw, path, { headers: { cookie, ...JSON_ACCEPT } })
  const received = stack.upstream.requests.length > before ? stack.upstream.requests.at(-1)?.headers['x-forwarded-groups'] : undefined
  return { status: res.status, groups: typeof received === 'string' ? received : undefined }
}

/** Forward-auth's answer (nginx auth_request, Traefik, Caddy) for `path`. */
async function forwardAuth(stack: Stack, path: string, cookie: string): Promise<number> {
  const res = await rawRequest(stack.gw, '/api/v1/openid/auth', {
    headers: { cookie, ...JSON_ACCEPT, 'x-original-method': 'GET', 'x-original-url': `${stack.gw}${path}` },
  })
  return res.status
}

/** Envoy's HTTP ext_authz check for `path`. */
async function envoyHttp(stack: Stack, path: string, cookie: string): Promise<number> {
  const host = new URL(stack.gw).host
  return (await sendCheck(stack.gw, checkRequestFor({ method: 'GET', path, headers: { host, cookie, accept: 'application/json' } }))).status
}

t.test("GitLab's groups as the session's groups: groups from UserInfo, groups_direct from the ID token", async (t) => {
  const extraClaims = gitlabExtraClaims
  const upstreams = [
    { name: 'infra', match: { pathPrefix: '/infra' }, allow: { groups: ['infra'] } },
    { name: 'platform', match: { pathPrefix: '/platform' }, allow: { groups: ['infra/platform'] } },
    { name: 'app', match: { pathPrefix: '/' } },
  ]

  t.test('claimSources.userInfo: groups, with the inherited ones', async (t) => {
    const stack = await startStack(t, {
      provider: { conformIdTokenClaims: true, accountClaims: gitlabAccount, extraClaims },
      config: { provider: { claimSources: { userInfo: true } } },
      upstreams,
    })
    const alice = await gatewayCookies(stack, 'alice')
    const bob = await gatewayCookies(stack, 'bob')
    t.strictSame(await proxy(stack, '/infra/x', alice), { status: 200, groups: 'infra,infra/platform' }, 'the proxy admits alice on a group from UserInfo')
    t.equal((await proxy(stack, '/infra/x', bob)).status, 403, 'and refuses bob')
    t.equal(await forwardAuth(stack, '/infra/x', alice), 200)
    t.equal(await forwardAuth(stack, '/infra/x', bob), 403)
    t.equal(await envoyHttp(stack, '/infra/x', alice), 200)
    t.equal(await envoyHttp(stack, '/infra/x', bob), 403)
  })

  t.test('groupsClaim: groups_direct, from the ID token alone', async (t) => {
    const stack = await startStack(t, {
      provider: { accountClaims: gitlabAccount, extraClaims },
      config: { provider: { groupsClaim: 'groups_direct' } },
      upstreams,
    })
    const alice = await gatewayCookies(stack, 'alice')
    t.strictSame(await proxy(stack, '/platform/x', alice), { status: 200, groups: 'infra/platform' })
    t.equal((await proxy(stack, '/infra/x', alice)).status, 403, 'a group alice is in through an ancestor only is not in groups_direct')
    t.equal(await forwardAuth(stack, '/infra/x', alice), 403)
    t.equal(await envoyHttp(stack, '/platform/x', alice), 200)
  })
})

t.test('GitLab projects (docs/providers/gitlab.md as written): project:<path> for the members with the level asked, read again at each refresh', async (t) => {
  const gitlab = await startGitlabApi({ memberships: [{ path: 'infra/deploy', level: 30 }] })
  t.teardown(() => gitlab.close())
  const page = pageRecipe('docs/providers/gitlab.md')
  const stack = await startStack(t, {
    provider: { conformIdTokenClaims: true, accountClaims: gitlabAccount, extraClaims: gitlabExtraClaims },
    // The page's claimSources, with the fixture's URL as a self-managed GitLab's.
    config: { provider: { claimSources: { ...page.provider.claimSources, gitlabUrl: gitlab.url } } },
    upstreams: [...page.upstreams, { name: 'app', match: { pathPrefix: '/' } }],
  })
  // The fixture answers for the token it is shown: each user signs in while it plays that user.
  const aliceBrowser = await stack.signedIn('alice')
  const alice = gatewayCookiesOf(stack, aliceBrowser)
  gitlab.set({ memberships: [{ path: 'infra/deploy', level: 20 }] })
  const bob = await gatewayCookies(stack, 'bob')

  const admitted = await proxy(stack, '/deploy/x', alice)
  t.equal(admitted.status, 200, 'alice, a Developer: admitted by the proxy')
  t.equal(admitted.groups, 'infra,infra/platform,project:infra/deploy', "her GitLab groups, and the project's group")
  t.equal((await proxy(stack, '/infra/x', alice)).status, 200, "the page's group rule beside it")
  const refused = await proxy(stack, '/deploy/x', bob)
  t.equal(refused.status, 403, 'bob, a Reporter: refused')
  t.equal((await proxy(stack, '/x', bob)).groups, 'marketing', "a project's group the provider's claim names is not taken")
  t.equal(await forwardAuth(stack, '/deploy/x', alice), 200)
  t.equal(await forwardAuth(stack, '/deploy/x', bob), 403)
  t.equal(await envoyHttp(stack, '/deploy/x', alice), 200)
  t.equal(await envoyHttp(stack, '/deploy/x', bob), 403)
  t.ok(
    gitlab.requests.every((r) => r.authorization?.startsWith('Bearer ') === true && ['20', '30'].includes(r.query.get('min_access_level') ?? '')),
    "the session's access token, the levels the page asks",
  )

  // alice leaves the project: her next refresh drops the group, never keeps it stale.
  gitlab.set({ memberships: [] })
  const refreshed = await aliceBrowser.fetch(`${stack.gw}/api/v1/openid/refresh`, { headers: JSON_ACCEPT })
  t.equal(refreshed.status, 200)
  await refreshed.body?.cancel()
  t.equal((await proxy(stack, '/deploy/x', gatewayCookiesOf(stack, aliceBrowser))).status, 403, 'refused after the refresh')

  // A token GitLab refuses (no read_api): no session, rather than one without its projects.
  gitlab.set({ memberships: [{ path: 'infra/deploy', level: 50 }], token: () => 'insufficient_scope' })
  const browser = stack.browser()
  t.equal((await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'carol')).status, 502, 'the sign-in fails (502)')
  const anonymous = await browser.fetch(`${stack.gw}/deploy/x`, { headers: JSON_ACCEPT })
  t.equal(anonymous.status, 401, 'not signed in')
  await anonymous.body?.cancel()
})

t.test('a refresh that brings no ID token reads the projects again too: a project left is a group lost', async (t) => {
  const gitlab = await startGitlabApi({ memberships: [{ path: 'infra/deploy', level: 40 }] })
  t.teardown(() => gitlab.close())
  // This provider's refresh answers no ID token: the session's claims are the base, its projects read anew.
  const { stack } = await startAdversarialStack(t, {
    config: { provider: { claimSources: { gitlabProjects: ['infra/deploy=40'], gitlabUrl: gitlab.url } } },
    upstreams: [
      { name: 'deploy', match: { pathPrefix: '/deploy' }, allow: { groups: ['project:infra/deploy'] } },
      { name: 'app', match: { pathPrefix: '/' } },
    ],
  })
  const browser = stack.browser()
  t.equal((await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'unused')).status, 200)
  t.equal((await proxy(stack, '/deploy/x', gatewayCookiesOf(stack, browser))).status, 200, 'a Maintainer: admitted')
  gitlab.set({ memberships: [] })
  const refreshed = await browser.fetch(`${stack.gw}/api/v1/openid/refresh`, { headers: JSON_ACCEPT })
  t.equal(refreshed.status, 200, 'refreshed')
  await refreshed.body?.cancel()
  t.equal((await proxy(stack, '/deploy/x', gatewayCookiesOf(stack, browser))).status, 403, 'refused after the refresh')
  t.equal(gitlab.requests.length, 2, 'one listing at sign-in, one at the refresh')
})

t.test('Google Workspace groups (docs/providers/google.md as written): read through the service account, admitting and refusing at every exit', async (t) => {
  const google = await startGoogleDirectory({
    users: { 'alice@example.com': ['admins@example.com', 'staff@example.com'], 'bob@example.com': ['staff@example.com'] },
  })
  t.teardown(() => google.close())
  const keyFile = join(mkdtempSync(join(tmpdir(), 'ogw-google-')), 'service-account.json')
  writeFileSync(keyFile, google.serviceAccountJson, { mode: 0o600 })
  const page = pageRecipe('docs/providers/google.md')
  const googleGroups = { ...(page.provider.claimSources.googleGroups as Record<string, unknown>) }
  t.equal(googleGroups.adminEmail, 'admin@example.com', 'the administrator the fixture has delegated to')
  const stack = await startStack(t, {
    // eve's email is not verified: her groups are not looked up by it.
    provider: { accountClaims: (sub: string) => ({ ...devAccountClaims(sub), email_verified: sub !== 'eve' }) },
    config: {
      provider: {
        // The page's googleGroups, with the key file written here and the fixture's URLs for Google's.
        claimSources: { googleGroups: { ...googleGroups, serviceAccountKeyFile: keyFile, tokenUrl: google.tokenUrl, directoryUrl: google.directoryUrl } },
      },
    },
    upstreams: [...page.upstreams, { name: 'app', match: { pathPrefix: '/' } }],
  })
  const alice = await gatewayCookies(stack, 'alice')
  const bobBrowser = await stack.signedIn('bob')
  const bob = gatewayCookiesOf(stack, bobBrowser)
  t.strictSame(
    await proxy(stack, '/admin/x', alice),
    { status: 200, groups: 'admins@example.com,staff@example.com' },
    "the Directory's groups are the session's",
  )
  t.equal((await proxy(stack, '/admin/x', bob)).status, 403)
  t.equal(await forwardAuth(stack, '/admin/x', alice), 200)
  t.equal(await forwardAuth(stack, '/admin/x', bob), 403)
  const grpc = await serveGatewayGrpc(t, stack)
  const host = new URL(stack.gw).host
  const check = async (cookie: string) =>
    (
      await grpc.check(
        checkRequest({ method: 'GET', host, path: '/admin/x', scheme: 'http', headers: { ':authority': host, cookie, accept: 'application/json' } }),
      )
    ).status?.code
  t.equal(await check(alice), 0, 'Envoy gRPC: OK')
  t.equal(await check(bob), 7, 'Envoy gRPC: PERMISSION_DENIED')
  t.equal(google.requests.filter((r) => r.kind === 'token').length, 1, 'one service token for both sign-ins')
  t.strictSame(
    google.requests.filter((r) => r.kind === 'groups').map((r) => r.query?.get('userKey')),
    ['alice@example.com', 'bob@example.com'],
    "each user's groups by their email",
  )

  // bob joins admins: his refresh reads the Directory again.
  google.set({ users: { 'alice@example.com': [], 'bob@example.com': ['admins@example.com'] } })
  const refreshed = await bobBrowser.fetch(`${stack.gw}/api/v1/openid/refresh`, { headers: JSON_ACCEPT })
  t.equal(refreshed.status, 200)
  await refreshed.body?.cancel()
  t.equal((await proxy(stack, '/admin/x', gatewayCookiesOf(stack, bobBrowser))).status, 200, 'admitted after the refresh')

  const eve = stack.browser()
  t.equal((await eve.signIn(`${stack.gw}/api/v1/openid/redirect`, 'eve')).status, 502, 'no verified email: no lookup, no session')
  t.notOk(
    google.requests.some((r) => r.query?.get('userKey') === 'eve@example.com'),
    'the Directory was not asked about an unverified address',
  )

  // The Directory refusing (the administrator lost the privilege): no session on unread groups.
  google.set({ forbidden: true })
  const browser = stack.browser()
  t.equal((await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'alice')).status, 502, 'the sign-in fails (502)')
  const anonymous = await browser.fetch(`${stack.gw}/admin/x`, { headers: JSON_ACCEPT })
  t.equal(anonymous.status, 401, 'not signed in')
  await anonymous.body?.cancel()
})

/** The gateway's cookies of `browser`, as gatewayCookies (test/fixtures/stack.ts) gives them. */
function gatewayCookiesOf(stack: Stack, browser: Awaited<ReturnType<Stack['signedIn']>>): string {
  return browser
    .cookieHeader(`${stack.gw}/page`)
    .split('; ')
    .filter((pair) => pair.startsWith('ogw'))
    .join('; ')
}
