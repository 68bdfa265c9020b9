/**
 * Executable mappings of every process, from the kernel as they are made, in order: what perf records
 * alongside its samples. Reading `/proc/PID/maps` after the fact misses every process that has exited by
 * then; these records are written by the process itself, in exec and mmap, so a process that lives 1 ms
 * is known as well as one that lives for hours, after it has exited.
 *
 * One software dummy perf event per online CPU (it never samples; it only carries records), for every
 * process, with `mmap` and `mmap2` (a record per executable mapping, with the file's build ID where the
 * kernel gives it (5.12+, `build_id`), else its device and inode), `comm` and `comm_exec` (a record at
 * exec), `task` (fork and exit), every record stamped with CLOCK_MONOTONIC (`use_clockid`). Each CPU has
 * its own ring buffer ({@linkcode PerfRing}); {@linkcode MappingEvents.drain} merges them in time order
 * and decodes them ({@linkcode readRecord}: every record is checked; a bad one is counted and skipped).
 *
 * ## Ordering
 *
 * A record is stamped on the CPU its process runs on, a few microseconds before the kernel finishes
 * writing it. `drain()` delivers, from every CPU, the records stamped before its horizon (the clock read
 * as the drain begins, before it looks at any ring) in time order, and leaves the later ones for the next
 * drain. A record that causes another (a fork before the child's exec on another CPU, a mapping before
 * the code in it runs) is finished before the record it causes is stamped, so whenever the later record
 * is delivered the earlier one is delivered first, in the same drain or an earlier one. Only records of
 * unrelated processes stamped within microseconds of a horizon may arrive one drain late.
 *
 * Against the tracer's BPF ring buffer, whose samples carry bpf_ktime_get_ns() (the same clock), a
 * consumer that resolves each sample against process state as it was when the sample was taken does,
 * on every tick:
 *
 * 1. `horizon = monotonicNs()`;
 * 2. drain the BPF ring into a queue of samples sorted by time (every one of them was taken before now);
 * 3. `events.drain(sink, horizon)`, where the sink, before it applies an event stamped `t`, resolves the
 *    queued samples taken before `t` (so a sample taken just before its process exec'd is resolved
 *    against the old program, and one taken before an exit before the process is forgotten);
 * 4. resolves the queued samples taken before `horizon`, and keeps the rest for the next tick: the events
 *    they may depend on are not all delivered yet.
 *
 * A sample in a mapping can never come before the event of that mapping: the mapping exists before any
 * code in it runs. When `stats.lost` grows, records were dropped (the ring filled between two drains):
 * the consumer cannot know which processes they were about and should read `/proc` for the processes it
 * meets next. Processes that existed before `open()` have no records: `/proc` seeds them.
 *
 * Records are written to the ring of the CPU the process runs on: what runs on a CPU that came online
 * after `open()` is missed.
 *
 * @example
 * ```ts ignore
 * import { MappingEvents } from "./mapping_events.ts";
 * using events = MappingEvents.open();
 * // ... later, every 100 ms:
 * events.drain({
 *   onMmap: (m) => console.log(m.pid, m.path, m.start.toString(16)),
 *   onExec: (pid, comm) => console.log(pid, "exec", comm),
 *   onFork: (pid, parent) => console.log(pid, "forked from", parent),
 *   onExit: (pid) => console.log(pid, "exit"),
 * });
 * console.log(events.stats);
 * ```
 *
 * @module
 */
import { onlineCpus } from "../sys/cpus.ts";
import { libc, SystemError } from "../sys/libc.ts";
import { CLOCK_MONOTONIC, monotonicNs } from "../sys/monotonic_clock.ts";
import { openSystemWideEvent, PERF_TYPE_SOFTWARE } from "./perf_event.ts";
import { type MappingEventSink, newRecordCounts, type RecordCounts } from "./perf_records.ts";
import { PerfRing } from "./perf_ring.ts";

export type { ExecutableMapping, MappingEventSink, RecordCounts } from "./perf_records.ts";

const PERF_COUNT_SW_DUMMY = 9;
const PERF_SAMPLE_TID = 1 << 1;
const PERF_SAMPLE_TIME = 1 << 2;
// Bits of the flags word at offset 40 of perf_event_attr (include/uapi/linux/perf_event.h).
const FLAG_MMAP = 1 << 8;
const FLAG_COMM = 1 << 9;
const FLAG_TASK = 1 << 13;
const FLAG_WATERMARK = 1 << 14;
const FLAG_SAMPLE_ID_ALL = 1 << 18;
const FLAG_MMAP2 = 1 << 23;
const FLAG_COMM_EXEC = 1 << 24;
const FLAG_USE_CLOCKID = 1 << 25;
/** Bit 34: in the high word. Kernels before 5.12 refuse it with EINVAL (an unknown attribute bit). */
const HIGH_FLAG_BUILD_ID = 1 << 2;
const ATTR_SIZE = 112;
const ATTR_FLAGS = 40;
/** `wakeup_watermark` (with the watermark flag): bytes in the ring that make its descriptor readable. */
const ATTR_WAKEUP = 48;
const ATTR_CLOCKID = 92;
const EPERM = 1;
const ENOENT = 2;
const EACCES = 13;
const ENODEV = 19;
const EINVAL = 22;
const ENOSYS = 38;
const EOPNOTSUPP = 95;

