import type { CheckDialect } from './dialect.js'
import { ENVOY_HTTP } from './envoy-http.js'
import { FORWARD_AUTH } from './forward-auth.js'

// The check dialects the gateway speaks, one line each (what a dialect is and does: dialect.ts).
// Envoy's gRPC check is no HTTP route: plugin.ts builds it on Envoy's pipeline.

export const CHECK_DIALECTS: readonly CheckDialect[] = [FORWARD_AUTH, ENVOY_HTTP]
