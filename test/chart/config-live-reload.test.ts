import { createHash } from 'node:crypto'
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { ConfigMap } from 'kubernetes-models/v1/ConfigMap'
import t from 'tap'
import YAML from 'yaml'
import { render } from '../fixtures/chart.ts'
import { cli, until, valid } from '../fixtures/cli.ts'
import { rawRequest } from '../fixtures/http.ts'
import { freePorts } from '../fixtures/stack.ts'
import { startEchoUpstream } from '../fixtures/upstream.ts'

// The chart's choice for configuration changes (configReload: live): the ConfigMap is mounted as
// a directory and the gateway's server.watchConfig reloads the file when the kubelet replaces it.
// The kubelet's atomic writer (kubernetes pkg/volume/util/atomic_writer.go) keeps each version in
// a hidden timestamped directory, points the symlink `..data` at it, and exposes every key as a
// symlink `<key> -> ..data/<key>`; an update writes a new directory, creates `..data_tmp` pointing
// at it and renames it over `..data` (one atomic rename), then removes the old directory. This
// test lays out the chart's rendered gateway.yaml that way, runs the built gateway (build/) on it,
// swaps `..data` to the rendered next version, and sees /config's hash become the new file's and
// the new rule apply, without a restart.

type Config = { server: Record<string, unknown>; upstreams: { auth: string }[]; [key: string]: unknown }

/** The chart's gateway.yaml for the Envoy Gateway quickstart with the upstream's auth set. */
function chartConfig(auth: string): Config {
  const r = render(['quickstart-envoy-gateway.yaml'], { config: { upstreams: [{ name: 'app', target: 'http://backend.auth.svc.cluster.local:3000', auth }] } })
  return YAML.parse(r.of<ConfigMap>('ConfigMap')[0]?.data?.['gateway.yaml'] ?? '') as Config
}

/** Where the chart's file runs here: this machine's loopback, ports and provider, the echo upstream. */
function local(config: Config, port: number, managementPort: number, upstream: string): string {
  const base = valid(port, upstream, managementPort)
  return YAML.stringify({
    ...config,
    server: { ...config.server, ...base.server },
    provider: { ...base.provider, timeoutMs: 200 },
    cookies: base.cookies,
    upstreams: config.upstreams.map((u) => ({ ...u, match: { pathPrefix: '/' }, target: upstream })),
    session: { store: 'memory' },
    log: { level: 'warn' },
  })
}

const sha256 = (text: string) => `sha256:${createHash('sha256').update(text).digest('hex')}`

t.test("the kubelet swaps ..data: the gateway reloads the chart's new configuration by itself", async (t) => {
  // A tightening (none -> required) is loaded after two looks; a loosening would wait 30 s.
  const first = chartConfig('none')
  const second = chartConfig('required')
  // Without it the gateway would never see the swap, and the wait below would run to tap's timeout.
  if (!t.equal(first.server.watchConfig, true, 'the chart turns server.watchConfig on')) return

  const upstream = await startEchoUpstream()
  t.teardown(() => upstream.close())
  const [port, managementPort] = (await freePorts(2)) as [number, number]
  const texts = [local(first, port, managementPort, upstream.url), local(second, port, managementPort, upstream.url)]

  // The atomic writer's layout of the volume.
  const volume = mkdtempSync(join(tmpdir(), 'configmap-volume-'))
  t.teardown(() => rmSync(volume, { recursive: true, force: true }))
  const version = (n: number) => {
    const dir = `..2026_11_27_00_00_0${n}.${process.pid}`
    mkdirSync(join(volume, dir))
    writeFileSync(join(volume, dir, 'gateway.yaml'), texts[n] ?? '')
    return dir
  }
  symlinkSync(version(0), join(volume, '..data'))
  symlinkSync('..data/gateway.yaml', join(volume, 'gateway.yaml'))

  const proc = cli(['--config', join(volume, 'gateway.yaml')], { CLI_SECRET: 'client-secret', CLI_COOKIE: 'cookie-secret-of-at-least-32-bytes-0123456789' })
  t.teardown(() => proc.kill('SIGKILL'))
  const management = `http://127.0.0.1:${managementPort}`
  const origin = `http://127.0.0.1:${port}`
  const hash = async () => ((await rawRequest(management, '/config')).json() as { hash: string }).hash
  t.ok(await until(proc, async () => (await hash()) === sha256(texts[0] ?? '')), "/config shows the first file's hash")
  t.equal((await rawRequest(origin, '/x', { headers: { accept: 'application/json' } })).status, 200, 'auth: none')

  // The update: a new version directory, ..data_tmp pointing at it, renamed over ..data.
  symlinkSync(version(1), join(volume, '..data_tmp'))
  renameSync(join(volume, '..data_tmp'), join(volume, '..data'))
  rmSync(join(volume, `..2026_11_27_00_00_00.${process.pid}`), { recursive: true, force: true })
  t.equal(readFileSync(join(volume, 'gateway.yaml'), 'utf8'), texts[1], 'the key now reads the new version')

  t.ok(await until(proc, async () => (await hash()) === sha256(texts[1] ?? '')), "/config shows the new file's hash, without a signal or a restart")
  t.equal((await rawRequest(origin, '/x', { headers: { accept: 'application/json' } })).status, 401, 'and its rule applies: auth: required')
  proc.kill('SIGTERM')
  t.equal((await proc.done).code, 0, 'the same process throughout, exiting cleanly')
})
