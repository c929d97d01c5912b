// CPU accounting for bench/h2 from /proc (Linux), as the shared harness's
// lib/proc-cpu.js does it: the user + system ticks of a process and all its
// descendants (nginx's master and worker, lb's threads are in its own stat),
// the machine's busy ticks from /proc/stat, and the CPU a finished child
// used (its parent's cutime + cstime after the wait).
import { readFileSync, readdirSync } from 'node:fs'
import { cpus } from 'node:os'

/** clock ticks per second (CLK_TCK; 100 on Linux) */
export const HZ = Number(process.env.CLK_TCK ?? 100)
export const NCPU = cpus().length

interface Stat { ppid: number, ticks: number, childTicks: number }

function stat (pid: number): Stat | null {
  let s: string
  try { s = readFileSync(`/proc/${pid}/stat`, 'utf8') } catch { return null }
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ') // f[0] is field 3 (state)
  return { ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]), childTicks: Number(f[13]) + Number(f[14]) }
}

/** CPU seconds of `root` and every process below it, so far */
export function treeCpu (root: number): number {
  const children = new Map<number, number[]>()
  const ticks = new Map<number, number>()
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue
    const st = stat(Number(d))
    if (st === null) continue
    ticks.set(Number(d), st.ticks)
    children.set(st.ppid, [...(children.get(st.ppid) ?? []), Number(d)])
  }
  let sum = 0
  const stack = [root]
  while (stack.length > 0) {
    const p = stack.pop()!
    sum += ticks.get(p) ?? 0
    stack.push(...(children.get(p) ?? []))
  }
  return sum / HZ
}

/** busy CPU seconds of the whole machine so far (all cores) */
export function machineBusy (): number {
  const [user, nice, system, , , irq, softirq, steal] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number)
  return (user! + nice! + system! + irq! + softirq! + (steal ?? 0)) / HZ
}

/** The CPU seconds a shell's waited-for children used: its /proc stat after the wait (`cat /proc/$$/stat`). */
export function childCpuFromStat (text: string): number {
  const f = text.slice(text.lastIndexOf(')') + 2).trim().split(' ')
  return (Number(f[13]) + Number(f[14])) / HZ
}
