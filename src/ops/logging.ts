import type { FastifyBaseLogger, FastifyLoggerOptions } from 'fastify'
import { destination, type Bindings, type ChildLoggerOptions, type DestinationStream, type LoggerOptions } from 'pino'
import type { LogConfig } from '../options/types.js'
import { DEFAULT_REDACTED_QUERY_PARAMS } from '../options/schema.js'

// Logs are pino JSON, one line per request. Tokens travel in headers and, on the callback, in
// the query string, so both are redacted before anything reaches a log line.
//
// Query strings carry more than the gateway's own credentials: applications put passwords, API
// keys and reset tokens there (`?password=…&api_key=…`), and a log line outlives the request, is
// shipped and read by more people than the application's database. OWASP's Logging Cheat Sheet
// ("Data to exclude": session identifiers, access tokens, passwords, keys) and RFC 6750 5.3
// ("Don't pass bearer tokens in page URLs") both say such values must not be logged. So every
// parameter whose name contains one of `log.redactQueryParams` (case-insensitive, inside larger
// names too: `user_password`, `X-Api-Key`, `accessToken`) has its value replaced; its name and
// the other parameters stay as they were sent, so the line still says what was asked.

/**
 * The gateway's own one-time credentials and tokens (the callback's `code` and `state`, logout's
 * `id_token_hint`, ...): redacted whatever `log.redactQueryParams` says, exact names.
 */
const PROTOCOL_PARAMS = /^(code|state|session_state|id_token|id_token_hint|access_token|refresh_token|token|logout_token|client_secret|nonce)$/i

/** What a redacted value becomes. */
export const REDACTED = '[redacted]'

export const REDACTED_PATHS = [
  'req.headers.cookie',
  'req.headers.authorization',
  'req.headers["proxy-authorization"]',
  'res.headers["set-cookie"]',
  'headers.cookie',
  'headers.authorization',
]

export type UrlRedactor = (url: string) => string

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

/** A name as every parser reads it: `+` is a space, `%xx` decoded (`%63ode` is `code`). */
function decodeName(raw: string): string {
  if (!raw.includes('%') && !raw.includes('+')) return raw
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '))
  } catch {
    return raw
  }
}

/**
 * The request target with the values of credential-like query parameters replaced by REDACTED.
 * `names`: the parts of a name that make it a credential (log.redactQueryParams).
 */
export function createUrlRedactor(names: readonly string[]): UrlRedactor {
  const fragments = names.map((name) => escapeRegExp(name))
  const secretName = fragments.length === 0 ? PROTOCOL_PARAMS : new RegExp(`${fragments.join('|')}|${PROTOCOL_PARAMS.source}`, 'i')
  // A quick look at the whole query: when no name could be a secret (no fragment anywhere, no
  // percent-encoding that could hide one), the URL is returned untouched without splitting it.
  const anywhere = new RegExp(fragments.length === 0 ? PROTOCOL_PARAMS.source.slice(1, -1) : [...fragments, PROTOCOL_PARAMS.source.slice(1, -1)].join('|'), 'i')
  return (url) => {
    const q = url.indexOf('?')
    if (q === -1) return url
    const query = url.slice(q + 1)
    if (!query.includes('%') && !anywhere.test(query)) return url
    const pairs = query.split('&')
    let changed = false
    for (let i = 0; i < pairs.length; i++) {
      const pair = pairs[i] as string
      const eq = pair.indexOf('=')
      const raw = eq === -1 ? pair : pair.slice(0, eq)
      if (raw === '' || !secretName.test(decodeName(raw))) continue
      pairs[i] = `${raw}=${REDACTED}`
      changed = true
    }
    return changed ? `${url.slice(0, q)}?${pairs.join('&')}` : url
  }
}

/** The request target redacted with the default list; where no configuration is at hand. */
export const redactUrl: UrlRedactor = createUrlRedactor(DEFAULT_REDACTED_QUERY_PARAMS)

/** The redactor of a `log` configuration (the default list where the key is not filled in, as in tests' partial configurations). */
export function urlRedactor(config: Partial<Pick<LogConfig, 'redactQueryParams'>>): UrlRedactor {
  return config.redactQueryParams === undefined ? redactUrl : createUrlRedactor(config.redactQueryParams)
}

