import type { FastifyInstance } from 'fastify'
import type { ProviderConfig, UpstreamConfig } from '../options/types.js'
import { documentHosts, publishesResourceMetadata, resourceMetadataDocument, resourceMetadataPath, resourceOrigin } from '../access/resource-metadata.js'

// The route of each upstream's OAuth 2.0 Protected Resource Metadata: RFC 9728 3.1's GET of the
// well-known URI with the upstream's path inserted, answered with 3.2's JSON document, on the
// hosts that upstream serves. The documents, their URLs and hosts are
// access/resource-metadata.ts's; this file only serves them, as public documents.

export interface ResourceMetadataOptions {
  upstreams: readonly UpstreamConfig[]
  providers: readonly ProviderConfig[]
  publicUrl: string
}

/** GET (and HEAD) of each metadata document, on the upstream's hosts. */
export async function resourceMetadataRoutes(app: FastifyInstance, options: ResourceMetadataOptions): Promise<void> {
  const issuerOf = new Map(options.providers.map((p) => [p.name, p.issuer]))
  // One pass over the upstreams, so that a thousand of them register in linear time.
  const hostsAtPrefix = new Map<string, string[]>()
  for (const { match } of options.upstreams) {
    if (match.hosts === undefined) continue
    const hosts = hostsAtPrefix.get(match.pathPrefix)
    if (hosts === undefined) hostsAtPrefix.set(match.pathPrefix, [...match.hosts])
    else hosts.push(...match.hosts)
  }
  for (const upstream of options.upstreams) {
    if (!publishesResourceMetadata(upstream)) continue
    const issuers = upstream.providers.flatMap((name) => issuerOf.get(name) ?? [])
    const hosts = documentHosts(upstream, hostsAtPrefix)
    app.route({
      method: 'GET',
      url: resourceMetadataPath(upstream.match.pathPrefix),
      ...(hosts === undefined ? {} : { constraints: { host: hosts } }),
      handler: (req, reply) => {
        const origin = resourceOrigin(upstream, options.publicUrl, req.headers.host)
        reply
          .header('cache-control', 'public, max-age=300')
          .type('application/json')
          .send(resourceMetadataDocument(upstream, origin, issuers))
      },
    })
  }
}
