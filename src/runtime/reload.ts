import type { Refusal } from './live.js'

// A reload with server.workers > 1, in two phases, all or nothing. The
// primary reads and validates the file once and sends its text to every worker (so all build the
// same file, even if it changes meanwhile); each builds the new app without serving it and says
// whether it could (`prepare`). Only when every worker could does the primary tell them to serve
// it (`commit`) and adopt it itself (GET /config); otherwise each discards it and keeps the
// running configuration (`abort`), and each counts the failure in its reload metric. A worker
// that does not answer in time counts as one that could not.

export const PREPARE = 'reload.prepare'
export const COMMIT = 'reload.commit'
export const ABORT = 'reload.abort'

export interface PrepareRequest {
  text: string
}

export type PrepareAnswer = { ok: true } | ({ ok: false } & Refusal)

export interface CommitRequest {
  /** The hash of the prepared file: a worker that prepared another does not serve it. */
  hash: string
}

export type AbortRequest = Refusal

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null
}

function isStringList(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((item) => typeof item === 'string')
}

export function isPrepareRequest(value: unknown): value is PrepareRequest {
  return isObject(value) && typeof value.text === 'string'
}

export function isPrepareAnswer(value: unknown): value is PrepareAnswer {
  if (!isObject(value)) return false
  return value.ok === true || (value.ok === false && isStringList(value.problems) && typeof value.reason === 'string')
}

export function isCommitRequest(value: unknown): value is CommitRequest {
  return isObject(value) && typeof value.hash === 'string'
}

export function isAbortRequest(value: unknown): value is AbortRequest {
  return isObject(value) && isStringList(value.problems) && typeof value.reason === 'string'
}

/**
 * The primary's verdict on the answers to `prepare` from `asked` workers: undefined when every
 * one prepared the file, else the refusal every worker is told.
 */
export function prepareVerdict(asked: number, answers: readonly unknown[]): Refusal | undefined {
  const refusals = answers.filter((a): a is Extract<PrepareAnswer, { ok: false }> => isPrepareAnswer(a) && !a.ok)
  const missing = asked - answers.filter(isPrepareAnswer).length
  if (refusals.length === 0 && missing <= 0) return undefined
  const problems = [...new Set(refusals.flatMap((r) => r.problems))]
  if (missing > 0) problems.push(`${missing} of ${asked} workers did not prepare it in time`)
  return { problems, reason: 'a worker could not start the new configuration; every worker keeps the running one' }
}

/**
 * The workers, of `workers` (ids of those alive after `commit`), that do not serve the committed
 * file: those that answered false (they prepared another file, or none: they started after
 * `prepare`) and those that did not answer in time. Each runs another configuration than the
 * primary reports, so the primary replaces it; its successor starts on the running file.
 */
export function behindAfterCommit(workers: readonly number[], answers: ReadonlyMap<number, unknown>): number[] {
  return workers.filter((worker) => answers.get(worker) !== true)
}
