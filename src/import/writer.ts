// What a conversion prints: the gateway's YAML (stdout, or --out), headed by the variables it
// reads, and the report on stderr, one line each: every variable to set, every setting not carried
// and why.

import { Document } from 'yaml'
import type { Conversion } from './convert.js'

/** The configuration as YAML; `sources` are the inputs it was converted from, named in its header. */
export function renderYaml(conversion: Conversion, sources: readonly string[]): string {
  const doc = new Document(conversion.config)
  const lines = [
    ` Converted from oauth2-proxy (${sources.join(', ')}) by openid-gateway import oauth2-proxy.`,
    ' Check it with: openid-gateway check --online --config <this file>',
  ]
  if (conversion.variables.size > 0) {
    lines.push(' Secrets come from the environment:')
    for (const [name, what] of conversion.variables) lines.push(`   ${name}: ${what}`)
  }
  for (const note of conversion.notes) lines.push(` Needs: ${note}`)
  if (conversion.lost.length > 0)
    lines.push(` ${conversion.lost.length} setting${conversion.lost.length === 1 ? ' was' : 's were'} not carried: see the converter's report.`)
  doc.commentBefore = lines.join('\n')
  return doc.toString({ lineWidth: 0 })
}

/** The report's lines: `set NAME: ...` for each variable, `needs: ...` for each file it names, `not carried: <where>: <why>` for each setting. */
export function reportLines(conversion: Conversion): string[] {
  return [
    ...[...conversion.variables].map(([name, what]) => `set ${name}: ${what}`),
    ...conversion.notes.map((note) => `needs: ${note}`),
    ...conversion.lost.map((l) => `not carried: ${l.from}: ${l.reason}`),
  ]
}
