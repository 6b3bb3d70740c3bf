// The cross-key rules of `session`: a store every process can share, and one Redis topology with
// only the keys that mean something with it.

import type { Issue } from '../path.js'
import { isString, type Read, valueAt } from './read.js'

export function sessionRules(read: Read, data: unknown): Issue[] {
  return [...checkRedisStore(read, data), ...checkWorkersStore(read)]
}

// Workers are separate processes: sessions in one worker's memory are unknown to the others.
function checkWorkersStore(read: Read): Issue[] {
  const workers = read(['server', 'workers'], (v): v is number | string => typeof v === 'number' || typeof v === 'string')
  if (workers === undefined || workers === 1 || read(['session', 'store'], isString) !== 'memory') return []
  return [{ path: ['session', 'store'], message: 'memory cannot be shared by server.workers processes: use cookie or redis, or server.workers: 1' }]
}

// Where Redis is: one node (redisUrl), Sentinel or Cluster, never two of them (which would the
// gateway use?). A topology with its own problem is reported where it is; these rules are about a
// missing one, a second one, and keys that mean nothing with the one given.
function checkRedisStore(read: Read, data: unknown): Issue[] {
  const given = (['redisUrl', 'redis.sentinels', 'redis.cluster'] as const).filter((key) => valueAt(data, ['session', ...key.split('.')]) !== undefined)
  const issues: Issue[] = []
  if (read(['session', 'store'], isString) === 'redis' && given.length === 0) {
    issues.push({ path: ['session', 'store'], message: 'redis requires session.redisUrl, session.redis.sentinels or session.redis.cluster' })
  }
  if (given.length > 1) {
    const [, second = 'redis.cluster'] = given
    issues.push({ path: ['session', ...second.split('.')], message: `must not be given with session.${given[0]}: give one of session.redisUrl, session.redis.sentinels and session.redis.cluster` })
  }
  if (given[0] === 'redisUrl') {
    for (const key of ['username', 'password', 'tls'] as const) {
      const value = valueAt(data, ['session', 'redis', key])
      // tls has a default (false): only a `true` was written.
      if (value !== undefined && value !== false) {
        issues.push({ path: ['session', 'redis', key], message: `applies to sentinels and cluster only; with session.redisUrl, ${key === 'tls' ? 'write rediss://' : 'write it in the URL'}` })
      }
    }
  }
  if (given.length === 0 && valueAt(data, ['session', 'redis', 'waitReplicas']) !== undefined) {
    issues.push({ path: ['session', 'redis', 'waitReplicas'], message: 'needs a Redis: session.redisUrl, session.redis.sentinels or session.redis.cluster' })
  }
  return issues
}
