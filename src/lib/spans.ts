import type { Context, Span, SpanOptions, Tracer } from '@opentelemetry/api'
import { otelApi } from './otel.js'

// Spans around work that may fail, for the modules that trace by hand (ops/tracing.ts sets the
// SDK up; without it nobody calls these). Only the OpenTelemetry API is used here (lib/otel.ts,
// loaded at the first call), never the SDK. A failure is recorded by its kind (`error.type`: a
// Node error code, a problem code, the error's class), never by its message, which may quote a
// provider's answer or a URL.

/** `error.type` of `err`: the code of its cause (fetch's TypeError wraps ECONNREFUSED), its own code, else its class. */
export function errorType(err: unknown): string {
  if (typeof err !== 'object' || err === null) return '_OTHER'
  const { cause, code, name } = err as { cause?: { code?: unknown }; code?: unknown; name?: unknown }
  if (typeof cause?.code === 'string') return cause.code
  if (typeof code === 'string') return code
  return typeof name === 'string' ? name : '_OTHER'
}

/** Marks `span` failed, with the kind of failure. */
export function failSpan(span: Span, type: string): void {
  span.setAttribute('error.type', type)
  span.setStatus({ code: otelApi().SpanStatusCode.ERROR })
}

/**
 * Runs `work` in a new span, the active one while it runs (so what it calls nests below it),
 * ended when `work` settles; a rejection marks it failed (`failed` may decide that a rejection
 * is an answer, not a failure, by returning false).
 */
export async function inSpan<T>(
  tracer: Tracer,
  name: string,
  options: SpanOptions,
  work: (span: Span) => Promise<T>,
  parent: Context = otelApi().context.active(),
  failed: (span: Span, err: unknown) => boolean = () => true,
): Promise<T> {
  const { context, trace } = otelApi()
  const span = tracer.startSpan(name, options, parent)
  try {
    return await context.with(trace.setSpan(parent, span), () => work(span))
  } catch (err) {
    if (failed(span, err)) failSpan(span, errorType(err))
    throw err
  } finally {
    span.end()
  }
}
