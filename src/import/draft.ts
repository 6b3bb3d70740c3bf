// The gateway configuration a conversion builds (docs/configuration.md's keys), and what it could
// not carry. mappings.ts writes into it option by option; writer.ts renders it. Secrets never
// enter it: a secret becomes a `${VAR}` reference (config/env.ts interpolates it at load) and the
// variable is listed with what it must hold.

import type { JsonValue } from '../options/schema.js'

export type JsonObject = { [key: string]: JsonValue }

export interface DraftUpstream {
  readonly name: string
  readonly pathPrefix: string
  readonly target: string
  /** Keys of this upstream alone (an alpha upstream's own settings), over the shared ones. */
  readonly own: JsonObject
}

/** A setting the conversion could not carry: where it was read and why. */
export interface Lost {
  readonly from: string
  readonly reason: string
}

export class Draft {
  readonly server: JsonObject = {}
  readonly provider: JsonObject = {}
  readonly cookies: JsonObject = {}
  readonly session: JsonObject = {}
  readonly redirects: JsonObject = {}
  /** Keys every upstream gets (oauth2-proxy applies its options to every upstream). */
  readonly shared: JsonObject = {}
  readonly upstreams: DraftUpstream[] = []
  /** `${VAR}` references in the output: each variable and what to set it to. */
  readonly variables = new Map<string, string>()
  readonly lost: Lost[] = []
  /** What must hold where the result runs (a file it names), reported as `needs: ...` lines. */
  readonly notes: string[] = []

  /** A `${name}` reference for a secret, the variable listed with `what` it must hold. */
  secret(name: string, what: string): string {
    if (!this.variables.has(name)) this.variables.set(name, what)
    return `\${${name}}`
  }

  note(text: string): void {
    if (!this.notes.includes(text)) this.notes.push(text)
  }

  cannot(from: string, reason: string): void {
    this.lost.push({ from, reason })
  }

  /** Sets `value` at `path` under `root` (objects created on the way). */
  static set(root: JsonObject, path: readonly string[], value: JsonValue): void {
    let at = root
    for (const key of path.slice(0, -1)) {
      const next = at[key]
      if (typeof next === 'object' && next !== null && !Array.isArray(next)) at = next
      else {
        const created: JsonObject = {}
        at[key] = created
        at = created
      }
    }
    const last = path.at(-1)
    if (last !== undefined) at[last] = value
  }

  /** The upstreams as the configuration lists them: each with the shared keys, its own over them. */
  upstreamList(): JsonObject[] {
    return this.upstreams.map((u) => {
      const out: JsonObject = { name: u.name }
      if (u.pathPrefix !== '/') out.match = { pathPrefix: u.pathPrefix }
      out.target = u.target
      return { ...out, ...structuredClone(this.shared), ...u.own }
    })
  }
}
