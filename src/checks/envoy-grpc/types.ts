// The boundary between the gRPC ext_authz service and the gateway: the service decodes Envoy's
// CheckRequest into a CheckInput, the gateway (passed in as `check`) decides, and the service
// encodes its CheckAnswer as a CheckResponse. Nothing here knows of protobuf, so the gateway's
// decision code does not either.

/** The request Envoy asks about (envoy.service.auth.v3.AttributeContext.HttpRequest). */
export interface CheckInput {
  method: string
  /** Host or :authority, as Envoy saw it. */
  host: string
  /** The request target: path and query, not decoded. */
  path: string
  /** `http` or `https`, as Envoy saw it. */
  scheme: string
  /**
   * Lower-case names, one value per name (Envoy's pseudo headers `:authority`, `:path`... included
   * when it sends them). Values of a name sent several times are joined: `; ` for cookie
   * (RFC 9113 section 8.2.3), `, ` otherwise (RFC 9110 section 5.3).
   */
  headers: Record<string, string>
  /** `context_extensions.upstream`: the upstream whose rules apply, set in Envoy's route configuration. */
  upstream: string | undefined
}

export type CheckAnswer =
  | {
      allow: true
      /** Set on the request before it goes upstream, replacing what the client sent. */
      upstreamHeaders: Array<[string, string]>
      /** Removed from the request before it goes upstream. */
      removeHeaders: readonly string[]
      /** Added to the response to the client (Set-Cookie of a refreshed session). */
      responseHeaders: Array<[string, string]>
    }
  | { allow: false; status: number; headers: Array<[string, string]>; body: string }
