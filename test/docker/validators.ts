import { readFileSync } from 'node:fs'
import { Ajv, type ValidateFunction } from 'ajv'
import { Deployment } from 'kubernetes-models/apps/v1/Deployment'
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler'
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress'
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget'
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap'
import { Service } from 'kubernetes-models/v1/Service'
import { Middleware } from '@kubernetes-models/traefik/traefik.io/v1alpha1/Middleware'
import { HTTPRoute } from '@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1/HTTPRoute'
import { HTTPExternalAuthFilter } from '@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1/HTTPExternalAuthFilter'
import { AuthorizationPolicy } from '@kubernetes-models/istio/security.istio.io/v1/AuthorizationPolicy'
import { VirtualService } from '@kubernetes-models/istio/networking.istio.io/v1/VirtualService'
import YAML from 'yaml'

// How each kind found in docker/k8s is validated. Core kinds, Traefik's Middleware, Istio's
// AuthorizationPolicy and VirtualService, and standard-channel HTTPRoutes: the kubernetes-models
// packages. Kinds those packages do not cover, against the published CRD schema committed in
// test/fixtures/crds (see each file's header): Envoy Gateway's SecurityPolicy, and HTTPRoutes with
// the experimental ExternalAuth filter (the model's filter type enum is the standard channel's).
// A kind missing here has no validator, and the manifests test fails on it.

type Validator = (object: unknown) => void

const FIXTURES = new URL('../fixtures/crds/', import.meta.url)

/** The x-kubernetes-* vocabulary of structural schemas: annotations for ajv, never checked. */
const KUBERNETES_KEYWORDS = [
  'x-kubernetes-validations',
  'x-kubernetes-list-type',
  'x-kubernetes-list-map-keys',
  'x-kubernetes-map-type',
  'x-kubernetes-preserve-unknown-fields',
  'x-kubernetes-int-or-string',
  'x-kubernetes-embedded-resource',
]

// strictSchema stays on (an unknown keyword is an error); CRD schemas put pattern and enum under allOf
// without repeating the type, which strictTypes would refuse.
const ajv = new Ajv({ allErrors: true, strictSchema: true, strictTypes: false, strictTuples: false, strictRequired: false, unicodeRegExp: false })
for (const keyword of KUBERNETES_KEYWORDS) ajv.addKeyword({ keyword })
ajv.addFormat('int32', { type: 'number', validate: (n: number) => Number.isInteger(n) && n >= -(2 ** 31) && n < 2 ** 31 })
ajv.addFormat('int64', { type: 'number', validate: (n: number) => Number.isInteger(n) })
ajv.addFormat('byte', /^[A-Za-z0-9+/]*={0,2}$/)
ajv.addFormat('date-time', true)

type Schema = Record<string, unknown>

/**
 * The API server prunes fields a structural schema does not declare, silently: a misspelled
 * `headersToExtAuht` would vanish and the check would go without cookies. Here an undeclared
 * field is an error instead (additionalProperties: false wherever the schema lists properties and
 * neither keeps unknown fields nor says otherwise).
 */
function closed(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closed)
  if (schema === null || typeof schema !== 'object') return schema
  const out: Schema = {}
  for (const [key, value] of Object.entries(schema as Schema)) {
    out[key] = key === 'properties' ? Object.fromEntries(Object.entries(value as Schema).map(([p, s]) => [p, closed(s)])) : closed(value)
  }
  if (out.properties !== undefined && out.additionalProperties === undefined && out['x-kubernetes-preserve-unknown-fields'] !== true) {
    out.additionalProperties = false
  }
  return out
}

export function fixtureSchema(file: string): Schema {
  return YAML.parse(readFileSync(new URL(file, FIXTURES), 'utf8')) as Schema
}

export function schemaValidator(schema: Schema): ValidateFunction {
  return ajv.compile(closed(schema) as Schema)
}

function bySchema(validate: ValidateFunction): Validator {
  return (object) => {
    if (!validate(object)) throw new Error(ajv.errorsText(validate.errors, { separator: '; ' }))
  }
}

function byModel(Model: new (data: never) => { validate(): void }): Validator {
  return (object) => new Model(object as never).validate()
}

const securityPolicySchema = bySchema(schemaValidator(fixtureSchema('envoy-gateway-securitypolicy.v1alpha1.schema.yaml')))
const experimentalHTTPRoute = bySchema(schemaValidator(fixtureSchema('gateway-api-httproute.v1.experimental.schema.yaml')))

type ExtAuth = { http?: { backendRef?: unknown; backendRefs?: unknown[] }; grpc?: { backendRef?: unknown; backendRefs?: unknown[] } }

/** The CRD's CEL rules on extAuth (ext_auth_types.go), which ajv cannot evaluate. */
function securityPolicy(object: unknown): void {
  securityPolicySchema(object)
  const extAuth = (object as { spec?: { extAuth?: ExtAuth } }).spec?.extAuth
  if (extAuth === undefined) return
  if ((extAuth.http === undefined) === (extAuth.grpc === undefined)) throw new Error('extAuth: exactly one of grpc or http must be specified')
  const service = extAuth.http ?? extAuth.grpc
  if (service?.backendRef === undefined && (service?.backendRefs?.length ?? 0) === 0) throw new Error('extAuth: backendRef or backendRefs needs to be set')
}

type RouteFilter = { type: string; externalAuth?: unknown }
export function routeFilters(route: unknown): RouteFilter[] {
  const rules = (route as { spec?: { rules?: { filters?: RouteFilter[] }[] } }).spec?.rules ?? []
  return rules.flatMap((r) => r.filters ?? [])
}

function httpRoute(object: unknown): void {
  experimentalHTTPRoute(object)
  const filters = routeFilters(object)
  if (!filters.some((f) => f.type === 'ExternalAuth')) {
    byModel(HTTPRoute)(object)
    return
  }
  for (const filter of filters) if (filter.externalAuth !== undefined) new HTTPExternalAuthFilter(filter.externalAuth as never).validate()
}

export const VALIDATORS: Record<string, Validator> = {
  'apps/v1/Deployment': byModel(Deployment),
  'autoscaling/v2/HorizontalPodAutoscaler': byModel(HorizontalPodAutoscaler),
  'networking.k8s.io/v1/Ingress': byModel(Ingress),
  'policy/v1/PodDisruptionBudget': byModel(PodDisruptionBudget),
  'v1/ConfigMap': byModel(ConfigMap),
  'v1/Service': byModel(Service),
  'traefik.io/v1alpha1/Middleware': byModel(Middleware),
  'gateway.networking.k8s.io/v1/HTTPRoute': httpRoute,
  'gateway.envoyproxy.io/v1alpha1/SecurityPolicy': securityPolicy,
  'security.istio.io/v1/AuthorizationPolicy': byModel(AuthorizationPolicy),
  'networking.istio.io/v1/VirtualService': byModel(VirtualService),
}
