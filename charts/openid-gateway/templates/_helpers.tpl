{{/*
Names, labels and the facts every template shares: the public host, the application, the
gateway's Service address, and the gateway configuration the chart mounts (with what the chart
owns filled in). Every header list the companion objects carry is derived here from the
configuration, as the gateway itself derives the headers it sends.
*/}}

{{- define "openid-gateway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Every template names its object first: the chart's refusals run before anything else renders. */}}
{{- define "openid-gateway.fullname" -}}
{{- include "openid-gateway.validate" . -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "openid-gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "openid-gateway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: gateway
{{- end -}}

{{- define "openid-gateway.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "openid-gateway.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/*
The image reference. image.registry, else global.imageRegistry (both templated, as in
oauth2-proxy's chart), replaces the registry of image.repository: its first part when that names
a host (a dot, a port or localhost, as the container runtimes read a reference), else nothing.
*/}}
{{- define "openid-gateway.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- $repository := .Values.image.repository -}}
{{- $registry := tpl (.Values.image.registry | default "") . | default (tpl (dig "imageRegistry" "" (.Values.global | default (dict))) .) | trimSuffix "/" -}}
{{- if $registry -}}
{{- $parts := splitList "/" $repository -}}
{{- $first := first $parts -}}
{{- if and (gt (len $parts) 1) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) -}}
{{- $repository = join "/" (rest $parts) -}}
{{- end -}}
{{- $repository = printf "%s/%s" $registry $repository -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s:%s@%s" $repository $tag .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository $tag -}}
{{- end -}}
{{- end -}}

{{/* The pod's service account: the created one, else serviceAccount.name, else none (the namespace's default). */}}
{{- define "openid-gateway.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "openid-gateway.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Whether a proxy-mode route (ingress, gatewayApi) sends the hosts to the gateway. */}}
{{- define "openid-gateway.checkIntegration" -}}
{{- if or .Values.ingressNginx.enabled .Values.traefik.enabled .Values.httpRoute.enabled .Values.envoyGateway.enabled .Values.istio.enabled -}}true{{- end -}}
{{- end -}}

{{/* The hosts a proxy-mode route serves by default: publicUrl's, and app.host when it differs. */}}
{{- define "openid-gateway.proxyHosts" -}}
{{- toYaml (list (include "openid-gateway.publicHost" .) (include "openid-gateway.appHost" .) | uniq) -}}
{{- end -}}

{{- define "openid-gateway.secretName" -}}
{{- default (include "openid-gateway.fullname" .) .Values.secrets.existingSecret -}}
{{- end -}}

{{- define "openid-gateway.configMapName" -}}
{{- default (printf "%s-config" (include "openid-gateway.fullname" .)) .Values.existingConfigMap -}}
{{- end -}}

{{/* The host of publicUrl (the schema makes publicUrl an http(s) URL). */}}
{{- define "openid-gateway.publicHost" -}}
{{- (urlParse .Values.publicUrl).hostname -}}
{{- end -}}

{{- define "openid-gateway.appHost" -}}
{{- default (include "openid-gateway.publicHost" .) .Values.app.host -}}
{{- end -}}

{{- define "openid-gateway.appNamespace" -}}
{{- default .Release.Namespace .Values.app.namespace -}}
{{- end -}}

{{/* The gateway Service's cluster address: what ext_authz providers and auth-url name. */}}
{{- define "openid-gateway.serviceHost" -}}
{{- printf "%s.%s.svc.cluster.local" (include "openid-gateway.fullname" .) .Release.Namespace -}}
{{- end -}}

{{/* Whether the gateway serves the ext_authz gRPC port. */}}
{{- define "openid-gateway.grpc" -}}
{{- if or (and .Values.envoyGateway.enabled (eq .Values.envoyGateway.protocol "grpc")) .Values.istio.enabled -}}true{{- end -}}
{{- end -}}

{{/* Whether an Envoy ext_authz integration asks the gateway about every request. */}}
{{- define "openid-gateway.extAuthz" -}}
{{- if or .Values.envoyGateway.enabled .Values.httpRoute.enabled .Values.istio.enabled -}}true{{- end -}}
{{- end -}}

{{- define "openid-gateway.forwardAuth" -}}
{{- if or .Values.ingressNginx.enabled .Values.traefik.enabled -}}true{{- end -}}
{{- end -}}

{{/*
The narrowest domain covering both hosts (cookies.domain for forward-auth on two hosts): their
longest common suffix of whole labels. Empty when it would be a single label (a TLD).
*/}}
{{- define "openid-gateway.commonDomain" -}}
{{- $a := reverse (splitList "." (index . 0)) -}}
{{- $b := reverse (splitList "." (index . 1)) -}}
{{- $common := list -}}
{{- $same := true -}}
{{- range $i, $label := $a -}}
{{- if and $same (lt $i (len $b)) (eq $label (index $b $i)) -}}
{{- $common = prepend $common $label -}}
{{- else -}}
{{- $same = false -}}
{{- end -}}
{{- end -}}
{{- if ge (len $common) 2 -}}{{ join "." $common }}{{- end -}}
{{- end -}}

{{/*
The Redis URL with the password reference put in: redis://[user]:${REDIS_PASSWORD}@host:port/db.
*/}}
{{- define "openid-gateway.redisUrl" -}}
{{- $u := urlParse .Values.redis.url -}}
{{- if .Values.redis.auth -}}
{{- $user := "" -}}
{{- if $u.userinfo -}}{{- $user = first (splitList ":" $u.userinfo) -}}{{- end -}}
{{- printf "%s://%s:${REDIS_PASSWORD}@%s%s" $u.scheme $user $u.host $u.path -}}
{{- else -}}
{{- .Values.redis.url -}}
{{- end -}}
{{- end -}}

{{/*
The gateway configuration as a dict: .Values.config with what the chart owns filled in where
config leaves it out. Returned as YAML; callers use fromYaml.
*/}}
{{- define "openid-gateway.configDict" -}}
{{- $v := .Values -}}
{{- /* config's strings are templated (oauth2-proxy's chart templates its configuration file); a ${VARIABLE} is not template syntax and stays. */ -}}
{{- $c := dict -}}
{{- if $v.config -}}{{- $c = tpl (toYaml $v.config) . | fromYaml -}}{{- end -}}
{{- if and (hasKey $c "Error") (not (hasKey $v.config "Error")) -}}
{{- fail (printf "config is no longer YAML once templated: %s" $c.Error) -}}
{{- end -}}
{{- $server := get $c "server" | default (dict) -}}
{{- $_ := set $c "server" $server -}}
{{- if not (hasKey $server "host") -}}{{- $_ := set $server "host" "0.0.0.0" -}}{{- end -}}
{{- if not (hasKey $server "port") -}}{{- $_ := set $server "port" 8080 -}}{{- end -}}
{{- if not (hasKey $server "publicUrl") -}}{{- $_ := set $server "publicUrl" $v.publicUrl -}}{{- end -}}
{{- if and (eq $v.configReload "live") (not (hasKey $server "watchConfig")) -}}{{- $_ := set $server "watchConfig" true -}}{{- end -}}
{{- if and (include "openid-gateway.grpc" .) (not (hasKey $server "extAuthzGrpcPort")) -}}{{- $_ := set $server "extAuthzGrpcPort" $v.grpcPort -}}{{- end -}}
{{- if and (get $c "provider") $v.secrets.clientSecretKey -}}
{{- $provider := get $c "provider" -}}
{{- if not (hasKey $provider "clientSecret") -}}{{- $_ := set $provider "clientSecret" "${OIDC_CLIENT_SECRET}" -}}{{- end -}}
{{- end -}}
{{- $cookies := get $c "cookies" | default (dict) -}}
{{- $_ := set $c "cookies" $cookies -}}
{{- if not (hasKey $cookies "secrets") -}}
{{- $refs := list -}}
{{- range $i, $key := $v.secrets.cookieSecretKeys -}}
{{- $refs = append $refs (ternary "${COOKIE_SECRET}" (printf "${COOKIE_SECRET_%d}" (add1 $i)) (eq $i 0)) -}}
{{- end -}}
{{- $_ := set $cookies "secrets" $refs -}}
{{- end -}}
{{- $publicHost := include "openid-gateway.publicHost" . -}}
{{- $appHost := include "openid-gateway.appHost" . -}}
{{- if and (include "openid-gateway.forwardAuth" .) (ne $publicHost $appHost) -}}
{{- if not (hasKey $cookies "domain") -}}
{{- $domain := include "openid-gateway.commonDomain" (list $publicHost $appHost) -}}
{{- if $domain -}}{{- $_ := set $cookies "domain" $domain -}}{{- end -}}
{{- end -}}
{{- $redirects := get $c "redirects" | default (dict) -}}
{{- $_ := set $c "redirects" $redirects -}}
{{- if not (hasKey $redirects "allowedHosts") -}}{{- $_ := set $redirects "allowedHosts" (list $appHost) -}}{{- end -}}
{{- end -}}
{{- $session := get $c "session" | default (dict) -}}
{{- $_ := set $c "session" $session -}}
{{- if $v.redis.enabled -}}
{{- if not (hasKey $session "store") -}}{{- $_ := set $session "store" "redis" -}}{{- end -}}
{{- if $v.redis.url -}}
{{- $_ := set $session "redisUrl" (include "openid-gateway.redisUrl" .) -}}
{{- else -}}
{{- $redis := get $session "redis" | default (dict) -}}
{{- $_ := set $session "redis" $redis -}}
{{- if $v.redis.sentinels.nodes -}}
{{- $_ := set $redis "sentinels" (dict "name" $v.redis.sentinels.name "nodes" $v.redis.sentinels.nodes) -}}
{{- else -}}
{{- $_ := set $redis "cluster" (dict "nodes" $v.redis.cluster.nodes) -}}
{{- end -}}
{{- if $v.redis.auth -}}{{- $_ := set $redis "password" "${REDIS_PASSWORD}" -}}{{- end -}}
{{- if $v.redis.username -}}{{- $_ := set $redis "username" $v.redis.username -}}{{- end -}}
{{- if $v.redis.tls -}}{{- $_ := set $redis "tls" true -}}{{- end -}}
{{- end -}}
{{- else if not (hasKey $session "store") -}}
{{- /* Behind a check (ext_authz, forward-auth) a session refreshed during the check may never reach the browser: keep it on the gateway. */ -}}
{{- $_ := set $session "store" (ternary "memory" "cookie" (or (include "openid-gateway.extAuthz" .) (include "openid-gateway.forwardAuth" .) | empty | not)) -}}
{{- end -}}
{{- if include "openid-gateway.extAuthz" . -}}
{{- $fa := get $c "forwardAuth" | default (dict) -}}
{{- $_ := set $c "forwardAuth" $fa -}}
{{- if not (hasKey $fa "cache") -}}{{- $_ := set $fa "cache" (dict "enabled" true "ttlSeconds" 5) -}}{{- end -}}
{{- end -}}
{{- if not (hasKey $c "upstreams") -}}
{{- $target := printf "http://%s.%s.svc.cluster.local:%d" $v.app.serviceName (include "openid-gateway.appNamespace" .) (int $v.app.servicePort) -}}
{{- $_ := set $c "upstreams" (list (dict "name" "app" "match" (dict "hosts" (list $appHost) "pathPrefix" "/") "target" $target "auth" "required")) -}}
{{- end -}}
{{- toYaml $c -}}
{{- end -}}

{{- define "openid-gateway.configYaml" -}}
# The gateway configuration rendered by the chart openid-gateway (values: config). Every key is
# explained in docs/configuration.md; the secrets come from the Secret through environment variables.
{{ include "openid-gateway.configDict" . }}
{{ end -}}

{{/* The keys a live reload refuses (they take a restart): hashed into a pod annotation. */}}
{{- define "openid-gateway.restartKeys" -}}
{{- $c := include "openid-gateway.configDict" . | fromYaml -}}
{{- $s := $c.server | default (dict) -}}
{{- $session := $c.session | default (dict) -}}
{{- $server := pick $s "host" "port" "managementHost" "managementPort" "workers" "extAuthzGrpcPort" -}}
{{- $sess := pick $session "store" "redisUrl" "redis" "maxAgeSeconds" "memory" -}}
{{- toYaml (dict "server" $server "session" $sess) -}}
{{- end -}}

{{/* The Envoy ext_authz HTTP check's path: envoy.pathPrefix, else its deprecated former name forwardAuth.extAuthzPath, else the gateway's default. */}}
{{- define "openid-gateway.envoyPathPrefix" -}}
{{- $c := include "openid-gateway.configDict" . | fromYaml -}}
{{- dig "envoy" "pathPrefix" (dig "forwardAuth" "extAuthzPath" "/api/v1/openid/ext-authz" $c) $c -}}
{{- end -}}

{{/* The gateway's default identity header names (schema: upstreams[].identityHeaders). */}}
{{- define "openid-gateway.defaultIdentityHeaders" -}}
{{- toYaml (dict "user" "X-Forwarded-User" "email" "X-Forwarded-Email" "groups" "X-Forwarded-Groups" "preferredUsername" "X-Forwarded-Preferred-Username" "issuer" "X-Forwarded-Issuer" "acr" "X-Forwarded-Acr" "amr" "X-Forwarded-Amr" "authTime" "X-Forwarded-Auth-Time") -}}
{{- end -}}

{{/*
What an ext_authz check's answer sets on the request to the application, lower-case: every
upstream's identity headers (its identityHeaders over the defaults) and claimHeaders, authorization
for forwardAccessToken, tokenExchange, forwardIdToken or forwardBasicAuth, x-forwarded-access-token
and x-auth-request-access-token for forwardAccessTokenHeader, the assertion header for
identityAssertion, txn-token for transactionTokens, and cookie
(the client's cookies minus the gateway's own). allowed_upstream_headers must list them all.
*/}}
{{- define "openid-gateway.upstreamHeaders" -}}
{{- $c := include "openid-gateway.configDict" . | fromYaml -}}
{{- $defaults := include "openid-gateway.defaultIdentityHeaders" . | fromYaml -}}
{{- $names := list -}}
{{- range $u := $c.upstreams -}}
{{- $headers := merge (deepCopy (default (dict) $u.identityHeaders)) $defaults -}}
{{- range $k := list "user" "email" "groups" "preferredUsername" "issuer" "acr" "amr" "authTime" -}}{{- $names = append $names (lower (get $headers $k)) -}}{{- end -}}
{{- if kindIs "map" $u.claimHeaders -}}{{- range $name, $_ := $u.claimHeaders -}}{{- $names = append $names (lower $name) -}}{{- end -}}{{- end -}}
{{- if or $u.forwardAccessToken $u.tokenExchange $u.forwardIdToken $u.forwardBasicAuth -}}{{- $names = append $names "authorization" -}}{{- end -}}
{{- if $u.forwardAccessTokenHeader -}}{{- $names = concat $names (list "x-forwarded-access-token" "x-auth-request-access-token") -}}{{- end -}}
{{- if $u.identityAssertion -}}{{- $names = append $names (lower (dig "assertions" "header" "X-Identity-Assertion" $c)) -}}{{- end -}}
{{- if $u.transactionTokens -}}{{- $names = append $names "txn-token" -}}{{- end -}}
{{- end -}}
{{- toYaml (append $names "cookie" | uniq) -}}
{{- end -}}

{{/*
What the check needs from the client besides Host, Method, Path and Content-Length: cookie (the
session), accept and sec-fetch-mode (a navigation gets 302 to the sign-in, a program 401),
x-forwarded-proto (the scheme of redirectAfter), authorization (Bearer tokens; some proxies send
it unasked, a listed gRPC check only what it names); and, when an upstream lets CORS preflights
through (allowPreflight), origin and access-control-request-method: a preflight is an OPTIONS
request carrying both (the Fetch standard's CORS-preflight request), and a check that never sees
them decides every preflight as an ordinary OPTIONS, which needs a sign-in.
*/}}
{{- define "openid-gateway.checkHeaders" -}}
{{- $c := include "openid-gateway.configDict" . | fromYaml -}}
{{- $names := list "cookie" "accept" "sec-fetch-mode" "x-forwarded-proto" "authorization" -}}
{{- $preflight := false -}}
{{- range $u := $c.upstreams -}}{{- if $u.allowPreflight -}}{{- $preflight = true -}}{{- end -}}{{- end -}}
{{- if $preflight -}}{{- $names = concat $names (list "origin" "access-control-request-method") -}}{{- end -}}
{{- toYaml $names -}}
{{- end -}}

{{/*
What forward-auth's 200 carries and the ingress copies onto the request (checks/forward-auth.ts's
X-Auth-Request-* identity headers, each upstream's claimHeaders under their own names, the access
token with forwardAccessToken, tokenExchange or forwardAccessTokenHeader, Authorization with
tokenExchange, forwardIdToken or forwardBasicAuth, the assertion header (assertions.header) with
identityAssertion, Txn-Token with transactionTokens), then the request-target and method overrides
the gateway's proxy strips (proxy/header-policy.ts): the answer never carries those, so the ingress
removes the client's copy. An ingress removes the client's copy of every header it copies (Traefik
deletes a listed header the answer lacks, ingress-nginx sets it empty): a header missing here is one
a client forges past the edge. Each name once, whatever its case.
*/}}
{{- define "openid-gateway.answerHeaders" -}}
{{- $c := include "openid-gateway.configDict" . | fromYaml -}}
{{- $names := list "X-Auth-Request-User" "X-Auth-Request-Email" "X-Auth-Request-Groups" "X-Auth-Request-Preferred-Username" "X-Auth-Request-Issuer" "X-Auth-Request-Acr" "X-Auth-Request-Amr" "X-Auth-Request-Auth-Time" -}}
{{- range $u := $c.upstreams -}}
{{- if kindIs "map" $u.claimHeaders -}}{{- range $name, $_ := $u.claimHeaders -}}{{- $names = append $names $name -}}{{- end -}}{{- end -}}
{{- if or $u.forwardAccessToken $u.tokenExchange $u.forwardAccessTokenHeader -}}{{- $names = append $names "X-Auth-Request-Access-Token" -}}{{- end -}}
{{- if or $u.tokenExchange $u.forwardIdToken $u.forwardBasicAuth -}}{{- $names = append $names "Authorization" -}}{{- end -}}
{{- if $u.identityAssertion -}}{{- $names = append $names (dig "assertions" "header" "X-Identity-Assertion" $c) -}}{{- end -}}
{{- if $u.transactionTokens -}}{{- $names = append $names "Txn-Token" -}}{{- end -}}
{{- end -}}
{{- $overrides := list "X-Original-URL" "X-Original-URI" "X-Original-Method" "X-Original-Host" "X-Rewrite-URL" "X-Override-URL" "X-Envoy-Original-Path" "X-HTTP-Method-Override" "X-HTTP-Method" "X-Method-Override" -}}
{{- $seen := dict -}}
{{- $once := list -}}
{{- range $name := $names -}}{{- if not (hasKey $seen (lower $name)) -}}{{- $_ := set $seen (lower $name) true -}}{{- $once = append $once $name -}}{{- end -}}{{- end -}}
{{- toYaml (concat $once $overrides) -}}
{{- end -}}

{{/*
The cookies the gateway sets for a session (src/session/cookies.ts): the session cookie on Path=/
and the credentials cookie, each under its name and its chunks' names (<name>_1 up to MAX_CHUNKS
cookies, 3). cookies.secure adds __Host- to the session cookie (and to the credentials cookie on
credentialsPath /), or __Secure- when cookies.domain is set; the credentials cookie on another
path can only carry __Secure-. test/chart/integrations-match-gateway.test.ts holds this list to
the names the gateway's own code clears for both roles.
*/}}
{{- define "openid-gateway.sessionCookies" -}}
{{- $c := include "openid-gateway.configDict" . | fromYaml -}}
{{- $cookies := $c.cookies | default (dict) -}}
{{- $name := toString (dig "name" "ogw" $cookies) -}}
{{- $secure := ternary $cookies.secure true (hasKey $cookies "secure") -}}
{{- $host := "" -}}
{{- if $secure -}}{{- $host = ternary "__Secure-" "__Host-" (not (empty $cookies.domain)) -}}{{- end -}}
{{- $credentials := printf "%s%s_cred" (ternary $host (ternary "__Secure-" "" $secure) (eq (toString (dig "credentialsPath" "/" $cookies)) "/")) $name -}}
{{- $names := list -}}
{{- range $base := list (printf "%s%s" $host $name) $credentials -}}
{{- $names = concat $names (list $base (printf "%s_1" $base) (printf "%s_2" $base)) -}}
{{- end -}}
{{- toYaml $names -}}
{{- end -}}

{{/*
Combinations the chart refuses, each naming the value to change. Included by the Deployment so
that every render runs them.
*/}}
{{- define "openid-gateway.validate" -}}
{{- $v := .Values -}}
{{- if not $v.publicUrl -}}
{{- fail "publicUrl is required: the gateway's public origin, e.g. https://app.example.com" -}}
{{- end -}}
{{- include "openid-gateway.refuseLiteralSecrets" . -}}
{{- include "openid-gateway.refuseRootWithNonRoot" . -}}
{{- if and (or $v.ingress.enabled $v.gatewayApi.enabled) (include "openid-gateway.checkIntegration" .) -}}
{{- fail (printf "%s is proxy mode (every request through the gateway) and cannot go with a check integration (ingressNginx, traefik, httpRoute, envoyGateway or istio), which routes the same hosts to the application: enable one" (ternary "ingress.enabled" "gatewayApi.enabled" (not (empty $v.ingress.enabled)))) -}}
{{- end -}}
{{- if and $v.ingress.enabled $v.gatewayApi.enabled -}}
{{- fail "ingress.enabled and gatewayApi.enabled both route publicUrl's host to the gateway: enable one" -}}
{{- end -}}
{{- if and $v.gatewayApi.enabled (not $v.gatewayApi.gatewayRef.name) -}}
{{- fail "gatewayApi.gatewayRef.name is required: the Gateway the route attaches to" -}}
{{- end -}}
{{- if and (not $v.existingConfigMap) (not (or $v.config.provider $v.config.providers)) -}}
{{- fail "config.provider is required (issuer and clientId), or config.providers, or existingConfigMap" -}}
{{- end -}}
{{- if and (not $v.secrets.existingSecret) (not $v.secrets.cookieSecrets) -}}
{{- fail "secrets.existingSecret or secrets.cookieSecrets is required: the cookie secret must stay the same across restarts and replicas, so the chart never generates one" -}}
{{- end -}}
{{- if and (not $v.secrets.existingSecret) (ne (len $v.secrets.cookieSecrets) (len $v.secrets.cookieSecretKeys)) -}}
{{- fail (printf "secrets.cookieSecrets has %d values but secrets.cookieSecretKeys names %d keys" (len $v.secrets.cookieSecrets) (len $v.secrets.cookieSecretKeys)) -}}
{{- end -}}
{{- if and (not $v.secrets.existingSecret) $v.secrets.clientSecretKey (not $v.secrets.clientSecret) -}}
{{- fail "secrets.clientSecret is required with a chart-created Secret (or secrets.existingSecret, or secrets.clientSecretKey \"\" for a client without a secret)" -}}
{{- end -}}
{{- if and $v.redis.enabled $v.redis.auth (not $v.secrets.existingSecret) (not $v.secrets.redisPassword) -}}
{{- fail "secrets.redisPassword is required with redis.auth (or secrets.existingSecret with the key secrets.redisPasswordKey, or redis.auth false)" -}}
{{- end -}}
{{- if $v.redis.enabled -}}
{{- $ways := 0 -}}
{{- if $v.redis.url -}}{{- $ways = add1 $ways -}}{{- end -}}
{{- if $v.redis.sentinels.nodes -}}{{- $ways = add1 $ways -}}{{- end -}}
{{- if $v.redis.cluster.nodes -}}{{- $ways = add1 $ways -}}{{- end -}}
{{- if ne $ways 1 -}}
{{- fail "redis.enabled needs exactly one of redis.url, redis.sentinels.nodes (with redis.sentinels.name) or redis.cluster.nodes" -}}
{{- end -}}
{{- if and $v.redis.sentinels.nodes (not $v.redis.sentinels.name) -}}
{{- fail "redis.sentinels.name is required with redis.sentinels.nodes" -}}
{{- end -}}
{{- end -}}
{{- if and $v.autoscaling.enabled (gt (int $v.autoscaling.minReplicas) (int $v.autoscaling.maxReplicas)) -}}
{{- fail (printf "autoscaling.minReplicas (%d) exceeds autoscaling.maxReplicas (%d)" (int $v.autoscaling.minReplicas) (int $v.autoscaling.maxReplicas)) -}}
{{- end -}}
{{- $replicas := ternary $v.autoscaling.maxReplicas $v.replicaCount $v.autoscaling.enabled -}}
{{- if gt (int $replicas) 1 -}}
{{- $shared := $v.redis.enabled -}}
{{- if not $v.existingConfigMap -}}
{{- $session := $v.config.session | default (dict) -}}
{{- if or (eq (toString $session.store) "redis") $session.redisUrl $session.redis -}}{{- $shared = true -}}{{- end -}}
{{- end -}}
{{- if not $shared -}}
{{- fail (printf "%s is %d but sessions are not shared: set redis.enabled (with redis.url, redis.sentinels or redis.cluster). Without Redis a back-channel logout reaches only the replica that receives it, and memory sessions live in one process" (ternary "autoscaling.maxReplicas" "replicaCount" $v.autoscaling.enabled) (int $replicas)) -}}
{{- end -}}
{{- end -}}
{{- if and $v.envoyGateway.enabled $v.httpRoute.enabled -}}
{{- fail "envoyGateway.enabled and httpRoute.enabled both render the application's HTTPRoute: enable one (Envoy Gateway: envoyGateway; another Gateway API implementation with GEP-1494: httpRoute)" -}}
{{- end -}}
{{- if and $v.ingressNginx.enabled $v.traefik.enabled -}}
{{- fail "ingressNginx.enabled and traefik.enabled both render the application's Ingress: enable one" -}}
{{- end -}}
{{- if and $v.envoyGateway.enabled (not $v.envoyGateway.parentRefs) -}}
{{- fail "envoyGateway.parentRefs is required: the Gateway the routes attach to" -}}
{{- end -}}
{{- if and $v.httpRoute.enabled (not $v.httpRoute.parentRefs) -}}
{{- fail "httpRoute.parentRefs is required: the Gateway the routes attach to" -}}
{{- end -}}
{{- if and $v.istio.virtualService.enabled (not $v.istio.virtualService.gateways) -}}
{{- fail "istio.virtualService.gateways is required with istio.virtualService.enabled" -}}
{{- end -}}
{{- if not $v.existingConfigMap -}}
{{- $c := include "openid-gateway.configDict" . | fromYaml -}}
{{- $store := toString $c.session.store -}}
{{- if and (eq $store "cookie") (or (and $v.envoyGateway.enabled (eq $v.envoyGateway.protocol "http")) $v.httpRoute.enabled) -}}
{{- fail "config.session.store cookie cannot work behind envoyGateway (protocol http) or httpRoute: their HTTP check has no list of answer headers for the client, so a session refreshed during a check never reaches the browser. Use memory (one replica) or redis" -}}
{{- end -}}
{{- if and (include "openid-gateway.grpc" .) (ne (int (dig "server" "extAuthzGrpcPort" 0 $c)) (int $v.grpcPort)) -}}
{{- fail "config.server.extAuthzGrpcPort must equal grpcPort (the container and Service port the gRPC integration names)" -}}
{{- end -}}
{{- if and (include "openid-gateway.forwardAuth" .) (ne (include "openid-gateway.publicHost" .) (include "openid-gateway.appHost" .)) -}}
{{- $domain := toString (dig "cookies" "domain" "" $c) -}}
{{- $app := include "openid-gateway.appHost" . -}}
{{- $public := include "openid-gateway.publicHost" . -}}
{{- if or (not $domain) (not (hasSuffix (printf ".%s" $domain) (printf ".%s" $app))) (not (hasSuffix (printf ".%s" $domain) (printf ".%s" $public))) -}}
{{- fail (printf "config.cookies.domain must cover both app.host (%s) and publicUrl's host (%s): the session cookie is set on one and the check reads it on the other" $app $public) -}}
{{- end -}}
{{- end -}}
{{- $port := int (dig "server" "port" 8080 $c) -}}
{{- if ne $port 8080 -}}
{{- fail "config.server.port must stay 8080: the container port, the Service and every integration use it" -}}
{{- end -}}
{{- if ne (int (dig "server" "managementPort" 9091 $c)) 9091 -}}
{{- fail "config.server.managementPort must stay 9091: the probes, the Service's metrics port and the ServiceMonitor use it" -}}
{{- end -}}
{{- $drain := div (int (dig "server" "shutdownTimeoutMs" 10000 $c)) 1000 -}}
{{- if lt (int $v.terminationGracePeriodSeconds) (add (int $v.preStopSleepSeconds) $drain 3) -}}
{{- fail (printf "terminationGracePeriodSeconds (%d) must cover preStopSleepSeconds (%d), server.shutdownTimeoutMs (%d s) and 3 s to exit" (int $v.terminationGracePeriodSeconds) (int $v.preStopSleepSeconds) $drain) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Secrets never in the ConfigMap: a value under config that mask.ts masks (src/config/mask.ts: the
client secret, cookie secrets, inline private keys, Redis passwords and SSF credentials) must be
a ${VARIABLE} reference (a key may also be a file's path). The ConfigMap is readable with
Kubernetes' built-in view role; anyone who reads a cookie secret can forge a session for any user.
Each refusal names the key and the value to use instead, never the secret.
*/}}
{{- define "openid-gateway.isReference" -}}
{{- /* null holds no secret (the gateway's validation decides about it). */ -}}
{{- if or (kindIs "invalid" .) (regexMatch "^(\\$\\{[A-Za-z_][A-Za-z0-9_]*\\})+$" (toString .)) -}}true{{- end -}}
{{- end -}}

{{/* An inline private key (PEM, a JWK, base64 of a PEM, or text that cannot be a path), as src/keys/private-key.ts tells one from a path. */}}
{{- define "openid-gateway.isInlineKey" -}}
{{- $k := toString . | trim -}}
{{- if and (not (include "openid-gateway.isReference" $k)) (or (regexMatch "(?m)^-----BEGIN [A-Z0-9 ]+-----$" $k) (hasPrefix "{" $k) (hasPrefix "LS0tLS1CRUdJ" $k) (contains "\n" $k) (gt (len $k) 4096)) -}}true{{- end -}}
{{- end -}}

{{- define "openid-gateway.refuseLiteralSecrets" -}}
{{- $c := .Values.config | default (dict) -}}
{{- $providers := list -}}
{{- if kindIs "map" $c.provider -}}{{- $providers = append $providers (list "config.provider" $c.provider true) -}}{{- end -}}
{{- if kindIs "slice" $c.providers -}}
{{- range $i, $p := $c.providers -}}
{{- if kindIs "map" $p -}}{{- $providers = append $providers (list (printf "config.providers[%d]" $i) $p false) -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- $fromEnv := "a ${VARIABLE} that extraEnv (valueFrom.secretKeyRef) or envFrom (secretRef) sets from a Secret" -}}
{{- range $entry := $providers -}}
{{- $where := index $entry 0 -}}
{{- $p := index $entry 1 -}}
{{- if and (hasKey $p "clientSecret") (not (include "openid-gateway.isReference" $p.clientSecret)) -}}
{{- if index $entry 2 -}}
{{- fail (printf "%s.clientSecret is written in the values and would be in the ConfigMap, readable with Kubernetes' view role: leave it out (the chart sets ${OIDC_CLIENT_SECRET} from the Secret: secrets.clientSecret, or the key secrets.clientSecretKey of secrets.existingSecret), or write %s" $where $fromEnv) -}}
{{- else -}}
{{- fail (printf "%s.clientSecret is written in the values and would be in the ConfigMap, readable with Kubernetes' view role: write %s" $where $fromEnv) -}}
{{- end -}}
{{- end -}}
{{- if and (hasKey $p "clientKey") (include "openid-gateway.isInlineKey" $p.clientKey) -}}
{{- fail (printf "%s.clientKey is a private key written in the values and would be in the ConfigMap, readable with Kubernetes' view role: put it in the Secret (secrets.files, or a key of secrets.existingSecret), set secrets.mount: true and write its path /etc/openid-gateway-secrets/<key>, or write %s" $where $fromEnv) -}}
{{- end -}}
{{- $ssf := $p.ssf | default (dict) -}}
{{- if kindIs "map" $ssf -}}
{{- range $key := list "authorization" "bearerToken" -}}
{{- if and (hasKey $ssf $key) (not (include "openid-gateway.isReference" (get $ssf $key))) -}}
{{- fail (printf "%s.ssf.%s is written in the values and would be in the ConfigMap, readable with Kubernetes' view role: write %s (the whole value, in the Secret)" $where $key $fromEnv) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $cookies := $c.cookies | default (dict) -}}
{{- if and (kindIs "map" $cookies) (hasKey $cookies "secrets") -}}
{{- range $i, $secret := (kindIs "slice" $cookies.secrets | ternary $cookies.secrets (list $cookies.secrets)) -}}
{{- if not (include "openid-gateway.isReference" $secret) -}}
{{- fail (printf "config.cookies.secrets[%d] is written in the values and would be in the ConfigMap, readable with Kubernetes' view role (and whoever reads a cookie secret can forge a session for any user): leave config.cookies.secrets out (the chart sets ${COOKIE_SECRET}, ${COOKIE_SECRET_2}, ... from the Secret: secrets.cookieSecrets, or the keys secrets.cookieSecretKeys of secrets.existingSecret), or write %s" $i $fromEnv) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $assertions := $c.assertions | default (dict) -}}
{{- if and (kindIs "map" $assertions) (kindIs "slice" $assertions.signingKeys) -}}
{{- range $i, $key := $assertions.signingKeys -}}
{{- if include "openid-gateway.isInlineKey" $key -}}
{{- fail (printf "config.assertions.signingKeys[%d] is a private key written in the values and would be in the ConfigMap, readable with Kubernetes' view role: put it in the Secret (secrets.files, or a key of secrets.existingSecret), set secrets.mount: true and write its path /etc/openid-gateway-secrets/<key>, or write %s" $i $fromEnv) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if kindIs "slice" $c.upstreams -}}
{{- range $i, $u := $c.upstreams -}}
{{- if and (kindIs "map" $u) (kindIs "map" $u.forwardBasicAuth) -}}
{{- if and (hasKey $u.forwardBasicAuth "password") (not (include "openid-gateway.isReference" $u.forwardBasicAuth.password)) -}}
{{- fail (printf "config.upstreams[%d].forwardBasicAuth.password is written in the values and would be in the ConfigMap, readable with Kubernetes' view role: write %s, or put it in the Secret (secrets.files, or a key of secrets.existingSecret), set secrets.mount: true and write passwordFile: /etc/openid-gateway-secrets/<key>" $i $fromEnv) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $session := $c.session | default (dict) -}}
{{- if kindIs "map" $session -}}
{{- if $session.redisUrl -}}
{{- /* As mask.ts masks it: the password, else a lone user (read as a password by older clients), and parameters named like a password, secret or token. */ -}}
{{- $url := toString $session.redisUrl -}}
{{- $userinfo := regexReplaceAll "^[A-Za-z][A-Za-z0-9+.-]*://" (regexFind "^[A-Za-z][A-Za-z0-9+.-]*://[^@/?#]*@" $url | trimSuffix "@") "" -}}
{{- $credential := ternary (rest (splitList ":" $userinfo) | join ":") $userinfo (contains ":" $userinfo) -}}
{{- $literal := and $credential (not (include "openid-gateway.isReference" $credential)) -}}
{{- $query := regexFind "\\?[^#]*" $url | trimPrefix "?" -}}
{{- range $parameter := splitList "&" $query -}}
{{- $pair := splitList "=" $parameter -}}
{{- if and (regexMatch "(?i)pass|secret|token" (first $pair)) (gt (len $pair) 1) (not (include "openid-gateway.isReference" (rest $pair | join "="))) -}}{{- $literal = true -}}{{- end -}}
{{- end -}}
{{- if $literal -}}
{{- fail "config.session.redisUrl carries a password written in the values and would be in the ConfigMap, readable with Kubernetes' view role: use redis.enabled with redis.url without the password (the chart adds ${REDIS_PASSWORD} from the Secret: secrets.redisPassword, or the key secrets.redisPasswordKey of secrets.existingSecret), or write a ${VARIABLE} in its place (rediss://:${REDIS_PASSWORD}@host:6379/0) that extraEnv or envFrom sets from a Secret" -}}
{{- end -}}
{{- end -}}
{{- $redis := $session.redis | default (dict) -}}
{{- if kindIs "map" $redis -}}
{{- if and (hasKey $redis "password") (not (include "openid-gateway.isReference" $redis.password)) -}}
{{- fail (printf "config.session.redis.password is written in the values and would be in the ConfigMap, readable with Kubernetes' view role: use redis.auth (the chart sets ${REDIS_PASSWORD} from the Secret: secrets.redisPassword, or the key secrets.redisPasswordKey of secrets.existingSecret), or write %s" $fromEnv) -}}
{{- end -}}
{{- $sentinels := $redis.sentinels | default (dict) -}}
{{- if and (kindIs "map" $sentinels) (hasKey $sentinels "password") (not (include "openid-gateway.isReference" $sentinels.password)) -}}
{{- fail (printf "config.session.redis.sentinels.password is written in the values and would be in the ConfigMap, readable with Kubernetes' view role: write %s" $fromEnv) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
A container of extraContainers or extraInitContainers that runs as root (runAsUser 0) while
runAsNonRoot holds for it (its own, else podSecurityContext's): the kubelet would refuse to start
it, long after the install. Its own securityContext can relax runAsNonRoot; the gateway's stays.
*/}}
{{- define "openid-gateway.refuseRootWithNonRoot" -}}
{{- $pod := .Values.podSecurityContext | default (dict) -}}
{{- range $list := list "extraContainers" "extraInitContainers" -}}
{{- range $i, $container := (get $.Values $list | default (list)) -}}
{{- $sc := $container.securityContext | default (dict) -}}
{{- $user := ternary $sc.runAsUser $pod.runAsUser (hasKey $sc "runAsUser") -}}
{{- $nonRoot := ternary $sc.runAsNonRoot $pod.runAsNonRoot (hasKey $sc "runAsNonRoot") -}}
{{- if and $nonRoot (not (kindIs "invalid" $user)) (eq (int $user) 0) -}}
{{- fail (printf "%s[%d] (%s) runs as root (runAsUser 0) but runAsNonRoot is true for it (%s): the kubelet would refuse to start it. Set runAsNonRoot: false in its own securityContext (the gateway's container stays non-root)" $list $i $container.name (ternary "its securityContext" "podSecurityContext" (hasKey $sc "runAsNonRoot"))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
