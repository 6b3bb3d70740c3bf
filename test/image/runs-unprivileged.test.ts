import t from 'tap'
import { processEnvironment, processIds, startImageStack } from '../fixtures/image.ts'

// The running image is not root: the gateway process's ids, read from /proc, are 1000, and the
// user the image runs as (its USER, read from the image) can write nothing outside /tmp: no file
// or folder it may write to, none it owns (an owner may chmod it writable). /proc, /sys and /dev
// are the kernel's, mounted by the engine, and are not walked.

t.setTimeout(15 * 60_000)

// Walks the root filesystem as the image's user, without following links; prints what it found.
const WALK = `
const fs = require('node:fs'), path = require('node:path')
const skip = new Set(['/proc', '/sys', '/dev', '/tmp'])
const found = []
let walked = 0
const walk = (p) => {
  let st
  try { st = fs.lstatSync(p) } catch { return }
  walked++
  if (st.isSymbolicLink()) return
  if (st.uid === process.getuid()) found.push(p + ' is owned by the user')
  else { try { fs.accessSync(p, fs.constants.W_OK); found.push(p + ' is writable') } catch {} }
  if (!st.isDirectory()) return
  let entries = []
  try { entries = fs.readdirSync(p) } catch { return }
  for (const e of entries) { const c = path.join(p, e); if (!skip.has(c)) walk(c) }
}
walk('/')
console.log(JSON.stringify({ uid: process.getuid(), walked, found }))
`

t.test('the gateway runs as uid 1000 and can write nothing outside /tmp', async (t) => {
  const stack = await startImageStack(t)
  const { uids, gids } = processIds(await stack.container.gatewayPid())
  t.strictSame(uids, [1000, 1000, 1000, 1000], 'real, effective, saved and filesystem uid of the running gateway')
  t.strictSame(gids, [1000, 1000, 1000, 1000], 'and its gids')
  // docs/performance.md, "Memory": V8's young generation capped as on Node 20.
  t.equal(processEnvironment(await stack.container.gatewayPid()).NODE_OPTIONS, '--max-semi-space-size=16', "the gateway runs with the image's NODE_OPTIONS")

  const walker = await stack.container.exec(['node', '-e', WALK], { user: stack.built.config.User })
  t.equal(walker.code, 0, 'the walk ran', { stderr: walker.stderr })
  const { uid, walked, found } = JSON.parse(walker.stdout) as { uid: number; walked: number; found: string[] }
  t.equal(uid, 1000, `as the image's USER (${stack.built.config.User})`)
  t.ok(walked > 2000, `the whole filesystem was walked (${walked} entries)`)
  t.strictSame(found, [], 'nothing outside /tmp is writable or owned by it')

  // The image has no shell and no cat: node reads and writes.
  const config = await stack.container.exec(
    ['node', '-e', "process.stdout.write(require('node:fs').readFileSync('config/gateway.yaml', 'utf8').slice(0, 0) + 'read')"],
    {
      user: stack.built.config.User,
    },
  )
  t.equal(config.stdout, 'read', 'it reads its configuration', { stderr: config.stderr })
  const tmp = await stack.container.exec(
    ['node', '-e', "const fs = require('node:fs'); fs.writeFileSync('/tmp/probe', 'x'); process.stdout.write(fs.readFileSync('/tmp/probe', 'utf8'))"],
    { user: stack.built.config.User },
  )
  t.equal(tmp.stdout, 'x', 'and may write in /tmp', { stderr: tmp.stderr })
})
