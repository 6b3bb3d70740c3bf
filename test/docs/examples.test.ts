// The configurations a reader copies first (README.md's "Protect an application", and
// docs/getting-started.md's file for the development provider) pass the gateway's own
// validation, and protect what their prose says: the application for any signed-in user,
// `/public/**` for everyone, `/admin` for the group `admins` only, all on one target.

import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { parseConfig } from '../../src/config/load.js'
import { COOKIE_SECRET } from '../fixtures/config/base.js'
import { ROOT } from '../fixtures/markdown.js'

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

for (const { page, heading } of EXAMPLES) {
  t.test(`${page}, "${heading.replace(/^#+ /, '')}"`, async (t) => {
    const config = parseConfig(yamlAfter(page, heading), ENV, page)
    // The upstream a path reaches: the longest matching prefix, as the gateway routes.
    const upstreamOf = (path: string) =>
      config.upstreams
        .filter(({ match }) => path === match.pathPrefix || path.startsWith(match.pathPrefix === '/' ? '/' : `${match.pathPrefix}/`))
        .toSorted((a, b) => b.match.pathPrefix.length - a.match.pathPrefix.length)[0]
    const app = upstreamOf('/page')
    const admin = upstreamOf('/admin/users')
    t.ok(app && admin, 'every path reaches an upstream')
    t.equal(app?.auth, 'required', 'the application needs a sign-in')
    t.strictSame(app?.allow, {}, 'any signed-in user')
    t.ok(app?.publicPaths.includes('/public/**'), '/public/** is public')
    t.strictSame(admin?.allow.groups, ['admins'], '/admin: admins only')
    t.equal(admin?.auth, 'required')
    t.strictSame(admin?.publicPaths, [], 'nothing public below /admin')
    t.equal(admin?.target, app?.target, 'one application behind both')
  })
}
