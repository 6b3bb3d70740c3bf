import t from 'tap'
import { buildImage, describeBuild } from '../fixtures/image.ts'
import { execute, officialBase, runIn } from '../fixtures/image-base.ts'

// The base the image is built on here stands in for the official one the Dockerfile pins: the
// same Node at the same place, the npm that Node release bundles with its links, the `node` user,
// and the official image's PATH, NODE_VERSION and CMD. Also reports what the base and the image
// cost (first run: debootstrap; later runs: buildah's storage) and the image's size.

t.setTimeout(15 * 60_000)

t.test('the local base has what the official node:X.Y.Z-bookworm-slim has, where it has it', async (t) => {
  const built = await buildImage()
  const { base } = built
  t.comment(describeBuild(built))
  t.equal(base.nodeVersion, officialBase().nodeVersion, 'the Node version of the pinned tag')

  // Read from a container of the base itself, as the official image's user would see it.
  const name = `ogw-base-${process.pid}`
  const from = await execute('buildah', ['from', '--pull=never', '--name', name, base.image])
  t.equal(from.code, 0, from.stderr)
  t.teardown(() => execute('buildah', ['rm', name]))
  const inside = async (...args: string[]): Promise<string> => {
    const r = await runIn(name, args)
    t.equal(r.code, 0, `${args.join(' ')} runs`, { stderr: r.stderr })
    return r.stdout.trim()
  }
  t.equal(await inside('node', '--version'), `v${base.nodeVersion}`, 'node on PATH')
  t.equal(
    await inside('sh', '-c', 'for c in node npm npx nodejs; do command -v $c; done'),
    '/usr/local/bin/node\n/usr/local/bin/npm\n/usr/local/bin/npx\n/usr/local/bin/nodejs',
  )
  t.equal(await inside('readlink', '/usr/local/bin/npm'), '../lib/node_modules/npm/bin/npm-cli.js')
  t.equal(await inside('readlink', '/usr/local/bin/npx'), '../lib/node_modules/npm/bin/npx-cli.js')
  t.equal(await inside('npm', '--version'), base.npmVersion, 'the npm that Node release bundles')
  t.equal(await inside('getent', 'passwd', 'node'), 'node:x:1000:1000::/home/node:/bin/bash', 'the node user')
  t.equal(await inside('stat', '-c', '%u:%g %a', '/home/node'), '1000:1000 755', 'its home is its own in the base (the image takes it back)')
  t.equal(await inside('sh', '-c', '. /etc/os-release && echo $VERSION_CODENAME'), 'bookworm')
  const config = JSON.parse((await execute('buildah', ['inspect', '--type', 'image', base.image])).stdout) as {
    OCIv1: { config: { Env: string[]; Cmd: string[] } }
  }
  t.ok(config.OCIv1.config.Env.includes(`NODE_VERSION=${base.nodeVersion}`), 'NODE_VERSION')
  t.ok(config.OCIv1.config.Env.includes('PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'), 'PATH')
  t.strictSame(config.OCIv1.config.Cmd, ['node'], 'CMD ["node"]')
})
