// Why a file could not be read, in words for a configuration message (never its content).

const FS_ERRORS: Readonly<Record<string, string>> = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EISDIR: 'it is a directory',
}

export function describeFsError(error: unknown): string {
  const code = error instanceof Error && 'code' in error ? String(error.code) : ''
  return FS_ERRORS[code] ?? (error instanceof Error ? error.message : String(error))
}
