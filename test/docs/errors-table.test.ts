// docs/operations.md's errors table is the operator's list of every problem code the gateway
// answers with: each code of src/contract/errors.ts has its row, with the status the code has
// (internal_error, the answer to a bug, is described below the table instead). A code added to
// ProblemCode without a row fails here; ALL makes `npm run typecheck` name a code missing from it.

import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { GatewayError, type ProblemCode } from '#src/contract/errors'
import { DOCS, proseLines } from '../fixtures/markdown.ts'

const ALL = {
  bad_request: true,
  code_missing: true,
  state_mismatch: true,
  code_invalid: true,
  id_token_invalid: true,
  authorization_response_invalid: true,
  refresh_token_missing: true,
  refresh_token_invalid: true,
  unauthenticated: true,
  forbidden: true,
  token_exchange_refused: true,
  insufficient_user_authentication: true,
  step_up_failed: true,
  not_found: true,
  method_not_allowed: true,
  rate_limited: true,
  session_too_large: true,
  provider_unavailable: true,
  provider_rejected_client: true,
  provider_rejected_redirect_uri: true,
  upstream_unavailable: true,
  not_ready: true,
  provider_misconfigured: true,
  session_store_unavailable: true,
  decision_unavailable: true,
  upstream_timeout: true,
  internal_error: true,
} satisfies Record<ProblemCode, true>
const IN_PROSE: ReadonlySet<ProblemCode> = new Set(['internal_error'])

const page = readFileSync(join(DOCS, 'operations.md'), 'utf8')

/** The rows `| status | `code` | when |` of the table under "## Errors". */
function tableRows(): { status: number; code: string }[] {
  const lines = proseLines(page).map(({ line }) => line)
  const start = lines.indexOf('## Errors')
  if (start === -1) throw new Error('docs/operations.md has no "## Errors"')
  const rows: { status: number; code: string }[] = []
  for (const line of lines.slice(start + 1)) {
    if (line.startsWith('#')) break
    const row = /^\| (\d{3}) \| `([a-z_]+)` \|/.exec(line)
    if (row !== null) rows.push({ status: Number(row[1]), code: row[2] as string })
  }
  return rows
}

t.test("every problem code has its row in docs/operations.md's errors table, with its status", async (t) => {
  const rows = tableRows()
  const codes = (Object.keys(ALL) as ProblemCode[]).filter((code) => !IN_PROSE.has(code))
  t.strictSame(rows.map((row) => row.code).toSorted(), codes.toSorted(), 'the table lists exactly the codes')
  for (const { status, code } of rows) t.equal(status, new GatewayError(code as ProblemCode, 'detail').status, `${code}: ${status}`)
  for (const code of IN_PROSE) t.match(page, `\`${code}\``, `${code} is described on the page`)
})
