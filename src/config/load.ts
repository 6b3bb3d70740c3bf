// Reading the configuration: file, YAML, environment, schema, cross-checks, normalization. Every
// problem found is collected, so one run of `openid-gateway check` lists them all.

import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import YAML, { type YAMLError } from 'yaml'
import { describeFsError } from '../lib/fs-errors.js'
import { crossCheck, deprecations } from './cross-key-rules.js'
import { refusedLiteralPasswords } from './cross-key/legacy-credentials.js'
import { type Env, expandEnv } from './env.js'
import { normalizeConfig } from './normalize.js'
import { formatIssue, type Issue, type Path, type PathSegment, startsWith } from './path.js'
import { gatewaySchema } from '../options/schema.js'
import type { GatewayConfig } from '../options/types.js'
import { validateSchema } from './validate.js'

/** The exit code of a process that refused its configuration. */
export const EXIT_CONFIG = 2

export class ConfigError extends Error {
  override readonly name = 'ConfigError'
  /** One line per problem, e.g. `upstreams[1].target: must be an http(s) URL`. */
  readonly issues: string[]

  constructor(issues: readonly string[]) {
    super(`invalid configuration:\n  ${issues.join('\n  ')}`)
    this.issues = [...issues]
  }
}

export function loadConfig(path: string, env: NodeJS.ProcessEnv = process.env): GatewayConfig {
  return loadConfigFile(path, env).config
}

/** The running configuration as the management listener shows it (GET /config). */
export interface ConfigState {
  /** `sha256:` and the hex digest of the file as read. */
  hash: string
  loadedAt: string
}

/** A configuration file read and validated, with its state. */
export interface LoadedConfig {
  config: GatewayConfig
  state: ConfigState
  /** The file as read: what the primary of workers hands them, so that all run the same one. */
  text: string
  /**
   * What the file should say otherwise but is still accepted (a key under its former name), one
   * `key: message` line each: `check` prints them and `run` logs them as warnings.
   */
  warnings: string[]
}

export function configHash(text: string): string {
  return `sha256:${createHash('sha256').update(text).digest('hex')}`
}

/** Reads and validates the file (a ConfigError says what is wrong, by key), and hashes it. */
export function loadConfigFile(path: string, env: NodeJS.ProcessEnv = process.env): LoadedConfig {
  return loadConfigText(readConfigFile(path), path, env)
}

/** The file's text, as read by someone else (the primary of workers); `source` names it in messages. */
export function loadConfigText(text: string, source: string, env: NodeJS.ProcessEnv = process.env): LoadedConfig {
  const { config, warnings } = resolveWithWarnings(parseYaml(text, source), env)
  return { config, state: { hash: configHash(text), loadedAt: new Date().toISOString() }, text, warnings }
}

/** `source` (usually the file name) prefixes YAML syntax errors. */
export function parseConfig(yamlText: string, env: NodeJS.ProcessEnv = process.env, source?: string): GatewayConfig {
  return resolveConfig(parseYaml(yamlText, source), env)
}

/** The steps after YAML parsing, for callers (tests) that hold the configuration as an object. */
export function resolveConfig(data: unknown, env: Env = process.env): GatewayConfig {
  return resolveWithWarnings(data, env).config
}

/** resolveConfig, and the warnings of a valid file (LoadedConfig.warnings). */
export function resolveWithWarnings(data: unknown, env: Env = process.env): { config: GatewayConfig; warnings: string[] } {
  if (data === null || data === undefined) {
    throw new ConfigError(['(root): the configuration is empty; expected server, provider, cookies and upstreams'])
  }
  const expansion = expandEnv(omitNulls(data), env, gatewaySchema)
  const envIssues = expansion.issues
  const underEnvIssue = (path: Path): boolean => envIssues.some((issue) => startsWith(path, issue.path))
  const schema = validateSchema(expansion.value)
  const found: Issue[] = [
    ...envIssues,
    // A value whose variable is missing still holds `${VAR}`; what the schema thinks of that
    // placeholder is noise.
    ...(schema.ok ? [] : schema.issues.filter((issue) => !underEnvIssue(issue.path))),
  ]
  // A secret written in the file is seen only before the environment is substituted.
  const issues = inFileOrder([...found, ...crossCheck(expansion.value, found, env), ...refusedLiteralPasswords(data)], expansion.value)
  if (issues.length > 0 || !schema.ok) throw new ConfigError(unique(issues.map(formatIssue)))
  return { config: normalizeConfig(schema.config, env), warnings: inFileOrder(deprecations(expansion.value), expansion.value).map(formatIssue) }
}

function readConfigFile(path: string): string {
  try {
    return readFileSync(path, 'utf8')
  } catch (error) {
    throw new ConfigError([`${path}: cannot read the configuration file (${describeFsError(error)})`])
  }
}

function parseYaml(text: string, source: string | undefined): unknown {
  // YAML 1.2 core schema: no language-specific tags, and `yes`/`on` stay strings.
  const doc = YAML.parseDocument(text, { prettyErrors: true, uniqueKeys: true })
  // Warnings too: an unknown tag such as !!js/function is a warning that would otherwise pass.
  const problems = [...doc.errors, ...doc.warnings]
  if (problems.length > 0) throw new ConfigError(problems.map((problem) => describeYamlError(problem, source)))
  try {
    return doc.toJS({ maxAliasCount: 100 })
  } catch (error) {
    throw new ConfigError([`${prefix(source)}invalid YAML: ${error instanceof Error ? error.message : String(error)}`])
  }
}

// The parser's message ends with an excerpt of the offending lines; it is dropped because the
// line may hold a secret written in the file.
function describeYamlError(error: YAMLError, source: string | undefined): string {
  const reason = error.message.replace(/ at line \d+, column \d+:[\s\S]*$/, '')
  const position = error.linePos?.[0]
  const where = position ? `line ${position.line}, column ${position.col}: ` : ''
  return `${prefix(source)}${where}invalid YAML: ${reason}`
}

function prefix(source: string | undefined): string {
  return source === undefined ? '' : `${source}: `
}

// `key:` with nothing after it means "not given" (so the default applies), as a user who
// comments out every child of a key expects.
function omitNulls(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(omitNulls)
  if (typeof node !== 'object' || node === null) return node
  return Object.fromEntries(
    Object.entries(node)
      .filter(([, value]) => value !== null)
      .map(([key, value]) => [key, omitNulls(value)]),
  )
}

// Listed top to bottom as the keys appear in the file, so the report reads along with it. A key
// that is not there (a missing required one) comes last within its parent.
function inFileOrder(issues: readonly Issue[], data: unknown): Issue[] {
  return issues.toSorted((a, b) => comparePaths(a.path, b.path, data))
}

function comparePaths(a: Path, b: Path, data: unknown): number {
  let node = data
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const difference = rank(node, a[i]) - rank(node, b[i])
    if (difference !== 0) return difference
    node = childOf(node, a[i])
  }
  return a.length - b.length
}

function rank(node: unknown, segment: PathSegment | undefined): number {
  if (typeof segment === 'number') return segment
  const index = isRecord(node) && segment !== undefined ? Object.keys(node).indexOf(segment) : -1
  return index === -1 ? Number.MAX_SAFE_INTEGER : index
}

function childOf(node: unknown, segment: PathSegment | undefined): unknown {
  if (Array.isArray(node) && typeof segment === 'number') return node[segment]
  return isRecord(node) && typeof segment === 'string' && Object.hasOwn(node, segment) ? node[segment] : undefined
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function unique(lines: readonly string[]): string[] {
  return [...new Set(lines)]
}
