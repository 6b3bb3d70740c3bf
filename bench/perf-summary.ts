// Where a native server's CPU went (oauth2-proxy, a Go program), from the `perf record` data
// BENCH_PROFILE=1 writes for it (bench/profiles/<server>.perf.data): `perf script` gives every
// sample's period (nanoseconds of CPU, a software clock) and its stack, leaf first. Self time by
// layer (the kernel, Go's garbage collector and the rest of its runtime, net/http and the
// standard library's networking, crypto, text/template and fmt, oauth2-proxy's own packages,
// other modules), by Go package and by function; then inclusive time, each function counted once
// per sample, which shows the phases of a request (the session's load, the proxying, the request
// line). With the number of requests the server answered, microseconds per request, the unit of
// the bench's CPU column; without, percentages of the busy time. The same layers as
// profile-summary.ts gives a Node server, as far as two runtimes have the same layers.
//
//   node build-bench/bench/perf-summary.js bench/profiles/oauth2-proxy.perf.data [requests]

import { spawnSync } from 'node:child_process'
import { layerOf as v8Layer, ownerOf } from './profile-summary.js'

interface Sample {
  /** CPU time the sample stands for, nanoseconds. */
  period: number
  /** Function names, leaf first. */
  stack: string[]
  /** Whether the leaf is kernel code. */
  kernel: boolean
  /** The leaf's object: the binary, a library, `[kernel.kallsyms]`, a JIT map `/tmp/perf-<pid>.map`. */
  dso: string
}

/** Reads `perf script`'s output: a line with the period, then one line per frame, then a blank line. */
export function parseScript(text: string): Sample[] {
  const samples: Sample[] = []
  let current: Sample | undefined
  for (const line of text.split('\n')) {
    if (line.trim() === '') {
      if (current !== undefined) samples.push(current)
      current = undefined
    } else if (!line.startsWith('\t') && /^\s*\d+\s*$/.test(line)) {
      current = { period: Number(line.trim()), stack: [], kernel: false, dso: '' }
    } else if (current !== undefined) {
      // "\t    ffffffff8a2 __schedule ([kernel.kallsyms])" or "\t  31bcd1 net/http.(*conn).serve (/path/oauth2-proxy)"
      const match = /^\s*[0-9a-f]+\s+(.*?)\s+\(([^)]*)\)\s*$/.exec(line)
      if (match === null) continue
      const [, sym = '', dso = ''] = match
      if (current.stack.length === 0) {
        current.kernel = dso.startsWith('[kernel') || dso === '[vdso]'
        current.dso = dso
      }
      current.stack.push(dso.startsWith('[kernel') ? `${sym} [kernel]` : sym === '[unknown]' ? `[unknown] ${dso}` : sym)
    }
  }
  if (current !== undefined) samples.push(current)
  return samples
}

