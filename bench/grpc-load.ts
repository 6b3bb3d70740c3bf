// A closed-loop load of unary gRPC calls, for the rows autocannon cannot drive (it speaks HTTP/1.1
// only): `concurrency` calls in flight, each loop starting its next call when its last one ends,
// until `seconds` have passed; the calls under way then finish (none is cut, so every call the
// server worked on is counted). Runs in the bench's own process, on the load generator's core.

import { execFile, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { connect } from 'node:http2'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { promisify } from 'node:util'

const execFileAsync = promisify(execFile)

export interface GrpcLoadResult {
  /** Completed calls per second over the whole run. */
  rps: number
  /** Latency percentiles in milliseconds, as autocannon reports them. */
  p50: number
  p99: number
  /** Calls answered (expected or not). */
  requests: number
  /** Calls answered with something other than what the row expects. */
  unexpected: number
  /** Calls that failed (a gRPC error, a deadline): not answered, not in `requests`. */
  errors: number
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number
}

/** `call` resolves whether the answer was the expected one, and rejects when the call failed. */
export async function grpcLoad(call: () => Promise<boolean>, concurrency: number, seconds: number): Promise<GrpcLoadResult> {
  const latencies: number[] = []
  let unexpected = 0
  let errors = 0
  const start = performance.now()
  const end = start + seconds * 1000
  const loop = async (): Promise<void> => {
    while (performance.now() < end) {
      const sent = performance.now()
      try {
        const expected = await call()
        latencies.push(performance.now() - sent)
        if (!expected) unexpected++
      } catch {
        errors++
      }
    }
  }
  await Promise.all(Array.from({ length: concurrency }, loop))
  const elapsed = (performance.now() - start) / 1000
  const sorted = Float64Array.from(latencies).sort()
  return { rps: latencies.length / elapsed, p50: percentile(sorted, 50), p99: percentile(sorted, 99), requests: latencies.length, unexpected, errors }
}

/**
 * Unary calls of one method over one raw HTTP/2 connection, framed as gRPC over HTTP/2 says
 * (grpc/grpc doc/PROTOCOL-HTTP2.md): HEADERS with `:method POST`, `:path /<service>/<method>`,
 * `content-type: application/grpc` and `te: trailers`, then one Length-Prefixed-Message (a
 * compressed-flag byte 0, a 4-byte big-endian length, the message); the answer's message is read
 * back the same way and its status from the `grpc-status` trailer (or header, trailers-only).
 *
 * This is the load generator of the gRPC row, in the role Envoy plays: Envoy's own HTTP/2 codec
 * multiplexes its checks on a connection at little cost, while a @grpc/grpc-js client saturates
 * the load generator's core at about half the calls the service can answer, which would measure
 * the service idling between calls rather than its cost per call. The request is encoded, and the
 * answer decoded, with the method's own serializers (proto-loader), so the wire is the service's.
 */
export function rawUnaryCaller<Req, Res>(
  address: string,
  method: { path: string; requestSerialize: (value: Req) => Buffer; responseDeserialize: (bytes: Buffer) => Res },
  request: Req,
): { call(): Promise<{ status: number; response: Res | undefined }>; close(): void } {
  const session = connect(`http://${address}`)
  const message = method.requestSerialize(request)
  const frame = Buffer.alloc(5 + message.length)
  frame.writeUInt32BE(message.length, 1)
  message.copy(frame, 5)
  const headers = { ':method': 'POST', ':path': method.path, 'content-type': 'application/grpc', te: 'trailers' }
  const call = (): Promise<{ status: number; response: Res | undefined }> =>
    new Promise((resolve, reject) => {
      const stream = session.request(headers)
      const chunks: Buffer[] = []
      let status: unknown
      stream.on('response', (h) => {
        status ??= h['grpc-status']
      })
      stream.on('trailers', (t) => {
        status = t['grpc-status']
      })
      stream.on('data', (chunk: Buffer) => chunks.push(chunk))
      stream.on('error', reject)
      stream.on('end', () => {
        const body = Buffer.concat(chunks)
        const response = body.length >= 5 ? method.responseDeserialize(body.subarray(5, 5 + body.readUInt32BE(1))) : undefined
        resolve({ status: Number(status ?? Number.NaN), response })
      })
      stream.end(frame)
    })
  return { call, close: () => session.close() }
}

/**
 * h2load (nghttp2-client), when installed, as the gRPC row's load generator: a C HTTP/2 client, as
 * cheap per call as Envoy's own codec, so the service is measured busy, as the HTTP rows' server
 * is under autocannon (the Node client above keeps it about a quarter idle). `BENCH_H2LOAD=install`
 * installs it as root; `BENCH_H2LOAD=off` keeps the Node client.
 */
export function h2loadAvailable(): { available: boolean; why?: string } {
  const setting = process.env.BENCH_H2LOAD
  if (setting === 'off') return { available: false, why: 'BENCH_H2LOAD=off' }
  const present = (): boolean => spawnSync('h2load', ['--version']).status === 0
  if (present()) return { available: true }
  if (setting !== 'install') return { available: false, why: 'h2load is not installed (BENCH_H2LOAD=install installs nghttp2-client as root)' }
  if (process.getuid?.() !== 0) return { available: false, why: 'BENCH_H2LOAD=install needs root' }
  const apt = spawnSync('sh', ['-c', 'apt-get update && apt-get install -y nghttp2-client'], { stdio: ['ignore', 'ignore', 'inherit'] })
  if (apt.status !== 0 || !present()) return { available: false, why: 'installing nghttp2-client failed' }
  return { available: true }
}

/**
 * `concurrency` streams of the same unary call on one HTTP/2 connection for `seconds`, by h2load:
 * the request frame is `message` as a Length-Prefixed-Message (PROTOCOL-HTTP2.md). h2load reads
 * HTTP statuses only, never grpc-status: the caller checks the answer itself before and after.
 * Latencies come from h2load's per-request log.
 */
export async function h2loadUnary(
  address: string,
  path: string,
  message: Buffer,
  concurrency: number,
  seconds: number,
  pinnedCore?: number,
): Promise<GrpcLoadResult> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-h2load-'))
  try {
    const body = join(dir, 'request.bin')
    const frame = Buffer.alloc(5 + message.length)
    frame.writeUInt32BE(message.length, 1)
    message.copy(frame, 5)
    writeFileSync(body, frame)
    const log = join(dir, 'requests.log')
    const args = [
      '-D',
      String(seconds),
      '-c',
      '1',
      '-m',
      String(concurrency),
      '-d',
      body,
      '-H',
      'content-type: application/grpc',
      '-H',
      'te: trailers',
      '--log-file',
      log,
      `http://${address}${path}`,
    ]
    const [command, argv] = pinnedCore === undefined ? ['h2load', args] : ['taskset', ['-c', String(pinnedCore), 'h2load', ...args]]
    const { stdout } = await execFileAsync(command, argv as string[])
    const counts = /requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(stdout)
    const finished = /finished in ([\d.]+)s/.exec(stdout)
    if (counts === null || finished === null) throw new Error(`h2load's output was not understood:\n${stdout}`)
    // Each line of the log: start time, HTTP status, microseconds elapsed.
    const latencies = readFileSync(log, 'utf8')
      .split('\n')
      .flatMap((line) => {
        const [, status, micros] = line.split('\t')
        return status === '200' && micros !== undefined ? [Number(micros) / 1000] : []
      })
    const sorted = Float64Array.from(latencies).sort()
    const done = Number(counts[2])
    const succeeded = Number(counts[3])
    return {
      rps: done / Number(finished[1]),
      p50: percentile(sorted, 50),
      p99: percentile(sorted, 99),
      requests: done,
      unexpected: done - succeeded,
      errors: Number(counts[5]) + Number(counts[6]),
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
