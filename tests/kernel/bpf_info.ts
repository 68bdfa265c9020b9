/**
 * What the kernel says about a loaded program or a created map (`BPF_OBJ_GET_INFO_BY_FD`): the map type
 * it really created and the size of the program the verifier accepted, for the guest suite's details.
 * Only the leading fields, which every kernel since 4.13 fills, are read.
 *
 * @example
 * ```ts ignore
 * import { mapInfo, mapTypeName } from "./bpf_info.ts";
 * const info = mapInfo(object.map("events").fd);
 * console.log(mapTypeName(info.type)); // "RINGBUF"
 * ```
 *
 * @module
 */
import { libbpf, LibbpfError, libbpfPath } from "../../lib/bpf/libbpf.ts";
import { libc } from "../../lib/sys/libc.ts";

/** The leading fields of `struct bpf_map_info`. */
export interface MapInfo {
  type: number;
  keySize: number;
  valueSize: number;
  maxEntries: number;
  flags: number;
}

/** The leading fields of `struct bpf_prog_info`. */
export interface ProgramInfo {
  type: number;
  /** Bytes of JITed machine code (0 when the JIT is off). */
  jitedBytes: number;
  /** Instructions after the verifier's rewrites. */
  instructions: number;
  /**
   * Instructions the verifier processed to accept the program (its load-time work), or null on kernels
   * before 5.16, which do not report it.
   */
  verifiedInstructions: number | null;
  /** The name it was loaded with, cut to 15 bytes by the kernel. */
  name: string;
}

/** BPF_MAP_TYPE_* names by number (enum bpf_map_type). */
const MAP_TYPES = [
  "UNSPEC",
  "HASH",
  "ARRAY",
  "PROG_ARRAY",
  "PERF_EVENT_ARRAY",
  "PERCPU_HASH",
  "PERCPU_ARRAY",
  "STACK_TRACE",
  "CGROUP_ARRAY",
  "LRU_HASH",
  "LRU_PERCPU_HASH",
  "LPM_TRIE",
  "ARRAY_OF_MAPS",
  "HASH_OF_MAPS",
  "DEVMAP",
  "SOCKMAP",
  "CPUMAP",
  "XSKMAP",
  "SOCKHASH",
  "CGROUP_STORAGE",
  "REUSEPORT_SOCKARRAY",
  "PERCPU_CGROUP_STORAGE",
  "QUEUE",
  "STACK",
  "SK_STORAGE",
  "DEVMAP_HASH",
  "STRUCT_OPS",
  "RINGBUF",
  "INODE_STORAGE",
  "TASK_STORAGE",
  "BLOOM_FILTER",
  "USER_RINGBUF",
  "CGRP_STORAGE",
];

/** BPF_PROG_TYPE_* names by number (enum bpf_prog_type), up to the syscall programs. */
const PROGRAM_TYPES = [
  "UNSPEC",
  "SOCKET_FILTER",
  "KPROBE",
  "SCHED_CLS",
  "SCHED_ACT",
  "TRACEPOINT",
  "XDP",
  "PERF_EVENT",
  "CGROUP_SKB",
  "CGROUP_SOCK",
  "LWT_IN",
  "LWT_OUT",
  "LWT_XMIT",
  "SOCK_OPS",
  "SK_SKB",
  "CGROUP_DEVICE",
  "SK_MSG",
  "RAW_TRACEPOINT",
  "CGROUP_SOCK_ADDR",
  "LWT_SEG6LOCAL",
  "LIRC_MODE2",
  "SK_REUSEPORT",
  "FLOW_DISSECTOR",
  "CGROUP_SYSCTL",
  "RAW_TRACEPOINT_WRITABLE",
  "CGROUP_SOCKOPT",
  "TRACING",
  "STRUCT_OPS",
  "EXT",
  "LSM",
  "SK_LOOKUP",
  "SYSCALL",
];

/** The name of a map type, e.g. "LPM_TRIE". */
export function mapTypeName(type: number): string {
  return MAP_TYPES[type] ?? `type ${type}`;
}

/** The name of a program type, e.g. "PERF_EVENT". */
export function programTypeName(type: number): string {
  return PROGRAM_TYPES[type] ?? `type ${type}`;
}

/** BPF_MAP_TYPE_LPM_TRIE. */
export const MAP_TYPE_LPM_TRIE = 11;

/** The kernel's bpf_*_info of an object, and how many of its bytes the kernel filled. */
function objectInfo(fd: number, what: string): { view: DataView; length: number } {
  // Larger than any kernel's struct; the kernel checks that the bytes it does not know are zero.
  const info = new Uint8Array(256);
  const length = new Uint32Array([info.length]);
  const result = libbpf().fn.bpf_obj_get_info_by_fd(fd, info, new Uint8Array(length.buffer));
  if (result < 0) throw new LibbpfError(`get the kernel's information on ${what}`, -result);
  return { view: new DataView(info.buffer), length: length[0]! };
}

/** Where struct bpf_prog_info holds verified_insns (include/uapi/linux/bpf.h, Linux 5.16+). */
const PROG_INFO_VERIFIED_INSNS = 216;
/** Where struct bpf_prog_info holds name[16] (Linux 4.15+). */
const PROG_INFO_NAME = 64;
const PROG_NAME_BYTES = 16;

/** Reads a map's type, sizes and flags from the kernel. */
export function mapInfo(fd: number): MapInfo {
  const { view } = objectInfo(fd, `map fd ${fd}`);
  return {
    type: view.getUint32(0, true),
    keySize: view.getUint32(8, true),
    valueSize: view.getUint32(12, true),
    maxEntries: view.getUint32(16, true),
    flags: view.getUint32(20, true),
  };
}

/** Reads a program's type and sizes from the kernel. */
export function programInfo(fd: number): ProgramInfo {
  const { view, length } = objectInfo(fd, `program fd ${fd}`);
  return {
    type: view.getUint32(0, true),
    jitedBytes: view.getUint32(16, true),
    instructions: view.getUint32(20, true) / 8,
    verifiedInstructions: length >= PROG_INFO_VERIFIED_INSNS + 4
      ? view.getUint32(PROG_INFO_VERIFIED_INSNS, true)
      : null,
    name: cStringAt(new Uint8Array(view.buffer, PROG_INFO_NAME, PROG_NAME_BYTES)),
  };
}

function cStringAt(bytes: Uint8Array): string {
  const end = bytes.indexOf(0);
  return new TextDecoder().decode(bytes.subarray(0, end < 0 ? bytes.length : end));
}

// Only the benchmark asks for programs by id: bound here, so the profiler's libbpf binding stays smaller.
let getFdById: Deno.DynamicLibrary<{ bpf_prog_get_fd_by_id: { parameters: ["u32"]; result: "i32" } }> | null =
  null;

/**
 * The information of loaded program `id` (any process's), or null when no program has that id any more.
 * Asks the kernel directly (BPF_PROG_GET_FD_BY_ID), so no process is started.
 */
export function programInfoById(id: number): ProgramInfo | null {
  libbpf();
  getFdById ??= Deno.dlopen(libbpfPath(), {
    bpf_prog_get_fd_by_id: { parameters: ["u32"], result: "i32" },
  });
  const fd = getFdById.symbols.bpf_prog_get_fd_by_id(id);
  if (fd < 0) return null;
  try {
    return programInfo(fd);
  } finally {
    libc().fn.close(fd);
  }
}
