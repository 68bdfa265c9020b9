/**
 * The BPF side of process state in a session: the pid/page trie's one writer, the set of processes the
 * unwinder knows, and the handler runtime instances write their records and areas through (which shares
 * the trie writer, so the trie has exactly one).
 *
 * @example
 * ```ts ignore
 * import { processBpf } from "./process_bpf.ts";
 * using processes = new ProcessManager({ files, bpf: processBpf(object, files, RUNTIMES) });
 * ```
 *
 * @module
 */
import type { MapWriter } from "../bpf/map.ts";
import type { BpfObject } from "../bpf/object.ts";
import { BpfEbpfHandler } from "../interpreter/bpf_ebpf_handler.ts";
import type { EbpfHandler } from "../interpreter/interpreter.ts";
import type { Runtime } from "../interpreter/runtime.ts";
import { PidPageMappings } from "../unwind/pid_page_mappings.ts";
import type { FileRegistry } from "./file_registry.ts";

/** Where process state goes in BPF. */
export interface ProcessBpf {
  /** The pid/page trie's one writer in the session. */
  readonly trie: PidPageMappings;
  /** The processes the unwinder knows (pid -> 1): BPF reports the others to the host. */
  readonly knownPids: MapWriter;
  /** What runtime instances write their BPF state through. */
  readonly ebpf: EbpfHandler;
}

/** The process maps of the loaded `object`; `files` and `runtimes` serve the runtimes' handler. */
export function processBpf(object: BpfObject, files: FileRegistry, runtimes: readonly Runtime[]): ProcessBpf {
  const trie = new PidPageMappings(object.map("pid_page_to_mapping_info"), object.map("mapping_generation"));
  return {
    trie,
    knownPids: object.map("known_pids"),
    ebpf: new BpfEbpfHandler(object, trie, files, runtimes),
  };
}
