import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { IMAGE } from '../fixtures/image.ts'
import { buildWithScript, npmEnvironment, run, withLock } from '../fixtures/image-base.ts'
import { recipe } from '../fixtures/markdown.ts'

// docker/build-image.sh, the documented command, as a user runs it: each command of the build
// recipe in docs/deploy/container.md (the plain one, with the machine's npm configuration, and
// the one for a proxy with its own CA, with the machine's certificate file in place of the
// page's) builds with no warning about build arguments, says which isolation it found the host
// needs (and why when it is not buildah's default), and when a build fails it says so and leaves
// no working container behind.

const PAGE = 'docs/deploy/container.md'
/** Where the page's CA recipe names the proxy's certificate. */
const PAGE_CA = '/path/to/proxy-ca.pem'

t.setTimeout(15 * 60_000)

/** buildah's working containers, by id. */
async function containers(): Promise<Map<string, string>> {
  const listed = JSON.parse(await run('buildah', ['containers', '--json'])) as Array<{ id: string; containername: string }> | null
  return new Map((listed ?? []).map((c) => [c.id, c.containername]))
}

const commands = recipe(PAGE, 'bash')
  .split('\n')
  .filter((line) => line.trim() !== '' && !line.startsWith('#'))

t.test("the page's build commands: no warning, the isolation named, the facts printed", async (t) => {
  t.equal(commands.length, 2, `${PAGE} shows two commands`, { commands })
  const machine = await npmEnvironment()
  for (const command of commands) {
    const m = /^((?:NPM_CONFIG_[A-Z]+=\S+ )*)docker\/build-image\.sh$/.exec(command)
    t.ok(m, `${command}: the script, with npm's settings at most`)
    const assigned = Object.fromEntries(
      (m?.[1] ?? '')
        .trim()
        .split(' ')
        .filter((a) => a !== '')
        .map((a) => [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)]),
    )
    if (assigned.NPM_CONFIG_CAFILE !== undefined) {
      t.equal(assigned.NPM_CONFIG_CAFILE, PAGE_CA, 'the CA recipe names the certificate file')
      assigned.NPM_CONFIG_CAFILE = machine.NPM_CONFIG_CAFILE ?? ''
    }
    // The machine's npm configuration, as the user's npm would give it, then the page's settings.
    const built = await withLock('build', () => buildWithScript(IMAGE, assigned))
    t.comment(`${command}: built in ${(built.ms / 1000).toFixed(1)} s on ${built.base.image} (from ${built.base.source}), isolation ${built.isolation}`)
    t.notMatch(built.log, /level=warning|missing ".*" build argument/, 'no warning (a build argument without a value, say)', { log: built.log.slice(-3000) })
    t.match(built.imageId, /^[0-9a-f]{64}$/, 'the image id (IMAGE_ID=)')
    t.match(built.base.image, /^localhost\/openid-gateway-base:[0-9a-f]{16}$/, 'the base it assembled (BASE_IMAGE=)')
    t.ok(['default', 'chroot'].includes(built.isolation), `the isolation found (ISOLATION=${built.isolation})`)
    if (built.isolation === 'chroot')
      t.match(built.log, /buildah's default isolation fails here \(.+\): using --isolation chroot/, 'and why the default was not used')
  }
})

t.test('a failing build says so and leaves no working container behind', async (t) => {
  // A registry that knows no package: `npm ci` in the first stage fails at once (404s are not retried).
  const registry = createServer((_req, res) => res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"Not found"}'))
  await new Promise<void>((resolve) => registry.listen(0, '127.0.0.1', resolve))
  t.teardown(() => registry.close())
  const url = `http://127.0.0.1:${(registry.address() as AddressInfo).port}/`

  await withLock('build', async () => {
    const before = await containers()
    const failed = await buildWithScript(IMAGE, { NPM_CONFIG_REGISTRY: url }).then(
      () => undefined,
      (error: Error) => error,
    )
    t.ok(failed, 'the build fails')
    t.match(failed?.message ?? '', /build-image: buildah bud failed/, 'saying so', { message: failed?.message.slice(-2000) })
    // E404 here; where buildah's default isolation gives the build a network of its own, npm cannot connect.
    t.match(failed?.message ?? '', /npm error (code E404|code ECONNREFUSED|404 Not Found)/, "with npm's error")
    const after = await containers()
    // Only this worktree's builds take the lock: a container another test file runs (ogw-*) may come and go.
    const left = [...after].filter(([id, name]) => !before.has(id) && !name.startsWith('ogw-'))
    t.strictSame(left, [], 'no working container is left')
  })
})
