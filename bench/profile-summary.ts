// Where a server's CPU went, from the V8 CPU profiles BENCH_PROFILE=1 writes: self time by owner
// (a package under node_modules, a gateway module under src/, Node's own `node:` modules, the
// garbage collector, native code V8 names `(program)`), and the functions that cost most. With
// the number of requests the server answered, the figures are microseconds per request, which is
// what the bench's CPU column measures; without, percentages of busy (non-idle) time.
//
//   node build-bench/bench/profile-summary.js bench/profiles/<server>.cpuprofile [requests]
//   node build-bench/bench/profile-summary.js A.cpuprofile requestsA B.cpuprofile requestsB
//
// The second form compares two servers per request: what B spends beyond A, by owner and by
// function (e.g. the gateway beyond the bare proxy).

import { readFileSync } from 'node:fs'

interface CallFrame {
  functionName: string
  url: string
  lineNumber: number
}
interface ProfileNode {
  id: number
  callFrame: CallFrame
}
interface CpuProfile {
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

/** Who owns a frame: the package, the gateway's module, Node's internals, or V8's pseudo-frames. */
export function ownerOf(frame: CallFrame): string {
  const { url, functionName } = frame
  if (url === '') return functionName.startsWith('(') ? functionName : '(native)'
  if (url.startsWith('node:')) return 'node:' + (url.slice(5).split('/')[1] ?? url.slice(5))
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)
  if (pkg !== null) return pkg[1] as string
  const own = /\/(src\/.+?)\.js$/.exec(url)
  if (own !== null) return own[1] as string
  return url
}

/** Packages that are Fastify itself, its router and its plugins' machinery. */
const FRAMEWORK =
  /^(fastify|find-my-way|avvio|fastq|light-my-request|fast-json-stringify|@fastify\/(cookie|error|proxy-addr|forwarded|rate-limit)|toad-cache|fast-querystring|fast-decode-uri-component|safe-regex2|fastify-plugin)$/
/** The proxy's client side: @fastify/http-proxy, @fastify/reply-from and undici (its WebAssembly HTTP parser too). */
const PROXY = /^(@fastify\/http-proxy|@fastify\/reply-from|undici|wasm:.*)$/

/**
 * The layer an owner belongs to, for the split of a request's cost: the gateway's own modules,
 * the framework, the proxy client, logging (pino, sonic-boom), Node's JavaScript (HTTP, streams,
 * timers...), native code (the socket system calls, V8's builtins), the garbage collector, and
 * other packages.
 */
export function layerOf(owner: string): string {
  if (/\/(build|src)\/[^/]+\/.+\.js$/.test(owner) || owner.startsWith('src/')) return 'gateway modules'
  if (FRAMEWORK.test(owner)) return 'Fastify'
  if (PROXY.test(owner)) return 'proxy client (reply-from, undici)'
  if (/^(pino|sonic-boom|@pinojs\/.*|quick-format-unescaped|fast-safe-stringify|safe-stable-stringify)$/.test(owner)) return 'logging (pino)'
  if (owner.startsWith('node:')) return "Node's JavaScript (http, net, streams, timers)"
  if (owner === '(native)' || owner === '(program)') return 'native (system calls, V8 builtins)'
  if (owner === '(garbage collector)') return 'garbage collector'
  return 'other packages'
}

function byLayer(byOwner: Map<string, number>): Map<string, number> {
  const layers = new Map<string, number>()
  for (const [owner, micros] of byOwner) layers.set(layerOf(owner), (layers.get(layerOf(owner)) ?? 0) + micros)
  return layers
}

export function summarize(profile: CpuProfile): { busyMicros: number; byOwner: Map<string, number>; byFunction: Map<string, number> } {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]))
  const byOwner = new Map<string, number>()
  const byFunction = new Map<string, number>()
  let busyMicros = 0
  for (const [i, id] of profile.samples.entries()) {
    const frame = nodes.get(id)?.callFrame
    const micros = profile.timeDeltas[i] ?? 0
    if (frame === undefined || frame.functionName === '(idle)') continue
    busyMicros += micros
    const owner = ownerOf(frame)
    byOwner.set(owner, (byOwner.get(owner) ?? 0) + micros)
    const fn = `${frame.functionName || '(anonymous)'} ${owner}:${frame.lineNumber + 1}`
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + micros)
  }
  return { busyMicros, byOwner, byFunction }
}

function compare(a: string, requestsA: number, b: string, requestsB: number): void {
  const [sa, sb] = [a, b].map((file) => summarize(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile)) as [
    ReturnType<typeof summarize>,
    ReturnType<typeof summarize>,
  ]
  const diff = (ma: Map<string, number>, mb: Map<string, number>): string[] =>
    [...new Set([...ma.keys(), ...mb.keys()])]
      .map((k) => [k, (mb.get(k) ?? 0) / requestsB - (ma.get(k) ?? 0) / requestsA] as const)
      .sort((x, y) => Math.abs(y[1]) - Math.abs(x[1]))
      .slice(0, 40)
      .map(([k, v]) => `  ${v >= 0 ? '+' : ''}${v.toFixed(2).padStart(7)} µs/req  ${k}`)
  process.stdout.write(
    `busy: ${(sa.busyMicros / requestsA).toFixed(2)} → ${(sb.busyMicros / requestsB).toFixed(2)} µs/req\nby layer:\n${diff(byLayer(sa.byOwner), byLayer(sb.byOwner)).join('\n')}\nby owner:\n${diff(sa.byOwner, sb.byOwner).join('\n')}\nby function:\n${diff(sa.byFunction, sb.byFunction).join('\n')}\n`,
  )
}

function main(): void {
  const args = process.argv.slice(2)
  if (args.length === 4) return compare(args[0] as string, Number(args[1]), args[2] as string, Number(args[3]))
  const [file, requestsArg] = args
  if (file === undefined) throw new Error('usage: profile-summary <file.cpuprofile> [requests]')
  const { busyMicros, byOwner, byFunction } = summarize(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile)
  const requests = Number(requestsArg ?? 0)
  const show = (micros: number): string => (requests > 0 ? `${(micros / requests).toFixed(2)} µs/req` : `${((100 * micros) / busyMicros).toFixed(1)}%`)
  const top = (map: Map<string, number>, n: number): string[] =>
    [...map]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([k, v]) => `  ${show(v).padStart(14)}  ${k}`)
  process.stdout.write(
    `busy ${show(busyMicros)}\nby layer:\n${top(byLayer(byOwner), 10).join('\n')}\nby owner:\n${top(byOwner, 30).join('\n')}\nby function:\n${top(byFunction, 40).join('\n')}\n`,
  )
}

if (process.argv[1]?.endsWith('profile-summary.js')) main()
