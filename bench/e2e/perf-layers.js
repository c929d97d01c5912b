// Where a proxy's CPU goes, layer by layer, from `perf script` of a
// `perf record -g` (cpu-clock samples; Node started with --perf-basic-prof so
// JIT'd code has names). Each sample is charged to the layer of its leaf frame
// (self time): the kernel (split by the system call the sample is inside),
// libc, libuv, the uWS addon, V8 (built-ins and the C++ runtime and GC), Node's
// C++, JIT'd JS (the proxy's own files, Node's library, other packages), or the
// proxy's binary (nginx, HAProxy). Prints JSON on stdout for syscalls-report.js.
//
//   perf script -i perf.data | node bench/e2e/perf-layers.js OWN_DIR
//
// OWN_DIR: the folder whose JS counts as the proxy's own (lb's dist/).
import { createInterface } from 'node:readline'

const own = process.argv[2] ?? '/dist/'
const FRAME = /^\s*([0-9a-f]+) (.*?) \((.*)\)$/

/** The layer (and kernel sub-layer) of one sample from its frames, leaf first. */
function classify (frames) {
  const [leaf] = frames
  if (leaf === undefined) return ['unknown', '']
  const { sym, dso } = leaf
  if (dso === '[kernel.kallsyms]' || /^ffff/.test(leaf.ip)) return ['kernel', kernelPath(frames)]
  if (/\/libc\.so|\/ld-linux|\/libstdc\+\+|\/libm\.so|\/libpthread|\/libgcc/.test(dso)) return ['libc, libstdc++', '']
  if (/\.node$/.test(dso)) return ['uWS (native addon)', '']
  if (/perf-\d+\.map$/.test(dso) || dso.startsWith('[JIT]')) {
    if (/^(Builtin|BytecodeHandler|Stub|Handler|RegExp):/.test(sym)) return ['V8 built-ins', '']
    if (sym.includes(own)) return ['JS: the proxy\'s own', jsName(sym)]
    if (/ node:/.test(sym)) return ['JS: Node\'s library', jsName(sym)]
    return ['JS: other (packages)', jsName(sym)]
  }
  if (/\/node$|libnode/.test(dso)) {
    if (/^uv_|^uv__/.test(sym)) return ['libuv', '']
    if (/^Builtins_/.test(sym)) return ['V8 built-ins', '']
    if (/^node::/.test(sym)) return ['Node C++', '']
    if (/v8::|^cppgc|^Heap|^heap::/.test(sym)) return [v8Part(sym), '']
    return ['node binary, other', '']
  }
  if (dso === '[unknown]') return ['unknown', '']
  return [`binary: ${dso.split('/').pop()}`, '']
}

/** V8's C++ by part: the garbage collector, the compilers (TurboFan and Maglev run on helper threads), the rest. */
function v8Part (sym) {
  if (/Heap|GC|Mark|Scaveng|Sweep|Evacuat|Concurrent|Worklist|Remembered|Slot|cppgc|Minor|Major|Incremental|Collector/.test(sym)) return 'V8 GC (C++)'
  if (/compiler::|maglev::|Maglev|Turbofan|Compil|Parser|Bytecode|interpreter::|Deoptimiz/.test(sym)) return 'V8 compilers (C++)'
  return 'V8 runtime (C++: API calls, IC misses, strings)'
}

/**
 * The system call a kernel sample is inside: the outermost syscall frame of
 * the kernel stack (write and read are ksys_*, the socket calls __sys_*), else
 * the libc wrapper that entered the kernel (a sample in the entry code itself),
 * else what else brought the CPU into the kernel.
 */
function kernelPath (frames) {
  const syms = frames.map((f) => f.sym)
  if (syms.some((s) => /exc_page_fault/.test(s))) return '(page faults)'
  for (let i = frames.length - 1; i >= 0; i--) {
    const m = /^(?:__x64_sys_|__ia32_sys_|__se_sys_|__do_sys_|ksys_|__sys_|do_)(\w+)/.exec(frames[i].sym)
    if (m !== null && /^ffff/.test(frames[i].ip) && !/^syscall_64|^user_addr_fault|^softirq|^IRQ/.test(m[1])) return m[1]
  }
  const user = frames.find((f) => !/^ffff/.test(f.ip))
  if (user !== undefined && syms.some((s) => /^entry_SYSCALL/.test(s))) {
    if (/futex|lll_|pthread_/.test(user.sym)) return 'futex'
    return user.sym.replace(/^(__GI_)?_*(libc_)?/, '').replace(/^epoll_wait$/, 'epoll_pwait').replace(/^send$/, 'sendto').replace(/^recv$/, 'recvfrom')
  }
  if (syms.some((s) => /irq|sysvec|softirq|apic/.test(s))) return '(interrupts)'
  return '(other)'
}

/** "JS:*name file:///…/x.js:12:3" -> "name x.js:12" */
function jsName (sym) {
  const m = /^\w+:[~^+*]?(\S*) (?:file:\/\/)?(\S+?)(?::\d+)?$/.exec(sym)
  if (m === null) return sym
  const file = m[2].replace(/^.*\/dist\//, '').replace(/^.*\/node_modules\//, '')
  return `${m[1] === '' ? '(anonymous)' : m[1]} ${file}`
}

const layers = new Map()
const kernel = new Map()
const js = new Map()
const threads = new Map() // samples by thread id (Node names every thread "node")
const native = new Map() // leaf symbols outside the kernel and JIT'd JS
let total = 0
let entryExit = 0 // kernel samples in the syscall entry and exit code itself
let frames = []
let tid = ''
const add = (m, k) => m.set(k, (m.get(k) ?? 0) + 1)
const flush = () => {
  if (frames.length === 0) return
  const [layer, sub] = classify(frames)
  total++
  add(layers, layer)
  add(threads, tid)
  if (layer === 'kernel') {
    add(kernel, sub)
    if (/^(do_syscall_64|entry_SYSCALL|syscall_exit|exit_to_user_mode|syscall_return)/.test(frames[0].sym)) entryExit++
  }
  if (layer !== 'kernel' && !layer.startsWith('JS')) add(native, `${frames[0].sym.replace('(anonymous namespace)', 'anon').replace(/\(.*$/, '').slice(0, 70)} (${layer})`)
  if (layer.startsWith('JS')) add(js, `${layer === 'JS: the proxy\'s own' ? '' : '[' + layer.slice(4) + '] '}${sub}`)
  frames = []
}
for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() === '') { flush(); continue }
  const h = /^\S.*?\s+(\d+)\s+\d+\.\d+:/.exec(line)
  if (h !== null) { tid = h[1]; continue }
  const m = FRAME.exec(line)
  if (m !== null) frames.push({ ip: m[1], sym: m[2].replace(/\+0x[0-9a-f]+$/, ''), dso: m[3] })
}
flush()
const pct = (m) => Object.fromEntries([...m].sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, +(100 * v / total).toFixed(2)]))
console.log(JSON.stringify({ samples: total, entry_exit: +(100 * entryExit / total).toFixed(2), layers: pct(layers), kernel: pct(kernel), js: pct(js), threads: [...threads.values()].sort((a, b) => b - a).map((v) => +(100 * v / total).toFixed(1)), native: Object.fromEntries(Object.entries(pct(native)).slice(0, 15)) }))
