// The configurations a reader copies first (README.md's "Protect an application", and
// docs/getting-started.md's file for the development provider) pass the gateway's own
// validation, and protect what their prose says: the application for any signed-in user,
// `/public/**` for everyone, `/admin` and below for the group `admins` only, by a rule of the
// one upstream. Decided by the gateway's own router and access decision (access/match.ts,
// access/decision.ts), with the users the prose names: `alice` (admins, staff), `bob` (staff).

import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { FastifyBaseLogger } from 'fastify'
import { pino } from 'pino'
import t from 'tap'
import { parseConfig } from '#src/config/load'
import type { Identity } from '#src/contract/identity'
import type { Authentication } from '#src/access/authenticate'
import { AccessDecisions, type AccessDecision } from '#src/access/decision'
import { createUpstreamMatcher } from '#src/access/match'
import { COOKIE_SECRET } from '../fixtures/config/base.ts'
import { ROOT } from '../fixtures/markdown.ts'
import { DEFAULT_CLAIM_MAPPING } from '#src/contract/claim-path'

const ENV = { OIDC_CLIENT_SECRET: 'dummy-client-secret', COOKIE_SECRET }

/** The first ```yaml block after a heading of a page, its list indentation removed. */
function yamlAfter(page: string, heading: string): string {
  const text = readFileSync(join(ROOT, page), 'utf8')
  const start = text.indexOf(`\n${heading}\n`)
  if (start === -1) throw new Error(`${page} has no heading ${heading}`)
  const block = /\n( *)```yaml\n([\s\S]*?)\n\1```/.exec(text.slice(start))
  if (block === null) throw new Error(`${page}: no yaml block after ${heading}`)
  const indent = block[1] ?? ''
  return (block[2] ?? '')
    .split('\n')
    .map((line) => (line.startsWith(indent) ? line.slice(indent.length) : line))
    .join('\n')
}

const EXAMPLES = [
  { page: 'README.md', heading: '## Protect an application' },
  { page: 'docs/getting-started.md', heading: '## Your own configuration against the development provider' },
]

const USERS: Readonly<Record<string, string[]>> = { alice: ['admins', 'staff'], bob: ['staff'] }
const log: FastifyBaseLogger = pino({ level: 'silent' })

/** Signs in the user the request's `user` cookie names (none: not signed in). */
const authentication: Pick<Authentication, 'forProviders'> = {
  forProviders: () => ({
    async authenticate(req) {
      const sub = req.cookies.user
      if (sub === undefined) return undefined
      const identity: Identity = { claims: { sub, groups: USERS[sub] }, accessToken: 'access-token', provider: 'default', issuer: 'https://login.example.com', mapping: DEFAULT_CLAIM_MAPPING }
      return identity
    },
  }),
}

for (const { page, heading } of EXAMPLES) {
  t.test(`${page}, "${heading.replace(/^#+ /, '')}"`, async (t) => {
    const config = parseConfig(yamlAfter(page, heading), ENV, page)
    const route = createUpstreamMatcher(config.upstreams)
    const access = new AccessDecisions(config.upstreams, authentication)
    /** What the gateway decides for `user` (undefined: not signed in) on `path`. */
    async function decide(path: string, user?: string): Promise<AccessDecision> {
      const upstream = route('app.example.com', path)
      if (upstream === undefined) throw new Error(`${path} reaches no upstream`)
      const cookies = user === undefined ? {} : { user }
      return access.of(upstream).decide({ url: path, cookies, headers: {}, log }, { setCookie: () => undefined }, { path, preflight: false })
    }
    const outcome = async (path: string, user?: string) => (await decide(path, user)).outcome

    t.equal(route('app.example.com', '/admin/users'), route('app.example.com', '/page'), 'one application: /admin is a rule of its upstream')
    t.equal(await outcome('/page'), 'unauthenticated', 'the application needs a sign-in')
    t.equal(await outcome('/page', 'bob'), 'pass', 'any signed-in user')
    t.equal(await outcome('/public/about'), 'pass', '/public/** needs no sign-in')
    for (const path of ['/admin', '/admin/users']) {
      const refused = await decide(path, 'bob')
      t.equal(refused.outcome, 'forbidden', `${path}: bob is not an admin`)
      t.equal(refused.outcome === 'forbidden' ? refused.rulePath : undefined, '/admin', `${path} is decided by the rule on /admin`)
      t.equal(await outcome(path, 'alice'), 'pass', `${path}: alice is an admin`)
      t.equal(await outcome(path), 'unauthenticated', `${path} needs a sign-in`)
    }
    t.equal(await outcome('/administration', 'bob'), 'pass', 'the rule is a prefix on segment boundaries')
  })
}

// docs/features/mcp.md's "Protect an MCP server": the file config/mcp.example.yaml holds, valid,
// and the audience its upstream asks of Bearer tokens is the resource URI the page names.
t.test('docs/features/mcp.md, "Protect an MCP server"', async (t) => {
  const page = yamlAfter('docs/features/mcp.md', '## Protect an MCP server')
  const file = readFileSync(join(ROOT, 'config/mcp.example.yaml'), 'utf8')
  t.same(parseConfig(page, ENV, 'docs/features/mcp.md'), parseConfig(file, ENV, 'config/mcp.example.yaml'), 'the page and the file are one configuration')
  const config = parseConfig(file, ENV, 'config/mcp.example.yaml')
  const audiences: Array<string | undefined> = []
  const recording: Pick<Authentication, 'forProviders'> = {
    forProviders: (_names, resource) => {
      audiences.push(resource?.(undefined))
      return { authenticate: async () => undefined }
    },
  }
  const access = new AccessDecisions(config.upstreams, recording, undefined, config.server.publicUrl)
  t.strictSame(audiences, ['https://mcp.example.com/mcp'], 'tokens must name https://mcp.example.com/mcp')
  const decision = await access.of(config.upstreams[0]!).decide({ url: '/mcp', cookies: {}, headers: {}, log }, { setCookie: () => undefined }, { path: '/mcp', preflight: false })
  t.equal(decision.outcome, 'unauthenticated')
})
