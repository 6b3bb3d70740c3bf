import t from 'tap'
import { readFileSync, writeFileSync } from 'node:fs'
import { parse, stringify } from 'yaml'
import { configHash } from '#src/config/load'
import { eventually } from '../fixtures/poll.ts'
import { page, signedIn, startWorkers } from '../fixtures/workers.ts'

// server.workers: the primary validates the file and sends its text to the workers, which build
// that text, not the file as it is when they get to it (runtime/reload.ts). The file is changed
// in that window: the workers are stopped (SIGSTOP) before the primary is told to reload, the
// file is rewritten once the primary has logged that it validated it, and only then do the
// workers run on. A worker that read the file itself would build the second file, which the
// primary never validated, and the commit (by the first file's hash) would leave it on the
// configuration before both, while /config reported the first.

type Line = Record<string, unknown>

t.test('a file changed between the primary validating it and the workers applying it: every worker runs the text /config reports', async (t) => {
  const gateway = await startWorkers(t)
  const cookie = await signedIn(gateway)
  const workers = await eventually('both workers listening', () => {
    const pids = [
      ...new Set(
        gateway
          .lines()
          .filter((l) => l.msg === 'listening')
          .map((l) => l.pid as number),
      ),
    ]
    return pids.length === 2 ? pids : undefined
  })
  const config = parse(readFileSync(gateway.path, 'utf8')) as { upstreams: Array<Record<string, unknown>> }
  // Alice is signed in. Running: anyone may pass. Validated by the primary: only bob. Written
  // meanwhile: only alice. She is refused by the validated file's rules alone.
  const validated = stringify({ ...config, upstreams: [{ ...config.upstreams[0], allow: { emails: ['bob@example.com'] } }] })
  const meanwhile = stringify({ ...config, upstreams: [{ ...config.upstreams[0], allow: { emails: ['alice@example.com'] } }] })
  writeFileSync(gateway.path, validated)

  // A stopped worker reads nothing; the IPC messages wait in its pipe.
  let stopped = false
  const resume = (): void => {
    if (stopped) workers.forEach((pid) => process.kill(pid, 'SIGCONT'))
    stopped = false
  }
  // Never left stopped (the fixture's SIGKILL of the primary would leave them so).
  t.teardown(resume)
  workers.forEach((pid) => process.kill(pid, 'SIGSTOP'))
  stopped = true
  gateway.signal('SIGHUP')
  const valid = await eventually('the primary validates the file', () => gateway.lines().find((l) => l.msg === 'configuration valid: the workers prepare it'))
  t.equal(valid.config, configHash(validated), 'the primary validated the first file')
  writeFileSync(gateway.path, meanwhile)
  resume()

  await eventually('the primary says every worker reloaded', () => gateway.lines().some((l) => l.msg === 'configuration reloaded by every worker'))
  const shown = (await (await fetch(`${gateway.management}/config`)).json()) as { hash: string }
  t.equal(shown.hash, configHash(validated), '/config: the file the primary validated')
  const reloaded = (pid: number): Line | undefined => gateway.lines().find((l) => l.msg === 'configuration reloaded' && l.pid === pid)
  for (const pid of workers) {
    const line = await eventually(`worker ${pid} says it reloaded`, () => reloaded(pid), 5000).catch(() => undefined)
    t.equal(line?.config, shown.hash, `worker ${pid} runs the hash /config reports`)
  }
  const metrics = await (await fetch(`${gateway.management}/metrics`)).text()
  t.same(
    metrics.split('\n').filter((l) => l.startsWith('openid_gateway_config_info')),
    [`openid_gateway_config_info{hash="${shown.hash}"} 1`],
    'the workers report one running file, that one',
  )
  const statuses = []
  for (let i = 0; i < 10; i++) statuses.push((await page(gateway, cookie, `/r${i}`)).status)
  t.same(statuses, Array(10).fill(403), "on every worker, the validated file's rules: alice is refused")
  t.equal((await gateway.stop()).code, 0)
})
