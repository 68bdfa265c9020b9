/**
 * Which of the tracer's hash maps the kernel may fill on demand. A hash map is preallocated by default:
 * every element of `max_entries` is allocated, and its memory charged, when the map is created. Before
 * Linux 6.1 that was required, since a perf_event program may only use preallocated hash maps (they are
 * read in NMI context). From 6.1 on, hash map elements come from an allocator that is safe in any context,
 * so the maps that fill as processes and files appear are created empty and grow as they are written.
 *
 * Measured on Linux 6.18 while recording beside one busy process (`bpftool map show`, memlock): the
 * tracer's maps hold 4.9 MB of kernel memory instead of 19.3 MB. Their creation takes 5 ms instead of 10
 * (strace -T), which is within the noise of a whole record's CPU time.
 *
 * @example
 * ```ts ignore
 * import { allocateOnDemand } from "./map_allocation.ts";
 * const object = BpfObject.open(bytes, "omniprof.bpf.o");
 * allocateOnDemand(object); // before object.load()
 * ```
 *
 * @module
 */
import type { BpfObject } from "../bpf/object.ts";
import { BPF_F_NO_PREALLOC } from "../bpf/map.ts";
import { bucketMapName } from "../unwind/stack_delta_maps.ts";
import { StackDeltaConstants } from "../../support/types.ts";
import type { BpfMapName } from "../../support/bpf_catalogue.ts";
import { runtimeProcessMaps, RUNTIMES } from "../interpreter/runtimes.ts";

const { StackDeltaBucketSmallest: smallest, StackDeltaBucketLargest: largest } = StackDeltaConstants;

/**
 * The hash maps sized for the worst case of a whole machine, of which a session uses a small part: the
 * stack-delta tables' indexes, the process and file registries, the pid filter, the runtimes' per-process records
 * and the outer maps of the stack-delta buckets. (LRU maps are always preallocated: eviction needs them.)
 */
export const ON_DEMAND_MAPS: readonly BpfMapName[] = [
  "stack_delta_page_to_info",
  "known_pids",
  "loaded_files",
  "pid_filter",
  "interpreter_offsets",
  ...runtimeProcessMaps(RUNTIMES),
  ...Array.from({ length: largest - smallest + 1 }, (_, i) => bucketMapName(smallest + i)),
];

/** Whether a kernel of this release (`uname -r`) lets perf_event programs use hash maps allocated on demand. */
export function kernelAllocatesOnDemand(release: string): boolean {
  const match = /^(\d+)\.(\d+)/.exec(release);
  if (match === null) return false;
  const major = Number(match[1]);
  const minor = Number(match[2]);
  return major > 6 || (major === 6 && minor >= 1);
}

/**
 * Marks {@linkcode ON_DEMAND_MAPS} BPF_F_NO_PREALLOC when the running kernel allows it; call before load.
 * Returns whether it did.
 */
export function allocateOnDemand(object: BpfObject, release: string = Deno.osRelease()): boolean {
  if (!kernelAllocatesOnDemand(release)) return false;
  for (const name of ON_DEMAND_MAPS) {
    const map = object.map(name);
    map.setFlags(map.flags | BPF_F_NO_PREALLOC);
  }
  return true;
}