export function loggerOptions(config: LogConfig): FastifyLoggerOptions & LoggerOptions {
  const redact = urlRedactor(config)
  return {
    level: config.level,
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    serializers: {
      req: (req: { method: string; url: string; id: string }) => ({ method: req.method, url: redact(req.url), id: req.id }),
      // Every `url` field of every line, the libraries' included: the WebSocket proxy logs the
      // upstream URL at debug, query (`?access_token=...`) and all.
      url: (url: unknown) => (typeof url === 'string' ? redact(url) : url),
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
 *
 * The batch is gathered here and handed to sonic-boom (which writes it, retrying a full pipe) as
 * one string: sonic-boom's own `minLength` buffer measures its whole pending string on every
 * write (Buffer.byteLength of a string of up to PIPE_BUF bytes, flattened each time), which cost
 * more than the line itself.
 */
export function bufferedDestination(fd: number): BufferedLines {
  return new BufferedLines(destination({ dest: fd, sync: true, maxWrite: PIPE_BUF }), PIPE_BUF - 1024, PIPE_BUF)
}

/** Lines gathered into batches of whole lines (bufferedDestination). */
export class BufferedLines implements DestinationStream {
  readonly #sink: SonicBoom
  readonly #batchBytes: number
  readonly #maxBytes: number
  #lines: string[] = []
  #bytes = 0
  readonly #timer: NodeJS.Timeout

  constructor(sink: SonicBoom, batchBytes: number, maxBytes: number) {
    this.#sink = sink
    this.#batchBytes = batchBytes
    this.#maxBytes = maxBytes
    this.#timer = setInterval(() => this.#flush(), LOG_FLUSH_MS).unref()
  }

  write(line: string): void {
    const bytes = Buffer.byteLength(line)
    if (this.#bytes + bytes > this.#maxBytes) this.#flush()
    this.#lines.push(line)
    this.#bytes += bytes
    if (this.#bytes >= this.#batchBytes) this.#flush()
  }

  #flush(): void {
    if (this.#lines.length === 0) return
    const batch = this.#lines.length === 1 ? (this.#lines[0] as string) : this.#lines.join('')
    this.#lines = []
    this.#bytes = 0
    this.#sink.write(batch)
  }

  /** Writes what is gathered, now. */
  flushSync(): void {
    this.#flush()
    this.#sink.flushSync()
  }

  /** Stops the periodic write and closes the destination (what is gathered is lost: flushSync first). */
  destroy(): void {
    clearInterval(this.#timer)
    this.#sink.destroy()
  }
}

export type SonicBoom = ReturnType<typeof destination>

let stdout: BufferedLines | undefined

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
export function flushAtExit(stream: BufferedLines): void {
  try {
    stream.flushSync()
  } catch {
    // EPIPE, or a destination already destroyed: the lines have nowhere to go.
  }
}

/**
 * Fastify's childLoggerFactory: the logger of a request, made when the request first logs. Fastify
 * makes one per request (with its `reqId`), and a pino child costs a bindings serialization and an
 * object per request; most requests never log beyond their request line (access-log.ts), which is
 * not written through it. The line a request does log is the same as before.
 */
export function lazyRequestLogger(logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  // The methods are the prototype's (no closures per request), typed loosely there; their
  // arguments go to pino's as given.
  return new LazyChildLogger(logger, bindings, options) as unknown as FastifyBaseLogger
}

class LazyChildLogger {
  readonly #parent: FastifyBaseLogger
  readonly #bindings: Bindings
  readonly #options: ChildLoggerOptions
  #child: FastifyBaseLogger | undefined

  constructor(parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions) {
    this.#parent = parent
    this.#bindings = bindings
    this.#options = options
  }

  #real(): FastifyBaseLogger {
    return (this.#child ??= this.#parent.child(this.#bindings, this.#options))
  }

  get level(): string {
    return this.#child?.level ?? this.#options.level ?? this.#parent.level
  }

  set level(level: string) {
    this.#real().level = level
  }

  // One method per level, each handing its arguments to the child's (made at the first call).
  static {
    for (const level of ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const) {
      Object.defineProperty(LazyChildLogger.prototype, level, {
        value(this: LazyChildLogger, ...args: unknown[]): void {
          const real = this.#real()
          Reflect.apply(real[level], real, args)
        },
      })
    }
  }

  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#real().child(bindings, options)
  }
}
