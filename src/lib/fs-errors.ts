// Why a file could not be read, in words for a configuration message: never its content, and
// never Node's message, which quotes the path (and a "path" may be a key pasted in its place).

const FS_ERRORS: Readonly<Record<string, string>> = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EISDIR: 'it is a directory',
  ENOTDIR: 'a part of the path is not a directory',
  ENAMETOOLONG: 'the name is too long for a path',
  ELOOP: 'too many symbolic links',
}

export function describeFsError(error: unknown): string {
  const code = error instanceof Error && 'code' in error ? String(error.code) : ''
  return FS_ERRORS[code] ?? (code === '' ? 'unreadable' : `error ${code}`)
}
