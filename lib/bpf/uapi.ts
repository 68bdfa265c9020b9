/**
 * The kernel's numbers for BPF map and program types (include/uapi/linux/bpf.h, `enum bpf_map_type` and
 * `enum bpf_prog_type`): fixed by the kernel's ABI, so they are written down here rather than read from a
 * kernel's BTF, which would make the catalogue of the BPF object depend on the machine that built it.
 *
 * @example
 * ```ts
 * import { BpfMapType } from "./uapi.ts";
 * console.log(BpfMapType.Ringbuf); // 27
 * ```
 *
 * @module
 */

/** `enum bpf_map_type`, BPF_MAP_TYPE_HASH as `Hash`. */
export const BpfMapType = {
  Unspec: 0,
  Hash: 1,
  Array: 2,
  ProgArray: 3,
  PerfEventArray: 4,
  PercpuHash: 5,
  PercpuArray: 6,
  StackTrace: 7,
  CgroupArray: 8,
  LruHash: 9,
  LruPercpuHash: 10,
  LpmTrie: 11,
  ArrayOfMaps: 12,
  HashOfMaps: 13,
  Devmap: 14,
  Sockmap: 15,
  Cpumap: 16,
  Xskmap: 17,
  Sockhash: 18,
  CgroupStorage: 19,
  ReuseportSockarray: 20,
  PercpuCgroupStorage: 21,
  Queue: 22,
  Stack: 23,
  SkStorage: 24,
  DevmapHash: 25,
  StructOps: 26,
  Ringbuf: 27,
  InodeStorage: 28,
  TaskStorage: 29,
  BloomFilter: 30,
  UserRingbuf: 31,
  CgrpStorage: 32,
} as const;
/** One value of {@linkcode BpfMapType}. */
export type BpfMapType = (typeof BpfMapType)[keyof typeof BpfMapType];

/** The values of `enum bpf_prog_type` that the sections of {@linkcode programTypeOfSection} give. */
export const BpfProgramType = {
  SocketFilter: 1,
  Kprobe: 2,
  Tracepoint: 5,
  PerfEvent: 7,
  RawTracepoint: 17,
  Tracing: 26,
  Lsm: 29,
  Syscall: 31,
} as const;
/** One value of {@linkcode BpfProgramType}. */
export type BpfProgramType = (typeof BpfProgramType)[keyof typeof BpfProgramType];

/**
 * How libbpf reads a program's type from its ELF section (its `section_defs` table): a name alone, or a
 * prefix that may be followed by `/` and the attach point (`raw_tp/sched_process_exec`). Only the kinds
 * of program a profiler has use for are listed.
 */
const SECTIONS: readonly { name: string; attachPoint: boolean; type: BpfProgramType }[] = [
  { name: "socket", attachPoint: true, type: BpfProgramType.SocketFilter },
  { name: "kprobe", attachPoint: true, type: BpfProgramType.Kprobe },
  { name: "kretprobe", attachPoint: true, type: BpfProgramType.Kprobe },
  { name: "uprobe", attachPoint: true, type: BpfProgramType.Kprobe },
  { name: "uretprobe", attachPoint: true, type: BpfProgramType.Kprobe },
  { name: "usdt", attachPoint: true, type: BpfProgramType.Kprobe },
  { name: "tracepoint", attachPoint: true, type: BpfProgramType.Tracepoint },
  { name: "tp", attachPoint: true, type: BpfProgramType.Tracepoint },
  { name: "raw_tracepoint", attachPoint: true, type: BpfProgramType.RawTracepoint },
  { name: "raw_tp", attachPoint: true, type: BpfProgramType.RawTracepoint },
  { name: "tp_btf", attachPoint: true, type: BpfProgramType.Tracing },
  { name: "fentry", attachPoint: true, type: BpfProgramType.Tracing },
  { name: "fexit", attachPoint: true, type: BpfProgramType.Tracing },
  { name: "lsm", attachPoint: true, type: BpfProgramType.Lsm },
  { name: "perf_event", attachPoint: false, type: BpfProgramType.PerfEvent },
  { name: "syscall", attachPoint: false, type: BpfProgramType.Syscall },
];

/**
 * The program type libbpf gives a program in ELF section `section`.
 *
 * @throws {RangeError} for a section this table does not know (add it, with libbpf's type for it).
 */
export function programTypeOfSection(section: string): BpfProgramType {
  for (const entry of SECTIONS) {
    if (section === entry.name || (entry.attachPoint && section.startsWith(`${entry.name}/`))) {
      return entry.type;
    }
  }
  throw new RangeError(
    `Cannot tell the type of a BPF program in section ${section}: lib/bpf/uapi.ts lists none`,
  );
}
