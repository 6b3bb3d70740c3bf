// CPU time and peak memory of a process tree from /proc: servers that are more than one process
// (Apache's parent and server process, the gateway's primary and its workers).

import { readFileSync } from 'node:fs'
import { spawnSync } from 'node:child_process'
import type { Stats } from './server.js'

/** Clock ticks per second of /proc/<pid>/stat's utime and stime (USER_HZ). */
const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK']).stdout?.toString().trim() || 100)

function cpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  // Fields after the command name (which may hold spaces) in parentheses: utime and stime are 14 and 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return Number(fields[11]) + Number(fields[12])
}

function peakRssBytes(pid: number): number {
  const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return match === null ? 0 : Number(match[1]) * 1024
}

function childrenOf(pid: number): number[] {
  const out = spawnSync('pgrep', ['-P', String(pid)]).stdout?.toString() ?? ''
  return out.split('\n').filter(Boolean).map(Number)
}

/** User + system CPU of `pid` and its children (all threads), and the sum of their peak RSS. */
export function treeStats(pid: number): Stats {
  const pids = [pid, ...childrenOf(pid)]
  return {
    cpuMicros: (pids.reduce((sum, p) => sum + cpuTicks(p), 0) / CLOCK_TICKS) * 1e6,
    rssBytes: 0,
    maxRssBytes: pids.reduce((sum, p) => sum + peakRssBytes(p), 0),
  }
}
