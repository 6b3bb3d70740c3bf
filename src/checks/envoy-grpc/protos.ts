import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { loadSync, type MethodDefinition, type Options, type PackageDefinition, type ServiceDefinition } from '@grpc/proto-loader'
import protobuf from 'protobufjs'

// The .proto files of the ext_authz service (protos/, trimmed copies of Envoy's, googleapis' and
// gRPC's with their package names and field numbers: see each file's header), found next to this
// module: src/checks/envoy-grpc/protos under the tests, build/checks/envoy-grpc/protos once built (the build
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

export interface EnvoyGrpcServices {
  authorization: ServiceDefinition
  health: ServiceDefinition
}

function service(definition: PackageDefinition, name: string): ServiceDefinition {
  const found = definition[name]
  // Message and enum definitions carry `format`; a service is a map of methods.
  if (found === undefined || 'format' in found) throw new Error(`${name} is not a service of ${PROTO_DIR}`)
  return found
}

export function loadEnvoyGrpcServices(): EnvoyGrpcServices {
  const definition = loadSync([...PROTO_FILES], LOADER_OPTIONS)
  return { authorization: service(definition, AUTHORIZATION_SERVICE), health: service(definition, HEALTH_SERVICE) }
}

/**
 * The service definition of Authorization as the server runs it: Check's request decoded and its
 * response encoded by protobufjs directly. proto-loader's codec converts every message through
 * toObject and fromObject (a plain copy of each message with its defaults filled in, then a
 * message built back from it): an eighth of the service's time per check. The service reads the
 * decoded request as `unknown` anyway (check-input.ts: a missing message field is null, a missing
 * scalar its default, either way), and builds its response with the proto's field names and
 * types (check-response.ts), which protobufjs encodes as they are.
 */
export function serverAuthorizationService(authorization: ServiceDefinition): ServiceDefinition {
  const root = new protobuf.Root()
  root.resolvePath = (_origin, target) => join(PROTO_DIR, target)
  root.loadSync([...PROTO_FILES], { keepCase: true })
  const request = root.lookupType('envoy.service.auth.v3.CheckRequest')
  const response = root.lookupType('envoy.service.auth.v3.CheckResponse')
  const check = authorization.Check as MethodDefinition<object, object>
  return {
    ...authorization,
    Check: {
      ...check,
      requestDeserialize: (bytes: Buffer): object => request.decode(bytes),
      responseSerialize: (value: object): Buffer => {
        const bytes = response.encode(value).finish()
        return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length)
      },
    },
  }
}
