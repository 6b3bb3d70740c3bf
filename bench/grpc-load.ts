// A closed-loop load of unary gRPC calls, for the rows autocannon cannot drive (it speaks HTTP/1.1
// only): `concurrency` calls in flight, each loop starting its next call when its last one ends,
// until `seconds` have passed; the calls under way then finish (none is cut, so every call the
// server worked on is counted). Runs in the bench's own process, on the load generator's core.

import { performance } from 'node:perf_hooks'

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
