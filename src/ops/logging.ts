import type { FastifyLoggerOptions } from 'fastify'
import { destination, type DestinationStream, type LoggerOptions } from 'pino'
import type { LogConfig } from '../options/types.js'

// Logs are pino JSON, one line per request. Tokens travel in headers and, on the callback, in
// the query string, so both are redacted before anything reaches a log line.

/** Query parameters whose values are secrets or one-time credentials. */
const SECRET_PARAMS = /^(code|state|session_state|id_token|id_token_hint|access_token|refresh_token|token|logout_token|client_secret|nonce)$/i

export const REDACTED_PATHS = [
  'req.headers.cookie',
  'req.headers.authorization',
  'req.headers["proxy-authorization"]',
  'res.headers["set-cookie"]',
  'headers.cookie',
  'headers.authorization',
]

/** The same names, found without parsing: every logged request passes here. */
const SECRET_PARAM_IN_QUERY = new RegExp(`(?:^|&)${SECRET_PARAMS.source.slice(1, -1)}(?:=|&|$)`, 'i')

/** The request target with the values of secret query parameters replaced. */
export function redactUrl(url: string): string {
  const q = url.indexOf('?')
  if (q === -1) return url
  const query = url.slice(q + 1)
  // Only a query that names a secret parameter, possibly percent-encoded (`%63ode` is `code` to
  // every parser), is parsed and rewritten.
  if (!query.includes('%') && !SECRET_PARAM_IN_QUERY.test(query)) return url
  const params = new URLSearchParams(query)
  let changed = false
  for (const name of new Set(params.keys())) {
    if (SECRET_PARAMS.test(name)) {
      params.set(name, '[redacted]')
      changed = true
    }
  }
  return changed ? `${url.slice(0, q)}?${params.toString()}` : url
}

export function loggerOptions(config: LogConfig): FastifyLoggerOptions & LoggerOptions {
  return {
    level: config.level,
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    serializers: {
      req: (req: { method: string; url: string; id: string }) => ({ method: req.method, url: redactUrl(req.url), id: req.id }),
      // Every `url` field of every line, the libraries' included: the WebSocket proxy logs the
      // upstream URL at debug, query (`?access_token=...`) and all.
      url: (url: unknown) => (typeof url === 'string' ? redactUrl(url) : url),
    },
  }
}

/**
 * A pipe write of at most PIPE_BUF bytes is atomic (POSIX write(2)): the workers of
 * `server.workers` share the primary's stdout, and a larger write could interleave with theirs
 * mid-line.
 */
const PIPE_BUF = 4096

/** At most this long between a line and its write, when fewer lines than a batch come. */
export const LOG_FLUSH_MS = 1000

/**
 * Log lines to `fd`, written synchronously in batches of whole lines: a write once about 3 KiB
 * have gathered (each write at most PIPE_BUF bytes of whole lines), and at least every
 * LOG_FLUSH_MS. One write per line cost a system call per request, the largest single item of a
 * check's time after the response's own write; nginx offers the same with `access_log ...
 * buffer= flush=`. What is buffered is written by the caller's `flushSync` at exit.
 */
export function bufferedDestination(fd: number): SonicBoom {
  return destination({ dest: fd, sync: true, minLength: PIPE_BUF - 1024, maxWrite: PIPE_BUF, periodicFlush: LOG_FLUSH_MS })
}

export type SonicBoom = ReturnType<typeof destination>

let stdout: SonicBoom | undefined

/**
 * The process's stdout for log lines, one per process. Written synchronously (pino's default
 * asynchronous destination hands each write to libuv's thread pool) and buffered
 * (bufferedDestination). The buffer is written when the process exits, whatever the cause Node
 * still runs JavaScript for: process.exit after SIGTERM's drain, the end of the event loop, an
 * uncaught exception. A SIGKILL, an out-of-memory abort or a crash of Node itself loses what is
 * buffered: at most about 3 KiB, and at most LOG_FLUSH_MS of lines.
 */
export function stdoutDestination(): DestinationStream {
  if (stdout === undefined) {
    const created = bufferedDestination(1)
    process.on('exit', () => flushAtExit(created))
    stdout = created
  }
  return stdout
}

/** Writes what is buffered; a stdout already closed (its reader gone) has nothing left to write to. */
export function flushAtExit(stream: SonicBoom): void {
  try {
    stream.flushSync()
  } catch {
    // EPIPE, or a destination already destroyed: the lines have nowhere to go.
  }
}
