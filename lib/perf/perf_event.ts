/**
 * perf_event_open for the events that drive sampling: the cpu-clock software event, one per CPU, which
 * fires every `periodNs` of CPU time on that CPU whatever runs there (hardware counters are not needed,
 * so this works in VMs without a PMU); and, for off-CPU time, the context-switches software event, which
 * fires in each thread as it leaves the CPU.
 *
 * @example
 * ```ts ignore
 * import { openCpuClock } from "./perf_event.ts";
 * const fd = openCpuClock(0, 1e9 / 99);
 * ```
 *
 * @module
 */
import { libc, SystemError } from "../sys/libc.ts";

const SYS_PERF_EVENT_OPEN = 298; // x86-64
/** perf_event_attr.type of the kernel's software events. */
export const PERF_TYPE_SOFTWARE = 1;
const PERF_COUNT_SW_CPU_CLOCK = 0;
const PERF_COUNT_SW_CONTEXT_SWITCHES = 3;
const PERF_FLAG_FD_CLOEXEC = 8;
// perf_event_attr is a kernel ABI struct; PERF_ATTR_SIZE_VER5 (112 bytes) holds every field used here
// and every supported kernel accepts it.
const ATTR_SIZE = 112;
const ATTR_FLAG_DISABLED = 1n; // bit 0 of the flags word at offset 40

/**
 * Opens a context-switches event on `cpu` for all processes that fires at every switch, disabled;
 * attaching a BPF program enables it. The program runs in the thread being switched out, before the
 * switch, with the kernel's registers at that point.
 */
export function openContextSwitches(cpu: number): number {
  const attr = new Uint8Array(ATTR_SIZE);
  const view = new DataView(attr.buffer);
  view.setUint32(0, PERF_TYPE_SOFTWARE, true);
  view.setUint32(4, ATTR_SIZE, true);
  view.setBigUint64(8, BigInt(PERF_COUNT_SW_CONTEXT_SWITCHES), true);
  view.setBigUint64(16, 1n, true);
  view.setBigUint64(40, ATTR_FLAG_DISABLED, true);
  const fd = openSystemWideEvent(attr, cpu);
  if (fd < 0) throw new SystemError(`open a context-switches perf event on CPU ${cpu}`, -fd);
  return fd;
}

/**
 * Opens a cpu-clock sampling event on `cpu` for all processes, disabled; attaching a BPF program
 * enables it. A fixed period (not a frequency) because frequency mode overshoots under BPF load.
 */
export function openCpuClock(cpu: number, periodNs: number): number {
  const attr = new Uint8Array(ATTR_SIZE);
  const view = new DataView(attr.buffer);
  view.setUint32(0, PERF_TYPE_SOFTWARE, true);
  view.setUint32(4, ATTR_SIZE, true);
  view.setBigUint64(8, BigInt(PERF_COUNT_SW_CPU_CLOCK), true);
  view.setBigUint64(16, BigInt(Math.max(1, Math.round(periodNs))), true);
  view.setBigUint64(40, ATTR_FLAG_DISABLED, true);
  const fd = openSystemWideEvent(attr, cpu);
  if (fd < 0) throw new SystemError(`open a cpu-clock perf event on CPU ${cpu}`, -fd);
  return fd;
}

/**
 * perf_event_open(2) of `attr` (a `struct perf_event_attr`, its size field set) for every process on
 * `cpu`, close-on-exec. Returns the descriptor, or minus the errno, so that a caller can retry without a
 * feature the kernel refused.
 */
export function openSystemWideEvent(attr: Uint8Array<ArrayBuffer>, cpu: number): number {
  const fd = Number(
    libc().fn.syscall(BigInt(SYS_PERF_EVENT_OPEN), attr, -1n, BigInt(cpu), -1n, BigInt(PERF_FLAG_FD_CLOEXEC)),
  );
  return fd < 0 ? -libc().errno() : fd;
}

/** Closes a perf event descriptor that was never attached. */
export function closePerfEvent(fd: number): void {
  libc().fn.close(fd);
}