/**
 * The default data area of each CPU's ring: 1 MiB, locked in memory, per CPU. A start of /bin/true (fork,
 * exec, mappings of the executable, the loader, the vDSO and libc, exit: 7 records) writes about 620 bytes;
 * a burst of 1,000 starts on one CPU between two drains fills 60% of 1 MiB and 512 KiB would lose records
 * (mapping_events_test.ts measures both). Programs that map more libraries write more per start: a
 * session that drains less often, or watches builds of large programs pinned to few CPUs, can ask for more.
 */
export const DEFAULT_RING_BYTES = 1 << 20;
/**
 * A record stamped this long after the drain looked at its ring, or before `open()`, cannot be the
 * kernel's: it would stay ahead of every horizon and stall its ring for good.
 */
const FUTURE_SLACK_NS = 1e9;

/** How to open {@linkcode MappingEvents}. */
export interface MappingEventsOptions {
  /** Bytes of each CPU's ring (a power of two, at least a page). Default {@linkcode DEFAULT_RING_BYTES}. */
  ringBytes?: number;
  /** Ask for build IDs in mapping records where the kernel supports it (5.12+). Default true. */
  buildIds?: boolean;
  /** The CPUs to watch. Default: every online CPU. */
  cpus?: readonly number[];
  /**
   * Bytes of records in one CPU's ring that make its descriptor ({@linkcode MappingEvents.descriptors})
   * readable, so that a reader waiting on them drains before the ring fills. Default a quarter of the
   * ring: a wake-up per several hundred process starts, never one per record.
   */
  wakeupBytes?: number;
}

/** The kernel's records of process starts, exits and executable mappings, on every CPU. */
export class MappingEvents implements Disposable {
  /** The CPUs watched, one ring each. */
  readonly cpus: readonly number[];
  /** Whether the kernel accepted the request for build IDs (mappings may still come with an inode). */
  readonly buildIds: boolean;
  /** Bytes of each CPU's ring. */
  readonly ringBytes: number;
  #fds: number[];
  #rings: PerfRing[];
  #counts: RecordCounts = newRecordCounts();
  /** CLOCK_MONOTONIC before the events were opened: every record is stamped later. */
  #openedAt: number;

  private constructor(
    cpus: number[],
    buildIds: boolean,
    ringBytes: number,
    openedAt: number,
    fds: number[],
    rings: PerfRing[],
  ) {
    this.cpus = cpus;
    this.buildIds = buildIds;
    this.ringBytes = ringBytes;
    this.#openedAt = openedAt;
    this.#fds = fds;
    this.#rings = rings;
  }

  /**
   * Opens a dummy event and maps its ring on each CPU; records flow from then on.
   *
   * @throws {SystemError} naming the cause when the kernel refuses: no permission for system-wide perf
   * events (needs CAP_PERFMON, CAP_SYS_ADMIN or root), no software dummy event, or a ring over the
   * locked-memory allowance. The caller can then fall back to `/proc`.
   * @throws {RangeError} for a ring size that is not a power-of-two number of pages.
   */
  static open(options: MappingEventsOptions = {}): MappingEvents {
    const { pageSize } = libc();
    const ringBytes = options.ringBytes ?? DEFAULT_RING_BYTES;
    if (ringBytes < pageSize || (ringBytes & (ringBytes - 1)) !== 0 || ringBytes > 2 ** 30) {
      throw new RangeError(
        `Cannot open mapping events: a ring of ${ringBytes} bytes is not a power-of-two number of pages`,
      );
    }
    const cpus = [...(options.cpus ?? onlineCpus())];
    const wakeupBytes = Math.max(1, Math.min(ringBytes - pageSize, options.wakeupBytes ?? ringBytes / 4));
    const openedAt = monotonicNs();
    let buildIds = options.buildIds ?? true;
    const fds: number[] = [];
    const rings: PerfRing[] = [];
    try {
      for (const cpu of cpus) {
        let fd = openSystemWideEvent(dummyEventAttr(buildIds, wakeupBytes), cpu);
        if (fd === -EINVAL && buildIds) {
          buildIds = false;
          fd = openSystemWideEvent(dummyEventAttr(false, wakeupBytes), cpu);
        }
        if (fd < 0) throw openError(cpu, -fd);
        fds.push(fd);
        rings.push(mapRing(fd, cpu, ringBytes));
      }
    } catch (error) {
      for (const ring of rings) ring.close();
      for (const fd of fds) libc().fn.close(fd);
      throw error;
    }
    return new MappingEvents(cpus, buildIds, ringBytes, openedAt, fds, rings);
  }

  /**
   * The events' descriptors, one per CPU: each polls readable (EPOLLIN) once its ring holds the wake-up
   * watermark of records. They stay this object's: watch them, never close them.
   */
  get descriptors(): readonly number[] {
    return this.#fds;
  }

  /** Records and bytes read, records the kernel dropped for want of space, malformed records skipped. */
  get stats(): Readonly<RecordCounts> {
    return this.#counts;
  }

