import { hostname } from 'node:os'
import { redactUrl, type UrlRedactor } from './logging.js'
import type { LogConfig } from '../options/types.js'

// The request line: one per request, for the proxy, the gateway's endpoints, the checks over HTTP
// and over gRPC. Fastify's own request logging is off (app.ts). The line is on every request's
// path, so it is built here as one string rather than through pino: no per-request child logger,
// no generic serializer walk, no redaction pass over fields that never hold a header. It keeps
// pino's shape (level, time, pid, hostname, the request id, msg) and goes to the same destination
// as pino's lines, so one parser reads every line of the log.
//
// What it may carry: the method, the request target with secret query values redacted
// (logging.ts, log.redactQueryParams), the status, the client address, the subject of a signed-in request and a
// route's own fields (reply.logFields: the checks' outcome and the request they checked, already
// redacted by their owner). Never a header, a cookie or a token.

/** pino's number for `info`, the request line's level. */
const INFO = 30
const LEVELS: Record<LogConfig['level'], number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60, silent: Infinity }

export interface RequestLine {
  /** Fastify's request id; absent for a gRPC check, which has none. */
  reqId?: string
  method: string
  /** The request target as received; redacted here. */
  url?: string
  /** The gRPC method of a check answered over gRPC. */
  grpc?: string
  status: number
  /** Milliseconds from the request to its answer; written to a tenth. */
  ms: number
  ip?: string
  sub?: string
  /** The mapped user, when the provider maps the user to another claim than `sub` (providers[].userClaim). */
  user?: string | undefined
  /** A route's own fields, already free of secrets. */
  fields?: Readonly<Record<string, unknown>>
  /** The request's server span (telemetry.tracing), as `trace_id` and `span_id`: hex, no quoting needed. */
  trace?: { traceId: string; spanId: string } | undefined
}

/**
 * Characters a JSON string may hold unescaped (RFC 8259 7: anything but `"`, `\` and controls), in
 * the printable ASCII that request ids, methods, paths, addresses and most subjects are made of.
 */
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/

/** A JSON string: quoted as is when nothing needs escaping (JSON.stringify's generic path costs more), JSON.stringify otherwise. */
function quote(value: string): string {
  return PLAIN.test(value) ? `"${value}"` : JSON.stringify(value)
}

export interface LineDestination {
  write(line: string): unknown
}

export class AccessLog {
  readonly enabled: boolean
  readonly #destination: LineDestination
  /** pino's base bindings of every line: `"pid":…,"hostname":…`. */
  readonly #base: string
  /** log.redactQueryParams applied (logging.ts urlRedactor). */
  readonly redactUrl: UrlRedactor

  constructor(destination: LineDestination, level: LogConfig['level'], redact: UrlRedactor = redactUrl) {
    this.#destination = destination
    this.redactUrl = redact
    this.enabled = LEVELS[level] <= INFO
    this.#base = `"pid":${process.pid},"hostname":${JSON.stringify(hostname())}`
  }

  write(line: RequestLine): void {
    if (!this.enabled) return
    let out = `{"level":${INFO},"time":${Date.now()},${this.#base}`
    if (line.reqId !== undefined) out += `,"reqId":${quote(line.reqId)}`
    out += `,"method":${quote(line.method)}`
    if (line.url !== undefined) out += `,"url":${quote(this.redactUrl(line.url))}`
    if (line.grpc !== undefined) out += `,"grpc":${quote(line.grpc)}`
    out += `,"status":${line.status},"ms":${Math.round(line.ms * 10) / 10}`
    if (line.ip !== undefined) out += `,"ip":${quote(line.ip)}`
    if (line.sub !== undefined) out += `,"sub":${quote(line.sub)}`
    if (line.user !== undefined) out += `,"user":${quote(line.user)}`
    if (line.trace !== undefined) out += `,"trace_id":"${line.trace.traceId}","span_id":"${line.trace.spanId}"`
    if (line.fields !== undefined) {
      for (const name of Object.keys(line.fields)) {
        const value = JSON.stringify(line.fields[name])
        if (value !== undefined) out += `,${quote(name)}:${value}`
      }
    }
    this.#destination.write(`${out},"msg":"request"}\n`)
  }
}
