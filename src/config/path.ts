// Key paths name the place of a problem the way users write it in YAML: `upstreams[1].target`.

export type PathSegment = string | number
export type Path = readonly PathSegment[]

/** One configuration problem; rendered as `path: message`. */
export interface Issue {
  path: Path
  message: string
}

// Keys that read unambiguously after a dot; anything else (claim URLs, empty keys) is quoted.
const PLAIN_KEY = /^[A-Za-z_$][\w$-]*$/

export function formatPath(path: Path): string {
  if (path.length === 0) return '(root)'
  return path.map(formatSegment).join('').replace(/^\./, '')
}

function formatSegment(segment: PathSegment): string {
  if (typeof segment === 'number') return `[${segment}]`
  return PLAIN_KEY.test(segment) ? `.${segment}` : `[${JSON.stringify(segment)}]`
}

export function formatIssue(issue: Issue): string {
  return `${formatPath(issue.path)}: ${issue.message}`
}

export function startsWith(path: Path, prefix: Path): boolean {
  return prefix.length <= path.length && prefix.every((segment, i) => path[i] === segment)
}
