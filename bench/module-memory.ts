// What each part of the gateway's module graph costs in memory at start: each group of modules is
// imported in a fresh Node process, which then collects garbage and reports its resident set
// (RSS) and V8 heap in use; the figure of a group is its process's minus that of a process that
// imports nothing. Groups share dependencies (fastify's, undici), so their figures do not add up;
// the last groups are what the CLI's own imports load (`openid-gateway run` before it reads its
// configuration). Each group is measured RUNS times; the medians are printed as a markdown table.
//
//   npm run bench (or npx tsc -p tsconfig.bench.json) builds it; then
//   node build-bench/bench/module-memory.js     (MODULES_RUNS=n processes per group, default 5)

import { execFileSync } from 'node:child_process'

const RUNS = Number(process.env.MODULES_RUNS ?? 5)
const SRC = new URL('../src/', import.meta.url).href

/** Module specifiers by group; `./` is the gateway's src (build-bench/src once compiled). */
const GROUPS: Array<[string, string[]]> = [
  ['node alone', []],
  ['fastify', ['fastify']],
  ['@fastify/http-proxy (reply-from, undici, ws)', ['fastify', '@fastify/http-proxy']],
  ['prom-client', ['prom-client']],
  ['@opentelemetry/api', ['@opentelemetry/api']],
  ['@opentelemetry/core', ['@opentelemetry/core']],
  ['@grpc/grpc-js', ['@grpc/grpc-js']],
  ['@grpc/proto-loader + protobufjs', ['@grpc/proto-loader', 'protobufjs']],
  ['ext-authz gRPC service (grpc-js, proto-loader, protobufjs)', ['./checks/envoy-grpc/server.js']],
  ['openid-client + jose', ['openid-client', 'jose']],
  ['yaml', ['yaml']],
  ['ajv', ['ajv']],
  ['pino', ['pino']],
  ['ioredis (loaded only with a Redis store)', ['ioredis']],
  [
    'OpenTelemetry SDK + OTLP exporter (loaded only with telemetry.tracing)',
    ['@opentelemetry/sdk-trace-base', '@opentelemetry/exporter-trace-otlp-http', '@opentelemetry/resources', '@opentelemetry/context-async-hooks'],
  ],
  ['the app (app/app.js and what it imports)', ['./app/app.js']],
  // What `openid-gateway run` imports before it reads its configuration; gRPC
  // (runtime/envoy-grpc-listener.js) only when server.extAuthzGrpcPort is set.
  [
    "the CLI's static imports (cli.ts)",
    [
      './ops/hangups.js',
      'prom-client',
      './runtime/ipc.js',
      './runtime/reload.js',
      './runtime/primary.js',
      './runtime/worker-state.js',
      './config/load.js',
      './config/file-modes.js',
      './config/mask.js',
      './oidc/client-auth.js',
      './runtime/live.js',
      'pino',
      './ops/logging.js',
      './ops/management.js',
    ],
  ],
]

interface Sample {
  rss: number
  heapUsed: number
  loaded: string[]
}

function measure(specifiers: string[]): Sample {
  const urls = specifiers.map((s) => (s.startsWith('./') ? new URL(s, SRC).href : s))
  // An ESM script (it imports ESM-only packages); the packages named in it that the CommonJS
  // loader has seen are listed, to show what a group drags in.
  const script = `
    for (const u of ${JSON.stringify(urls)}) await import(u)
    await new Promise((r) => setTimeout(r, 50))
    gc(); gc()
    const { createRequire } = await import('node:module')
    const cache = createRequire(import.meta.url).cache
    const packages = [...new Set(Object.keys(cache).map((f) => /node_modules\\/((?:@[^/]+\\/)?[^/]+)/.exec(f)?.[1]).filter(Boolean))]
    const m = process.memoryUsage()
    process.stdout.write(JSON.stringify({ rss: m.rss, heapUsed: m.heapUsed, loaded: packages }))
  `
  const out = execFileSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], { cwd: new URL('..', import.meta.url) })
  return JSON.parse(out.toString()) as Sample
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] as number
}

const MiB = 1024 * 1024
const rows: Array<{ name: string; rss: number; heapUsed: number }> = []
for (const [name, specifiers] of GROUPS) {
  const samples = Array.from({ length: RUNS }, () => measure(specifiers))
  rows.push({ name, rss: median(samples.map((s) => s.rss)) / MiB, heapUsed: median(samples.map((s) => s.heapUsed)) / MiB })
}
const base = rows[0] as { rss: number; heapUsed: number }
process.stdout.write(
  `Node ${process.version}, medians of ${RUNS} processes each, after gc\n\n| modules | RSS MiB | + RSS MiB | heap used MiB | + heap MiB |\n|---|---:|---:|---:|---:|\n`,
)
for (const row of rows) {
  process.stdout.write(
    `| ${row.name} | ${row.rss.toFixed(1)} | ${(row.rss - base.rss).toFixed(1)} | ${row.heapUsed.toFixed(1)} | ${(row.heapUsed - base.heapUsed).toFixed(1)} |\n`,
  )
}
const cli = GROUPS[GROUPS.length - 1] as [string, string[]]
process.stdout.write(`\n${cli[0]} load these CommonJS packages: ${measure(cli[1]).loaded.join(', ')}\n`)