/** A Go symbol's package: `net/http.(*conn).serve` → `net/http`; assembly without a package → `runtime`. */
export function goPackage(sym: string): string {
  const head = sym.split(/[([]/)[0] ?? sym
  const slash = head.lastIndexOf('/')
  const dot = head.indexOf('.', slash + 1)
  return dot === -1 ? 'runtime' : head.slice(0, dot)
}

/** Frames of Go's garbage collector: a sample under one of these is the collector's, whatever its leaf. */
const GC_ROOTS = /^runtime\.(gcBgMarkWorker|gcAssistAlloc|gcDrain|markroot|bgsweep|bgscavenge|gcStart|sweepone|gcMarkDone|gcMarkTermination)/

/** V8's collector, on the main thread or its own: a sample under one of these is the collector's. */
const V8_GC =
  /v8::internal::(Heap::|Scavenger|ScavengerCollector|MarkCompactCollector|MinorMarkSweep|ConcurrentMarking|Sweeper|MarkingBarrier|IncrementalMarking)/

/** A JavaScript frame of V8's perf map (`JS:*name file:///...js:12:3`, `JS:~name node:events:489:1`) as profile-summary.ts's frame. */
function jsFrame(sym: string): { functionName: string; url: string; lineNumber: number } | undefined {
  const match = /^JS:[*~^+-]?(.*?)\s+((?:file|node|wasm):\S*?)(?::(\d+))?(?::\d+)?$/.exec(sym)
  if (match === null) return undefined
  return { functionName: match[1] ?? '', url: match[2] ?? '', lineNumber: Number(match[3] ?? 1) - 1 }
}

/** The layer a sample's self time belongs to: a Go program's, or a Node server's (the layers of profile-summary.ts, with the kernel apart). */
export function layerOf(sample: Sample): string {
  if (sample.stack.some((frame) => GC_ROOTS.test(frame))) return "garbage collector (Go's, and the allocation assists it asks for)"
  if (sample.stack.some((frame) => V8_GC.test(frame))) return 'garbage collector'
  if (sample.kernel) return 'kernel (system calls, loopback TCP, scheduling)'
  const leaf = sample.stack[0] ?? ''
  const js = jsFrame(leaf)
  if (js !== undefined) return v8Layer(ownerOf(js))
  if (/\/perf-\d+\.map$/.test(sample.dso) || leaf.startsWith('[unknown]')) return 'JavaScript, not named (V8 builtins, code compiled before the map)'
  if (/\/node$/.test(sample.dso)) return "Node's and V8's native code (C++, builtins, libuv, llhttp)"
  if (/\/lib[^/]*\.so/.test(sample.dso)) return 'shared libraries (libc, OpenSSL)'
  const pkg = goPackage(sample.stack[0] ?? '')
  if (pkg === 'runtime' || pkg.startsWith('internal/') || pkg === 'sync' || pkg.startsWith('sync/'))
    return "Go's runtime (scheduler, allocator, maps, system call entry)"
  if (/^(net|net\/.*|bufio|io|mime.*|vendor\/golang\.org\/x\/net\/.*|golang\.org\/x\/net\/.*)$/.test(pkg)) return 'net/http, its ReverseProxy, networking'
  if (
    /^(crypto\/.*|vendor\/golang\.org\/x\/crypto\/.*|golang\.org\/x\/crypto\/.*|hash\/.*|encoding\/.*|github\.com\/pierrec\/lz4.*|github\.com\/vmihailenco\/msgpack.*)$/.test(
      pkg,
    )
  )
    return 'crypto and encodings (the cookie: HMAC, AES, base64, msgpack, lz4)'
  if (/^(text\/template.*|fmt|reflect|strconv|strings|bytes|unicode.*|time|sort|slices|maps|errors|context|log)$/.test(pkg))
    return "Go's standard library, other (fmt, text/template, strings, time)"
  if (pkg === 'main' || pkg.startsWith('github.com/oauth2-proxy/')) return "oauth2-proxy's own packages"
  return 'other modules (gorilla/mux, prometheus, justinas/alice...)'
}

function top(map: Map<string, number>, n: number, show: (ns: number) => string): string[] {
  return [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, v]) => `  ${show(v).padStart(14)}  ${k}`)
}

function add(map: Map<string, number>, key: string, value: number): void {
  map.set(key, (map.get(key) ?? 0) + value)
}

export function summarize(samples: Sample[]): {
  busy: number
  byLayer: Map<string, number>
  byPackage: Map<string, number>
  byFunction: Map<string, number>
  inclusive: Map<string, number>
} {
  const byLayer = new Map<string, number>()
  const byPackage = new Map<string, number>()
  const byFunction = new Map<string, number>()
  const inclusive = new Map<string, number>()
  let busy = 0
  for (const sample of samples) {
    busy += sample.period
    const leaf = sample.stack[0] ?? '[no stack]'
    add(byLayer, layerOf(sample), sample.period)
    const js = jsFrame(leaf)
    const native = /\/node$|\.so|\.map$/.test(sample.dso) ? (sample.dso.split('/').pop() ?? sample.dso) : undefined
    add(byPackage, sample.kernel ? 'kernel' : js !== undefined ? ownerOf(js) : (native ?? goPackage(leaf)), sample.period)
    add(byFunction, leaf, sample.period)
    for (const frame of new Set(sample.stack)) add(inclusive, frame, sample.period)
  }
  return { busy, byLayer, byPackage, byFunction, inclusive }
}

function main(): void {
  const [file, requestsArg] = process.argv.slice(2)
  if (file === undefined) throw new Error('usage: perf-summary <file.perf.data> [requests]')
  const script = spawnSync('perf', ['script', '-i', file, '-F', 'period,ip,sym,dso'], { maxBuffer: 1 << 30, encoding: 'utf8' })
  if (script.status !== 0) throw new Error(`perf script failed: ${script.stderr}`)
  const { busy, byLayer, byPackage, byFunction, inclusive } = summarize(parseScript(script.stdout))
  const requests = Number(requestsArg ?? 0)
  const show = (ns: number): string => (requests > 0 ? `${(ns / 1000 / requests).toFixed(2)} µs/req` : `${((100 * ns) / busy).toFixed(1)}%`)
  process.stdout.write(
    `busy ${show(busy)}\nby layer:\n${top(byLayer, 10, show).join('\n')}\nby package:\n${top(byPackage, 30, show).join('\n')}\nby function (self):\n${top(byFunction, 40, show).join('\n')}\ninclusive (each function once per sample):\n${top(inclusive, 80, show).join('\n')}\n`,
  )
}

if (process.argv[1]?.endsWith('perf-summary.js')) main()
