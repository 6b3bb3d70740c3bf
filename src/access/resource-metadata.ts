import type { UpstreamConfig } from '../options/types.js'
import { hostPattern } from './match.js'

// OAuth 2.0 Protected Resource Metadata (RFC 9728) of the upstreams that accept Bearer tokens: how
// an API or agent client finds which provider issues tokens for an upstream and which scopes it
// takes, without configuration of its own.
//
// - Every upstream with `auth` other than `none` accepts Bearer tokens (access/authenticate.ts
//   tries one whenever no session signs in, from any provider the upstream accepts), so each has
//   its document unless `resourceMetadata: false` turns it off (an API that publishes its own).
// - The upstream is the protected resource; its resource identifier (RFC 9728 1.2) is the public
//   origin (or, for an upstream with match.hosts, the scheme of server.publicUrl and the host the
//   client asked) followed by its match.pathPrefix; `/` gives the bare origin.
// - Its metadata is at the well-known URI with the path inserted (RFC 9728 3.1):
//   `/.well-known/oauth-protected-resource` + pathPrefix, and `resource` in the document is
//   exactly the identifier that URI was made from (RFC 9728 3.3).
// - `authorization_servers` (RFC 9728 2) are the issuers of the providers the upstream accepts,
//   whose tokens the gateway verifies; `bearer_methods_supported` is `header` alone (RFC 6750
//   2.1: the gateway reads no token from a body or query); `scopes_supported` (OPTIONAL) is the
//   upstream's resourceMetadata.scopes when given, and left out otherwise: no other key names
//   the scopes a client should ask for (allow has no scope rule; tokenExchange.scope is what the
//   exchanged token carries, not what the client's token needs).
// - The 401 of such an upstream names the document's URL as `resource_metadata` in its Bearer
//   challenge (RFC 9728 5.1, through contract/bearer-challenge.ts).
// - The routes (proxy/resource-metadata-route.ts) are the gateway's own and take precedence over
//   the upstreams' (a static route beats a prefix), except on a host where another upstream with
//   the same prefix serves that prefix (documentHosts); they are public documents on exact paths:
//   another spelling is an ordinary path of whichever upstream serves it, so no access decision
//   depends on them.
//
// This file owns the documents, their URLs and the hosts they are served on, as pure functions;
// the Fastify route that serves them is proxy/resource-metadata-route.ts.

/** RFC 9728 3: the well-known URI suffix. */
export const RESOURCE_METADATA_SUFFIX = '/.well-known/oauth-protected-resource'

/** The path of an upstream's metadata: the suffix, then its prefix unless it is `/` (RFC 9728 3.1). */
export function resourceMetadataPath(pathPrefix: string): string {
  return pathPrefix === '/' ? RESOURCE_METADATA_SUFFIX : RESOURCE_METADATA_SUFFIX + pathPrefix
}

/** The origin an upstream's resource identifier is on: the public URL's, or its scheme with the request's host when the upstream names hosts. */
export function resourceOrigin(upstream: UpstreamConfig, publicUrl: string, host: string | undefined): string {
  const url = new URL(publicUrl)
  return upstream.match.hosts === undefined || host === undefined ? url.origin : `${url.protocol}//${host}`
}

/** Whether `upstream` publishes a document: it accepts Bearer tokens, and it is not turned off. */
export function publishesResourceMetadata(upstream: UpstreamConfig): boolean {
  return upstream.auth !== 'none' && upstream.resourceMetadata !== false
}

/** The URL of `upstream`'s metadata as the 401's `resource_metadata`, or `undefined` when it has none. */
export function resourceMetadataUrl(upstream: UpstreamConfig, publicUrl: string, host: string | undefined): string | undefined {
  if (!publishesResourceMetadata(upstream)) return undefined
  return resourceOrigin(upstream, publicUrl, host) + resourceMetadataPath(upstream.match.pathPrefix)
}

/** The resource identifier (RFC 9728 1.2, RFC 8707 2) of `upstream` on `origin`: the origin, then its prefix unless it is `/`. */
export function resourceIdentifier(upstream: UpstreamConfig, origin: string): string {
  const prefix = upstream.match.pathPrefix
  return prefix === '/' ? origin : origin + prefix
}

/**
 * The audience a Bearer token must name at `upstream` (its `tokenAudience: resource`), as a
 * function of the request's host: its resource identifier, the same string as its document's
 * `resource`; `undefined` for an upstream that takes its providers' audiences. Without
 * match.hosts the identifier is worked out here, once.
 */
export function resourceAudience(upstream: UpstreamConfig, publicUrl: string): ((host: string | undefined) => string) | undefined {
  if (upstream.tokenAudience !== 'resource') return undefined
  if (upstream.match.hosts === undefined) {
    const fixed = resourceIdentifier(upstream, new URL(publicUrl).origin)
    return () => fixed
  }
  return (host) => resourceIdentifier(upstream, resourceOrigin(upstream, publicUrl, host))
}

/**
 * The `scope` of the 401's Bearer challenge (RFC 6750 3; the MCP authorization specification
 * 2025-11-25, "Protected Resource Metadata Discovery Requirements": servers SHOULD name the scopes
 * a client needs there): resourceMetadata.scopes, on an upstream with `tokenAudience: resource`
 * only, so that no other upstream's challenge changes; `undefined` leaves it out.
 */
export function challengeScope(upstream: UpstreamConfig): string | undefined {
  if (upstream.tokenAudience !== 'resource' || typeof upstream.resourceMetadata !== 'object') return undefined
  return upstream.resourceMetadata.scopes?.join(' ')
}

/** The RFC 9728 2 document of `upstream` on `origin`. */
export function resourceMetadataDocument(upstream: UpstreamConfig, origin: string, issuers: readonly string[]): Record<string, unknown> {
  const document: Record<string, unknown> = {
    resource: resourceIdentifier(upstream, origin),
    authorization_servers: issuers,
    bearer_methods_supported: ['header'],
  }
  const scopes = typeof upstream.resourceMetadata === 'object' ? upstream.resourceMetadata.scopes : undefined
  if (scopes !== undefined) document.scopes_supported = scopes
  return document
}

/**
 * The hosts an upstream's document is served on: its own `match.hosts`; for one without hosts,
 * every host but those where another upstream with the same prefix takes that prefix (the router
 * puts named hosts first, match.ts), so that there its path reaches that upstream, which may
 * publish its own document, rather than a document of a resource that host does not serve.
 */
export function documentHosts(upstream: UpstreamConfig, hostsAtPrefix: ReadonlyMap<string, readonly string[]>): RegExp | undefined {
  if (upstream.match.hosts !== undefined) return hostPattern(upstream.match.hosts)
  const taken = hostsAtPrefix.get(upstream.match.pathPrefix)
  if (taken === undefined) return undefined
  return new RegExp(`^(?!${hostPattern(taken).source.slice(1)})`, 'i')
}
