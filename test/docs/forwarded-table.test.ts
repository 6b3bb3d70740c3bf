// docs/proxying.md's "What the application receives" table is the one the code exports
// (src/upstream/forwarded.ts APPLICATION_RECEIVES), row for row, and what its proxy rows say of the
// headers the gateway removes is what the header policy strips. The proxy and WebSocket rows'
// values are measured in test/e2e/host-header.test.ts.

import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { APPLICATION_RECEIVES, applicationReceivesTable } from '#src/upstream/forwarded'
import { GATEWAY_ONLY_HEADERS, createHeaderScrubber } from '#src/upstream/header-policy'
import { DOCS } from '../fixtures/markdown.ts'

const page = readFileSync(join(DOCS, 'proxying.md'), 'utf8')

t.test('the table under "What the application receives" is the code\'s, whole', async (t) => {
  const start = page.indexOf('## What the application receives\n')
  t.ok(start !== -1, 'the section exists')
  const section = page.slice(start, page.indexOf('\n## ', start + 1))
  const tables = section.split('\n\n').filter((block) => block.startsWith('|'))
  t.equal(tables.length, 1, 'one table')
  t.equal(tables[0], applicationReceivesTable())
  t.equal(APPLICATION_RECEIVES.length, 6, 'proxy (both passHostHeader values), WebSocket, ingress-nginx, Traefik, Envoy')
})

t.test("the proxy rows' removals are the header policy's", async (t) => {
  const scrub = createHeaderScrubber(GATEWAY_ONLY_HEADERS)
  const sent = { forwarded: 'for=192.0.2.1;host=evil.example', 'x-forwarded-port': '1', 'x-forwarded-prefix': '/evil', host: 'app.example.com' }
  t.strictSame(scrub(sent), { host: 'app.example.com' }, 'Forwarded, X-Forwarded-Port and -Prefix never pass')
  t.match(APPLICATION_RECEIVES[0]?.[5], /^none: the gateway removes/)
  t.match(page, /\*\*`X-Forwarded-Port`, `X-Forwarded-Prefix`\*\* and every other `X-Forwarded-\*` a client sends are\n {2}removed and not set/)
})
