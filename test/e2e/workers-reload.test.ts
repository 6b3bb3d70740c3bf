import t from 'tap'
import { readFileSync, writeFileSync } from 'node:fs'
import { parse, stringify } from 'yaml'
import { startAdversarialProvider } from '../fixtures/adversarial-provider.ts'
import { eventually } from '../fixtures/poll.ts'
import { startWorkers, signedIn, page } from '../fixtures/workers.ts'

// server.workers: a reload (SIGHUP to the primary) is all or nothing across the workers.

t.test('SIGHUP to the primary: it validates the file, then every worker reloads it; sessions stay; an invalid file reaches no worker', async (t) => {
  const gateway = await startWorkers(t)
  const cookie = await signedIn(gateway)
  const first = (await (await fetch(`${gateway.management}/config`)).json()) as { hash: string }
  const config = parse(readFileSync(gateway.path, 'utf8')) as { upstreams: Array<Record<string, unknown>> }
  const upstream = { ...config.upstreams[0], allow: { emails: ['bob@example.com'] } }
  writeFileSync(gateway.path, stringify({ ...config, upstreams: [upstream] }))
  gateway.signal('SIGHUP')
  const reloaded = (): number => gateway.lines().filter((l) => l.msg === 'configuration reloaded').length
  await eventually('both workers reload', () => reloaded() >= 2)
  t.equal(reloaded(), 2, 'both workers reloaded')
  const statuses = []
  for (let i = 0; i < 10; i++) statuses.push((await page(gateway, cookie, `/r${i}`)).status)
  t.same(statuses, Array(10).fill(403), 'on every worker: the session is kept, the new rules refuse alice')
  const second = (await (await fetch(`${gateway.management}/config`)).json()) as { hash: string }
  t.not(second.hash, first.hash, "the primary's /config has the new hash")
  const metrics = await (await fetch(`${gateway.management}/metrics`)).text()
  t.match(metrics, /openid_gateway_config_reloads_total\{outcome="success"\} 2/, 'summed over the workers')

  writeFileSync(gateway.path, stringify({ ...config, upstreams: [{ ...upstream, target: 'nowhere' }] }))
  gateway.signal('SIGHUP')
  await eventually('the primary names the problem', () => gateway.lines().some((l) => l.msg === 'configuration problem'))
  t.match(
    gateway
      .lines()
      .filter((l) => l.msg === 'configuration problem')
      .map((l) => l.problem),
    [/^upstreams\[0\]\.target: /],
    'the primary names the key',
  )
  // Each worker says it keeps the running configuration once the primary has told it (reload.abort).
  const kept = (): number => gateway.lines().filter((l) => l.msg === 'configuration reload refused: the running configuration is kept').length
  await eventually('both workers are told of the refusal', () => kept() >= 2)
  t.equal(reloaded(), 2, 'no worker reloaded')
  t.match(
    await (await fetch(`${gateway.management}/config`)).json(),
    { ...second, lastReload: { outcome: 'refused', reason: 'invalid file' } },
    'the running file, and the refusal',
  )
  t.equal((await gateway.stop()).code, 0)
})

t.test('a reload one worker cannot start is adopted by none: all stay on the running configuration, /config and the metric say so', async (t) => {
  const gateway = await startWorkers(t)
  const cookie = await signedIn(gateway)
  // A provider that answers its key set once: the first worker to prepare discovers it, the other cannot.
  const flaky = await startAdversarialProvider({ behaviour: { jwks: 1 } })
  t.teardown(() => flaky.close())
  const first = (await (await fetch(`${gateway.management}/config`)).json()) as { hash: string }
  const config = parse(readFileSync(gateway.path, 'utf8')) as { provider: Record<string, unknown>; upstreams: Array<Record<string, unknown>> }
  writeFileSync(
    gateway.path,
    stringify({
      ...config,
      provider: { ...config.provider, issuer: flaky.issuer, timeoutMs: 500 },
      upstreams: [{ ...config.upstreams[0], allow: { emails: ['bob@example.com'] } }],
    }),
  )
  gateway.signal('SIGHUP')
  const kept = (): number => gateway.lines().filter((l) => l.msg === 'configuration reload refused: the running configuration is kept').length
  await eventually('both workers are told of the refusal', () => kept() >= 2, 20_000)
  t.equal(kept(), 2, 'the workers were told')
  t.equal(flaky.jwksRequests >= 2, true, 'both workers tried the new provider')
  t.equal(gateway.lines().filter((l) => l.msg === 'configuration reloaded').length, 0, 'no worker serves the new configuration')
  const statuses = []
  for (let i = 0; i < 10; i++) statuses.push((await page(gateway, cookie, `/r${i}`)).status)
  t.same(statuses, Array(10).fill(200), 'every worker still runs the previous rules (the new ones would refuse alice)')
  const shown = (await (await fetch(`${gateway.management}/config`)).json()) as { hash: string; lastReload?: { outcome: string; reason: string } }
  t.equal(shown.hash, first.hash, '/config: the running file')
  t.match(shown.lastReload, { outcome: 'refused', reason: /a worker could not start/ })
  const metrics = await (await fetch(`${gateway.management}/metrics`)).text()
  t.match(metrics, /openid_gateway_config_reloads_total\{outcome="failure"\} 2/, 'counted by both workers')
  t.equal((await gateway.stop()).code, 0)
})
