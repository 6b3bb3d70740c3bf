import t from 'tap'
import YAML from 'yaml'
import { kustomize } from '../fixtures/kustomize.ts'
import { fencedBlocks, userPages, type Block } from '../fixtures/markdown.ts'

// The YAML a user copies from the documentation must protect as the shipped overlays do (issue
// 19: the ingress-nginx overlay's auth-response-headers lacked a header the README's snippet had).
// Every fenced yaml snippet of README.md, docs/**/*.md and docker/README.md that carries
// ingress-nginx `auth-*` annotations, a Traefik forwardAuth or an Envoy Gateway SecurityPolicy
// extAuth is compared, field by security-relevant field, with the same object of the overlay
// (docker/k8s/overlays/*), wherever the snippet lives. A snippet may leave a field out (it shows
// part of the object), but a field it gives must say what the overlay says; header lists are
// compared as sets of lowercased names.

type Fields = Record<string, unknown>

const NGINX = 'nginx.ingress.kubernetes.io/'
/** ingress-nginx annotations whose values are lists of header names. */
const NGINX_LISTS = new Set(['auth-response-headers', 'auth-request-headers'])

function headerSet(value: unknown): string[] {
  const list = Array.isArray(value) ? value : typeof value === 'string' ? value.split(',') : []
  return [...new Set(list.map((v) => String(v).trim().toLowerCase()).filter((v) => v !== ''))].sort()
}

function record(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined
}

/** The ingress-nginx `auth-*` annotations of an object, header lists as sets. */
function nginxAuth(object: unknown): Fields | undefined {
  const annotations = record(record(record(object)?.metadata)?.annotations)
  if (annotations === undefined) return undefined
  const out: Fields = {}
  for (const [key, value] of Object.entries(annotations)) {
    if (!key.startsWith(`${NGINX}auth-`)) continue
    const name = key.slice(NGINX.length)
    out[name] = NGINX_LISTS.has(name) ? headerSet(value) : value
  }
  return Object.keys(out).length > 0 ? out : undefined
}

/** A Traefik forwardAuth's security-relevant fields. */
function traefikForwardAuth(object: unknown): Fields | undefined {
  const forwardAuth = record(record(record(object)?.spec)?.forwardAuth)
  if (forwardAuth === undefined) return undefined
  const out: Fields = {}
  if ('address' in forwardAuth) out.address = forwardAuth.address
  // Absent is false, Traefik's default.
  out.trustForwardHeader = forwardAuth.trustForwardHeader === true
  if ('authResponseHeaders' in forwardAuth) out.authResponseHeaders = headerSet(forwardAuth.authResponseHeaders)
  if ('authResponseHeadersRegex' in forwardAuth) out.authResponseHeadersRegex = forwardAuth.authResponseHeadersRegex
  if ('authRequestHeaders' in forwardAuth) out.authRequestHeaders = headerSet(forwardAuth.authRequestHeaders)
  return out
}

/** An Envoy Gateway SecurityPolicy's extAuth: which protocol, and its fields. */
function envoyExtAuth(object: unknown): { protocol: 'http' | 'grpc'; fields: Fields } | undefined {
  const o = record(object)
  if (o?.kind !== 'SecurityPolicy') return undefined
  const extAuth = record(record(o.spec)?.extAuth)
  if (extAuth === undefined) return undefined
  const protocol = record(extAuth.grpc) !== undefined ? 'grpc' : 'http'
  const service = record(extAuth[protocol]) ?? {}
  const fields: Fields = {}
  if ('headersToExtAuth' in extAuth) fields.headersToExtAuth = headerSet(extAuth.headersToExtAuth)
  if ('failOpen' in extAuth) fields.failOpen = extAuth.failOpen
  if ('path' in service) fields.path = service.path
  if ('headersToBackend' in service) fields.headersToBackend = headerSet(service.headersToBackend)
  const ports = (Array.isArray(service.backendRefs) ? service.backendRefs : []).map((ref) => record(ref)?.port)
  if (ports.length > 0) fields.ports = ports
  return { protocol, fields }
}

