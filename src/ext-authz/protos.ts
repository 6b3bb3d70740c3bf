import { fileURLToPath } from 'node:url'
import { loadSync, type Options, type PackageDefinition, type ServiceDefinition } from '@grpc/proto-loader'

// The .proto files of the ext_authz service (protos/, trimmed copies of Envoy's, googleapis' and
// gRPC's with their package names and field numbers: see each file's header), found next to this
// module: src/ext-authz/protos under the tests, build/ext-authz/protos once built (the build
// script copies them, tsc does not). The service and the test client load them with the same
// options, so both sides see messages of one shape.

export const PROTO_DIR = fileURLToPath(new URL('./protos/', import.meta.url))

export const PROTO_FILES = ['envoy/service/auth/v3/external_auth.proto', 'grpc/health/v1/health.proto'] as const

/**
 * Field names as in the .proto (`ok_response`, `append_action`), as Envoy's documentation spells
 * them; enums as numbers (an HTTP status is its number); absent fields decoded as their defaults,
 * so that code 0 (OK) and action 0 (APPEND_IF_EXISTS_OR_ADD) read as 0, not as missing; the
 * name of the set member of a oneof in a virtual field (`http_response`).
 */
export const LOADER_OPTIONS: Options = {
  keepCase: true,
  longs: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_DIR],
}

export const AUTHORIZATION_SERVICE = 'envoy.service.auth.v3.Authorization'
export const HEALTH_SERVICE = 'grpc.health.v1.Health'

export interface ExtAuthzServices {
  authorization: ServiceDefinition
  health: ServiceDefinition
}

function service(definition: PackageDefinition, name: string): ServiceDefinition {
  const found = definition[name]
  // Message and enum definitions carry `format`; a service is a map of methods.
  if (found === undefined || 'format' in found) throw new Error(`${name} is not a service of ${PROTO_DIR}`)
  return found as ServiceDefinition
}

export function loadExtAuthzServices(): ExtAuthzServices {
  const definition = loadSync([...PROTO_FILES], LOADER_OPTIONS)
  return { authorization: service(definition, AUTHORIZATION_SERVICE), health: service(definition, HEALTH_SERVICE) }
}
