import { createRequire } from 'node:module'
import type * as Api from '@opentelemetry/api'
import type * as Core from '@opentelemetry/core'

// The OpenTelemetry API and core (W3C Trace Context propagation), loaded at their first use: only
// code that holds a tracer uses them, and a tracer exists only when telemetry.tracing is on
// (ops/tracing.ts, which loads the SDK). A gateway without tracing loads neither. They are
// CommonJS packages, required synchronously: the SDK requires the same module instances.

const require = createRequire(import.meta.url)

let api: typeof Api | undefined
let core: typeof Core | undefined

/** @opentelemetry/api */
export function otelApi(): typeof Api {
  api ??= require('@opentelemetry/api') as typeof Api
  return api
}

/** @opentelemetry/core */
export function otelCore(): typeof Core {
  core ??= require('@opentelemetry/core') as typeof Core
  return core
}