  /**
   * Hands `sink` the events of every CPU stamped before `horizonNs` (CLOCK_MONOTONIC; by default, and
   * at most, the time of the call), in time order, and frees their space in the rings; later ones wait
   * for the next drain (see the module's Ordering section). Returns how many events were delivered. When
   * `sink` throws, the events before it and the one it threw on are consumed and the error is rethrown.
   */
  drain(sink: MappingEventSink, horizonNs = Infinity): number {
    const rings = this.#rings;
    const counts = this.#counts;
    // Read before the heads: a later horizon could deliver a record before one that caused it.
    const horizon = Math.min(horizonNs, monotonicNs());
    for (const ring of rings) ring.load(counts);
    // Read after the heads: every complete record was stamped before this.
    const latest = monotonicNs() + FUTURE_SLACK_NS;
    const earliest = this.#openedAt;
    let delivered = 0;
    try {
      for (;;) {
        // The next record in time among the rings. A linear scan: a drain reads few records per CPU, and
        // most rings are empty or run out first.
        let next: PerfRing | null = null;
        let nextTime = horizon;
        for (const ring of rings) {
          while (ring.peek(counts) > 0 && (ring.time > latest || ring.time < earliest)) {
            counts.records++;
            counts.bytes += ring.peek(counts);
            counts.malformed++;
            ring.skip();
          }
          if (ring.peek(counts) > 0 && ring.time < nextTime) {
            next = ring;
            nextTime = ring.time;
          }
        }
        if (next === null) break;
        if (next.read(sink, counts)) delivered++;
      }
    } finally {
      for (const ring of rings) ring.commit();
    }
    return delivered;
  }

  /** Unmaps the rings and closes the events (no more records are kept). Safe to call twice. */
  close(): void {
    // Each ring with its descriptor: a process never holds more than one of them without the other.
    this.#rings.forEach((ring, i) => {
      ring.close();
      libc().fn.close(this.#fds[i]!);
    });
    this.#rings = [];
    this.#fds = [];
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/** The `struct perf_event_attr` of the dummy event the module describes. */
function dummyEventAttr(buildIds: boolean, wakeupBytes: number): Uint8Array<ArrayBuffer> {
  const attr = new Uint8Array(ATTR_SIZE);
  const view = new DataView(attr.buffer);
  view.setUint32(0, PERF_TYPE_SOFTWARE, true);
  view.setUint32(4, ATTR_SIZE, true);
  view.setUint32(8, PERF_COUNT_SW_DUMMY, true);
  view.setUint32(24, PERF_SAMPLE_TID | PERF_SAMPLE_TIME, true);
  view.setUint32(
    ATTR_FLAGS,
    FLAG_MMAP | FLAG_COMM | FLAG_TASK | FLAG_WATERMARK | FLAG_SAMPLE_ID_ALL | FLAG_MMAP2 | FLAG_COMM_EXEC |
      FLAG_USE_CLOCKID,
    true,
  );
  view.setUint32(ATTR_FLAGS + 4, buildIds ? HIGH_FLAG_BUILD_ID : 0, true);
  // Wake a waiting reader by bytes, not per record: a storm of process starts writes thousands a second.
  view.setUint32(ATTR_WAKEUP, wakeupBytes, true);
  view.setInt32(ATTR_CLOCKID, CLOCK_MONOTONIC, true);
  return attr;
}

function openError(cpu: number, errno: number): SystemError {
  const error = new SystemError(
    `open the kernel's mapping records (a perf dummy event) on CPU ${cpu}`,
    errno,
  );
  const hint = openHint(errno);
  if (hint !== null) error.message += `: ${hint}`;
  return error;
}

function openHint(errno: number): string | null {
  switch (errno) {
    case EACCES:
    case EPERM:
      return `perf events of every process need root, CAP_PERFMON or CAP_SYS_ADMIN (kernel.perf_event_paranoid is ${
        readSysctl("kernel/perf_event_paranoid")
      })`;
    case ENOENT:
    case ENODEV:
    case EOPNOTSUPP:
      return "this kernel has no software dummy event (Linux 3.12+)";
    case ENOSYS:
      return "this kernel has no perf events (CONFIG_PERF_EVENTS)";
    case EINVAL:
      return "this kernel lacks an attribute the records need (mmap2, comm_exec, use_clockid: Linux 4.1+)";
    default:
      return null;
  }
}

function mapRing(fd: number, cpu: number, ringBytes: number): PerfRing {
  try {
    return PerfRing.map(fd, ringBytes);
  } catch (error) {
    if (error instanceof SystemError && error.errno === EPERM) {
      error.message += `: on CPU ${cpu}, over the locked-memory allowance for perf rings ` +
        `(kernel.perf_event_mlock_kb is ${
          readSysctl("kernel/perf_event_mlock_kb")
        } per CPU) without CAP_IPC_LOCK`;
    }
    throw error;
  }
}

function readSysctl(name: string): string {
  try {
    return Deno.readTextFileSync(`/proc/sys/${name}`).trim();
  } catch {
    return "unknown";
  }
}
