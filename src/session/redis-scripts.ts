import type { RedisClient } from './redis-client.js'

// The gateway's Lua scripts: each a read-then-write that must not interleave with another
// replica's, run by Redis as one step (EVAL is atomic: "Scripting with Lua", Redis documentation).
// Every key a script touches is passed in KEYS, and all of them carry one hash tag
// (redis-keys.ts), as Redis Cluster requires of a script (its keys must hash to one slot). ioredis
// sends them by EVALSHA, loading a script on a node that does not know it yet (defineCommand).

interface ScriptDefinition {
  /** Why it is a script: what a plain sequence of commands would let happen. */
  readonly lua: string
}

const SCRIPTS = {
  /**
   * KEYS: session, the user's sign-in order, the user's sub index, [the user's sid index], then
   * the session key of each ref the caller read in the sign-in order. ARGV: sealed value, end
   * (epoch seconds), '1' to store only over an existing session (an update), ref, the user's
   * bound (session.maxSessionsPerUser), now (epoch seconds), the number of sid indexes (0 or 1),
   * then the refs read, in the order of their keys.
   * An update after a logout deleted the session must not bring it back, nor re-add it to an index
   * (a MULTI with SET XX would still run the SADDs). A sign-in first makes room among the user's
   * sessions (the sign-in order: a sorted set, ref -> end): ended and deleted ones leave the
   * order and the sub index, then the oldest live ones beyond the bound are deleted (evicted).
   * Every key a script touches is declared (Redis "Scripting with Lua": key names must be input
   * arguments; managed Redis refuses others), so the caller passes the keys of the refs it read;
   * a ref it did not read (another sign-in of the user came in between) answers {-1, 0} and the
   * caller reads again. An index lives as long as its longest session: NX sets its first expiry,
   * GT extends it. Replies {1, live sessions evicted}, or {0, 0} for an update of a session gone.
   */
  ogwStoreSession: {
    lua: `
if ARGV[3] == '1' and redis.call('exists', KEYS[1]) == 0 then return {0, 0} end
local indexes = 3 + tonumber(ARGV[7])
local evicted = 0
if ARGV[3] ~= '1' then
  local declared = {}
  for i = indexes + 1, #KEYS do declared[ARGV[7 + i - indexes]] = KEYS[i] end
  local members = redis.call('zrange', KEYS[2], 0, -1)
  for _, ref in ipairs(members) do
    if declared[ref] == nil then return {-1, 0} end
  end
  local live = {}
  for _, ref in ipairs(members) do
    if tonumber(redis.call('zscore', KEYS[2], ref)) <= tonumber(ARGV[6]) or redis.call('exists', declared[ref]) == 0 then
      redis.call('zrem', KEYS[2], ref)
      redis.call('srem', KEYS[3], ref)
    else
      live[#live + 1] = ref
    end
  end
  for i = 1, #live - tonumber(ARGV[5]) + 1 do
    evicted = evicted + redis.call('del', declared[live[i]])
    redis.call('zrem', KEYS[2], live[i])
    redis.call('srem', KEYS[3], live[i])
  end
  redis.call('zadd', KEYS[2], ARGV[2], ARGV[4])
  redis.call('expireat', KEYS[2], ARGV[2], 'NX')
  redis.call('expireat', KEYS[2], ARGV[2], 'GT')
end
redis.call('set', KEYS[1], ARGV[1], 'EXAT', ARGV[2])
for i = 3, indexes do
  redis.call('sadd', KEYS[i], ARGV[4])
  redis.call('expireat', KEYS[i], ARGV[2], 'NX')
  redis.call('expireat', KEYS[i], ARGV[2], 'GT')
end
return {1, evicted}`,
  },
  /**
   * KEYS: a link set (email -> users). ARGV: the member, end (epoch seconds). The member added and
   * the set kept as long as its longest session, in one step: a set is never left without expiry.
   */
  ogwLink: {
    lua: `
redis.call('sadd', KEYS[1], ARGV[1])
redis.call('expireat', KEYS[1], ARGV[2], 'NX')
redis.call('expireat', KEYS[1], ARGV[2], 'GT')
return 1`,
  },
  /**
   * KEYS: an index, then the session keys to delete. ARGV: the refs to drop from the index (the
   * deleted ones, and those already gone). The sweep of a back-channel logout: the sessions and
   * their index entries go together, and an index left empty goes too.
   */
  ogwEndSessions: {
    lua: `
local deleted = 0
if #KEYS > 1 then deleted = redis.call('del', unpack(KEYS, 2)) end
if #ARGV > 0 then redis.call('srem', KEYS[1], unpack(ARGV)) end
if redis.call('scard', KEYS[1]) == 0 then redis.call('del', KEYS[1]) end
return deleted`,
  },
  /**
   * KEYS: session keys. ARGV: for each key, the sealed value read, the value to write instead,
   * its end (epoch seconds). A Shared Signals token-claims-change (redis-store.ts expireTokens):
   * each session is replaced only if it still holds the value read (compare-and-set), so a logout
   * that deleted it meanwhile is not undone and a refresh stored meanwhile is not overwritten with
   * the older tokens. Replies how many were replaced.
   */
  ogwReplaceSessions: {
    lua: `
local replaced = 0
for i = 1, #KEYS do
  local at = (i - 1) * 3
  if redis.call('get', KEYS[i]) == ARGV[at + 1] then
    redis.call('set', KEYS[i], ARGV[at + 2], 'EXAT', ARGV[at + 3])
    replaced = replaced + 1
  end
end
return replaced`,
  },
  /**
   * KEYS: refresh result, refresh lock, refresh attempt. ARGV: lock token, lock lifetime (ms),
   * attempt lifetime (ms).
   * The refresh compare-and-set: the result of a redemption already made, or the lock to make it,
   * or neither (another holds the lock, or a redemption of this token started and never settled).
   * Read and lock in one step, so no replica takes the lock between another's storing the result
   * and releasing it. The attempt names the token's redemption and outlives the lock: a holder
   * slower than its lock (a loaded machine, a provider that redeemed but answered after the
   * gateway's timeout) still has it, so the token is never redeemed a second time.
   */
  ogwRefreshClaim: {
    lua: `
local result = redis.call('get', KEYS[1])
if result then return {'result', result} end
if redis.call('exists', KEYS[3]) == 1 then return {'busy'} end
if redis.call('set', KEYS[2], ARGV[1], 'PX', ARGV[2], 'NX') then
  redis.call('set', KEYS[3], ARGV[1], 'PX', ARGV[3])
  return {'locked'}
end
return {'busy'}`,
  },
  /**
   * KEYS: refresh result, refresh lock, refresh attempt. ARGV: lock token, sealed result ('' for
   * none), its lifetime (ms). The redemption is over (an answer or a failure): its attempt ends.
   * Stores the result and releases the lock (only if this token still holds it:
   * a holder that outlived its lock must not release the next holder's) in one step, so no waiter
   * finds neither.
   */
  ogwRefreshSettle: {
    lua: `
if ARGV[2] ~= '' then redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
if redis.call('get', KEYS[3]) == ARGV[1] then redis.call('del', KEYS[3]) end
if redis.call('get', KEYS[2]) == ARGV[1] then return redis.call('del', KEYS[2]) end
return 0`,
  },
  /**
   * KEYS: revocation list, its version. ARGV: entry, now (epoch seconds), the longest session
   * lifetime. Adds an entry (GT: a replica whose clock is behind never moves a logout back in
   * time), drops the entries no session can outlive, and bumps the version replicas poll, in one
   * step: a replica never reads the new version with the old list.
   */
  ogwRevoke: {
    lua: `
redis.call('zadd', KEYS[1], 'GT', ARGV[2], ARGV[1])
redis.call('zremrangebyscore', KEYS[1], '-inf', tonumber(ARGV[2]) - tonumber(ARGV[3]))
redis.call('expire', KEYS[1], ARGV[3])
return redis.call('incr', KEYS[2])`,
  },
} as const satisfies Record<string, ScriptDefinition>

export type ScriptName = keyof typeof SCRIPTS

const defined = new WeakSet<RedisClient>()

/** Registers the scripts on a client, once. */
export function defineScripts(client: RedisClient): void {
  if (defined.has(client)) return
  for (const [name, { lua }] of Object.entries(SCRIPTS)) client.defineCommand(name, { lua })
  defined.add(client)
}

type ScriptCall = (numberOfKeys: number, ...keysAndArgs: Array<string | number>) => Promise<unknown>

/**
 * Runs `name` on `keys` and `args` and resolves the script's reply. Always on the client, never
 * queued in a pipeline: a command of its own is what ioredis redirects (MOVED, ASK) and tries
 * again after a failover (redis-client.ts durableWrite).
 */
export function runScript(client: RedisClient, name: ScriptName, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<unknown> {
  defineScripts(client)
  // defineCommand adds the method at run time; ioredis's types cannot know it (numberOfKeys is
  // left out of the definition, so it is the call's first argument).
  const call = (client as unknown as Record<ScriptName, ScriptCall>)[name].bind(client)
  return call(keys.length, ...keys, ...args)
}
