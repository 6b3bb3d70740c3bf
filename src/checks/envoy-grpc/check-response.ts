import type { CheckAnswer } from './types.js'

// The gateway's answer as Envoy's CheckResponse (envoy/service/auth/v3/external_auth.proto).
//
// How Envoy reads it (source/extensions/filters/common/ext_authz/ext_authz_grpc_impl.cc,
// GrpcClientImpl::onSuccess): `status.code` 0 allows and applies `ok_response`; any other code
// denies with `denied_response` (status, headers, body) as the local reply, 403 when it carries
// no status (external_auth.proto, DeniedHttpResponse.status and CheckResponse.status). So the
// HTTP status the client sees is `denied_response.status`; the gRPC code is what Envoy's stats,
// logs and traces show, and it is chosen to say why (googleapis/googleapis google/rpc/code.proto).
//
// Failing closed: a 5xx answer becomes 503 UNAVAILABLE, and an answer that cannot be a refusal
// (1xx, 2xx, not an HTTP status) too, never something Envoy could take for an allow. Nothing here
// relies on Envoy's failure_mode_allow being off, but a gRPC error would (it is why the service
// answers errors as CheckResponses).
//
// Header mutations (envoy/config/core/v3/base.proto, HeaderValueOption): only `append_action`
// is set, never the deprecated `append` BoolValue. Envoy gives `append` precedence, and with it
// set to true appends by joining values into one header (appendCopy), which would fold several
// Set-Cookie into one invalid line; through `append_action` APPEND_IF_EXISTS_OR_ADD adds one
// header line per value (addCopy). external_auth.proto's comments (OkHttpResponse.headers,
// response_headers_to_add, DeniedHttpResponse.headers) say `append` defaults to false there,
// that is OVERWRITE_IF_EXISTS_OR_ADD, the action used for everything but repeated names.

/** google.rpc.Code values (googleapis/googleapis google/rpc/code.proto) the service answers with. */
export const GrpcCode = {
  OK: 0,
  INVALID_ARGUMENT: 3,
  PERMISSION_DENIED: 7,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const
export type GrpcCode = (typeof GrpcCode)[keyof typeof GrpcCode]

/** envoy.config.core.v3.HeaderValueOption.HeaderAppendAction. */
export const HeaderAppendAction = {
  APPEND_IF_EXISTS_OR_ADD: 0,
  ADD_IF_ABSENT: 1,
  OVERWRITE_IF_EXISTS_OR_ADD: 2,
  OVERWRITE_IF_EXISTS: 3,
} as const
export type HeaderAppendAction = (typeof HeaderAppendAction)[keyof typeof HeaderAppendAction]

/** envoy.config.core.v3.HeaderValueOption, as grpc-js takes it (proto field names). */
export interface HeaderValueOption {
  header: { key: string; value: string }
  append_action: HeaderAppendAction
}

/** envoy.service.auth.v3.CheckResponse, as grpc-js takes it: one of the two responses. */
export type CheckResponse =
  | {
      status: { code: typeof GrpcCode.OK; message: string }
      ok_response: { headers: HeaderValueOption[]; headers_to_remove: string[]; response_headers_to_add: HeaderValueOption[] }
    }
  | {
      status: { code: Exclude<GrpcCode, typeof GrpcCode.OK>; message: string }
      denied_response: { status: { code: number }; headers: HeaderValueOption[]; body: string }
    }

/** What a refusal becomes: the gRPC code and the HTTP status the client gets. */
export interface Refusal {
  code: Exclude<GrpcCode, typeof GrpcCode.OK>
  status: number
  /** Whether the answer's headers and body go with it (not for an answer that was not a refusal). */
  keepsContent: boolean
}

/**
 * The statuses the gateway refuses with, each with its reason as a gRPC code. The table:
 * 302 (sign-in redirect) and 401 are "who are you", 403 and 404 (no upstream serves it, unknown
 * `context_extensions.upstream`) are "not for you", 400 is a request the gateway cannot describe.
 */
const REFUSALS: ReadonlyMap<number, Refusal['code']> = new Map<number, Refusal['code']>([
  [302, GrpcCode.UNAUTHENTICATED],
  [401, GrpcCode.UNAUTHENTICATED],
  [400, GrpcCode.INVALID_ARGUMENT],
  [403, GrpcCode.PERMISSION_DENIED],
  [404, GrpcCode.PERMISSION_DENIED],
])

/** The gRPC code and client status of a refusal with HTTP status `status`. */
export function refusalOf(status: number): Refusal {
  const listed = REFUSALS.get(status)
  if (listed !== undefined) return { code: listed, status, keepsContent: true }
  if (!Number.isInteger(status) || status < 300 || status > 599) {
    // A deny carrying 200 would be a local reply that looks like success to the client; the
    // answer is a bug upstream of here, and the safe reading of a bug is "unavailable".
    return { code: GrpcCode.UNAVAILABLE, status: 503, keepsContent: false }
  }
  // 500, 502, 504...: the provider or the session store failed. Envoy's ext_authz itself answers
  // 403 or its status_on_error on failures; the gateway says 503 so clients retry.
  if (status >= 500) return { code: GrpcCode.UNAVAILABLE, status: 503, keepsContent: true }
  // Other 3xx: a redirect before access, like the sign-in one.
  if (status < 400) return { code: GrpcCode.UNAUTHENTICATED, status, keepsContent: true }
  // Other 4xx (405, 429...): a refusal of this request.
  return { code: GrpcCode.PERMISSION_DENIED, status, keepsContent: true }
}

/**
 * Header mutations for `headers`: Set-Cookie always appends (the upstream's own cookies stay and
 * each of the gateway's is its own line); any other name overwrites on its first occurrence, so a
 * client's forged copy never survives next to the gateway's value, and appends on the next ones.
 */
export function headerMutations(headers: ReadonlyArray<readonly [string, string]>): HeaderValueOption[] {
  const seen = new Set<string>()
  return headers.map(([key, value]) => {
    const name = key.toLowerCase()
    const first = !seen.has(name)
    seen.add(name)
    const append = name === 'set-cookie' || !first
    return {
      header: { key, value },
      append_action: append ? HeaderAppendAction.APPEND_IF_EXISTS_OR_ADD : HeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD,
    }
  })
}

export function checkResponse(answer: CheckAnswer): CheckResponse {
  if (answer.allow) {
    return {
      status: { code: GrpcCode.OK, message: '' },
      ok_response: {
        headers: headerMutations(answer.upstreamHeaders),
        headers_to_remove: [...answer.removeHeaders],
        response_headers_to_add: headerMutations(answer.responseHeaders),
      },
    }
  }
  const refusal = refusalOf(answer.status)
  return {
    status: { code: refusal.code, message: refusal.keepsContent ? `HTTP ${answer.status}` : `not a refusal status: ${String(answer.status)}` },
    denied_response: {
      status: { code: refusal.status },
      headers: refusal.keepsContent ? headerMutations(answer.headers) : [],
      body: refusal.keepsContent ? answer.body : '',
    },
  }
}
