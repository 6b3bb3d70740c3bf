import type { FastifyLoggerOptions } from 'fastify'
import { destination, type DestinationStream, type LoggerOptions } from 'pino'
import type { LogConfig } from '../config/types.js'

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

let stdout: DestinationStream | undefined

/**
 * The process's stdout for log lines, written synchronously: one write per line costs half of
 * pino's default asynchronous destination, which hands each line to libuv's thread pool (a thread
 * wake-up per request under load), and no line is lost when the process dies. One per process.
 */
export function stdoutDestination(): DestinationStream {
  stdout ??= destination({ dest: 1, sync: true })
  return stdout
}
