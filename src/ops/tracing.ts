import type { Tracer } from '@opentelemetry/api'
import type { SpanExporter } from '@opentelemetry/sdk-trace-base'
import type { FastifyBaseLogger } from 'fastify'
import { otelApi } from '../lib/otel.js'
import type { TracingConfig } from '../options/types.js'

// OpenTelemetry tracing (telemetry.tracing): the SDK, its sampler and its OTLP/HTTP exporter, one
// per process (runtime/process-state.ts), flushed when the process stops cleanly. The SDK is
// imported here, dynamically, only when tracing is configured; so is the API (lib/otel.ts), which
// only the traced modules use, once they are handed a tracer. A gateway without tracing loads
// no OpenTelemetry package.
//
// Trace context is W3C Trace Context (https://www.w3.org/TR/trace-context/): `traceparent` and
// `tracestate`, continued from a trusted peer only (ops/request-tracing.ts). Sampling is
// parent-based with a ratio for the traces the gateway starts (the SDK's TraceIdRatioBased, by
// trace id, so every service of a trace takes the same decision for the same id).
//
// The tracer and its provider are passed, never registered as the API's globals: a process may run
// several gateways (tests, the bench), each with its own exporter. What is global is the context
// manager (AsyncLocalStorage), which carries the active span across awaits for every tracer alike.

export interface Tracing {
  readonly tracer: Tracer
  readonly config: TracingConfig
  /** Sends the finished spans now. */
  flush(): Promise<void>
  /** Sends what is left and stops: after the last request of the process. */
  shutdown(): Promise<void>
}

let asyncContext: Promise<void> | undefined

/** The process's context manager, set once: without one the active span is lost at the first await. */
function useAsyncContext(): Promise<void> {
  asyncContext ??= import('@opentelemetry/context-async-hooks').then(({ AsyncLocalStorageContextManager }) => {
    otelApi().context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  })
  return asyncContext
}

export async function startTracing(config: TracingConfig, log: FastifyBaseLogger): Promise<Tracing> {
  const [sdk, { OTLPTraceExporter }, { defaultResource, resourceFromAttributes }, { ExportResultCode }, { ATTR_SERVICE_NAME }] = await Promise.all([
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/core'),
    import('@opentelemetry/semantic-conventions'),
    useAsyncContext(),
  ])
  const otlp = new OTLPTraceExporter({ url: config.endpoint })
  // The SDK reports a failed export to the API's diagnostics, which say nothing unless a logger
  // is registered globally: the gateway says it itself, once per streak of failures.
  let failing = false
  const exporter: SpanExporter = {
    export(spans, done) {
      otlp.export(spans, (result) => {
        if (result.code === ExportResultCode.SUCCESS) {
          if (failing) log.info({ endpoint: config.endpoint }, 'traces are sent to the collector again')
          failing = false
        } else if (!failing) {
          failing = true
          log.warn(
            { endpoint: config.endpoint, err: result.error?.message, spans: spans.length },
            'traces could not be sent to the collector; they are dropped until it answers',
          )
        }
        done(result)
      })
    },
    shutdown: () => otlp.shutdown(),
    forceFlush: () => otlp.forceFlush(),
  }
  const provider = new sdk.BasicTracerProvider({
    resource: defaultResource().merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: config.serviceName })),
    sampler: new sdk.ParentBasedSampler({ root: new sdk.TraceIdRatioBasedSampler(config.sampleRatio) }),
    spanProcessors: [new sdk.BatchSpanProcessor(exporter, { scheduledDelayMillis: config.batchDelayMs })],
  })
  log.debug({ endpoint: config.endpoint, sampleRatio: config.sampleRatio, trustIncoming: config.trustIncoming }, 'tracing on')
  return {
    tracer: provider.getTracer('openid-gateway'),
    config,
    flush: () => provider.forceFlush(),
    shutdown: () => provider.shutdown(),
  }
}
