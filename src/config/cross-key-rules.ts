// Rules that relate two keys, which the schema cannot say (or cannot say readably), one module per
// section of the file under cross-key/. A rule runs whenever the keys it reads are themselves free
// of problems, whatever is wrong elsewhere, so one run reports as much as possible without
// building on a broken value (cross-key/read.ts).

import type { Env } from './env.js'
import type { Issue } from './path.js'
import { assertionRules } from './cross-key/assertions.js'
import { cookieRules } from './cross-key/cookies.js'
import { envoyDeprecations, envoyRules } from './cross-key/envoy.js'
import { groupSourceRules } from './cross-key/group-sources.js'
import { providerRules } from './cross-key/providers.js'
import { type Read, reader } from './cross-key/read.js'
import { serverRules } from './cross-key/server.js'
import { sessionRules } from './cross-key/session.js'
import { upstreamRules } from './cross-key/upstreams.js'

/** The sections' rules, in the order they report. */
const SECTIONS: ReadonlyArray<(read: Read, data: unknown) => Issue[]> = [
  providerRules,
  cookieRules,
  serverRules,
  envoyRules,
  sessionRules,
  upstreamRules,
  assertionRules,
]

/** `known`: the issues found so far (environment and schema); defaults are already applied. `env`: where keys named by their variable are. */
export function crossCheck(data: unknown, known: readonly Issue[], env: Env = process.env): Issue[] {
  const read = reader(data, known)
  return [...SECTIONS.flatMap((rules) => rules(read, data)), ...groupSourceRules(read, data, env)]
}

/**
 * Keys still read under a former name, each as an issue at that name saying what to write
 * instead: warnings, which `check` and `run` print; never a refusal.
 */
export function deprecations(data: unknown): Issue[] {
  return envoyDeprecations(data)
}
