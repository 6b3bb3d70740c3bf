/**
 * Freezes a JSON value and everything it holds, so that one object can be handed to many
 * requests (a cache hit) without one request's change reaching the others. Returns `value`.
 */
export function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value
  for (const child of Object.values(value)) deepFreeze(child)
  return Object.freeze(value)
}