/** What the shipped overlays say, per kind of snippet. */
function overlayFields() {
  const nginx = kustomize('overlays/ingress-nginx').objects.map(nginxAuth).find((f) => f !== undefined)
  const traefik = kustomize('overlays/traefik').objects.map(traefikForwardAuth).find((f) => f !== undefined)
  const envoy = {
    http: kustomize('overlays/envoy-gateway').objects.map(envoyExtAuth).find((f) => f !== undefined)?.fields,
    grpc: kustomize('overlays/envoy-gateway-grpc').objects.map(envoyExtAuth).find((f) => f !== undefined)?.fields,
  }
  return { nginx, traefik, envoy }
}

/** The objects of a yaml block, or the parse error. */
function objectsOf(block: Block): unknown[] | Error {
  const docs = YAML.parseAllDocuments(block.body)
  const failed = docs.find((d) => d.errors.length > 0)
  if (failed !== undefined) return new Error(failed.errors[0]?.message ?? 'does not parse')
  return docs.map((d) => d.toJS() as unknown)
}

const MENTIONS = /nginx\.ingress\.kubernetes\.io\/auth-|forwardAuth:|extAuth:/

t.test('every snippet that configures a check agrees with its overlay', async (t) => {
  const shipped = overlayFields()
  t.ok(shipped.nginx && shipped.traefik && shipped.envoy.http && shipped.envoy.grpc, 'the overlays render with their checks')
  const found = { nginx: 0, traefik: 0, envoy: 0 }

  /** Every field the snippet gives must be the overlay's. */
  function compare(block: Block, what: string, snippet: Fields, overlay: Fields | undefined): void {
    const given = Object.fromEntries(Object.keys(snippet).map((key) => [key, overlay?.[key]]))
    t.strictSame(snippet, given, `${block.file}:${block.line} ${what} says what the overlay says`)
  }

  for (const page of userPages()) {
    for (const block of fencedBlocks(page)) {
      if (!['yaml', 'yml'].includes(block.lang) || !MENTIONS.test(block.body)) continue
      const objects = objectsOf(block)
      if (objects instanceof Error) {
        t.fail(`${block.file}:${block.line}: a snippet that configures a check does not parse: ${objects.message}`)
        continue
      }
      for (const object of objects) {
        const nginx = nginxAuth(object)
        if (nginx !== undefined) {
          found.nginx++
          compare(block, 'ingress-nginx auth annotations', nginx, shipped.nginx)
        }
        const traefik = traefikForwardAuth(object)
        if (traefik !== undefined) {
          found.traefik++
          compare(block, 'Traefik forwardAuth', traefik, shipped.traefik)
        }
        const envoy = envoyExtAuth(object)
        if (envoy !== undefined) {
          found.envoy++
          compare(block, `Envoy Gateway extAuth.${envoy.protocol}`, envoy.fields, shipped.envoy[envoy.protocol])
        }
      }
    }
  }
  // The documentation shows both forward-auth setups somewhere; a test that found none would check nothing.
  t.ok(found.nginx > 0, 'an ingress-nginx snippet was found')
  t.ok(found.traefik > 0, 'a Traefik snippet was found')
})

t.test('the comparison sees a header missing from a snippet', async (t) => {
  const block: Block = {
    file: 'docs/example.md',
    line: 1,
    lang: 'yaml',
    body: 'metadata:\n  annotations:\n    nginx.ingress.kubernetes.io/auth-response-headers: "X-Auth-Request-User"\n',
  }
  const objects = objectsOf(block)
  t.notOk(objects instanceof Error)
  const snippet = nginxAuth((objects as unknown[])[0])
  t.notSame(snippet, { 'auth-response-headers': overlayFields().nginx?.['auth-response-headers'] }, 'one header is not the overlay\'s five')
})
