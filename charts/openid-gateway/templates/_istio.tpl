{{/*
Istio's side of the integration: meshConfig's extension providers (istio/api
mesh/v1alpha1/config.proto, MeshConfig.ExtensionProvider: EnvoyExternalAuthorizationHttpProvider,
EnvoyExternalAuthorizationGrpcProvider). Istio's configuration, not the chart's: NOTES.txt prints it
to merge into meshConfig (istiod's Helm values, IstioOperator spec.meshConfig, or the Sail
operator's spec.values.meshConfig).
*/}}
{{- define "openid-gateway.istioMeshConfig" -}}
{{- $fullname := include "openid-gateway.fullname" . -}}
meshConfig:
  # The gateway decides only a path in normal form: merge slashes too (Istio's default BASE
  # leaves `//`; Istio's "Authorization Policy Normalization" reference, CVE-2021-31920).
  pathNormalization:
    normalization: MERGE_SLASHES
  extensionProviders:
    - name: {{ $fullname }}-http
      envoyExtAuthzHttp:
        service: {{ include "openid-gateway.serviceHost" . }}
        port: 8080
        pathPrefix: {{ include "openid-gateway.envoyPathPrefix" . }}
        # Istio's default is 600 s.
        timeout: {{ .Values.istio.timeout }}
        failOpen: false
        statusOnError: "503"
        includeRequestHeadersInCheck:
          {{- include "openid-gateway.checkHeaders" . | nindent 10 }}
        headersToUpstreamOnAllow:
          {{- include "openid-gateway.upstreamHeaders" . | nindent 10 }}
        headersToDownstreamOnAllow:
          - set-cookie
        headersToDownstreamOnDeny:
          - location
          - www-authenticate
          - content-type
          - cache-control
          - set-cookie
    - name: {{ $fullname }}-grpc
      envoyExtAuthzGrpc:
        service: {{ include "openid-gateway.serviceHost" . }}
        port: {{ .Values.grpcPort }}
        timeout: {{ .Values.istio.timeout }}
        failOpen: false
        statusOnError: "503"
{{- end -}}
