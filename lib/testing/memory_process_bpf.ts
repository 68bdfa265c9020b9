/**
 * The BPF side of process state held in memory, for tests of the process manager without a BPF object:
 * the trie and the known-pid set as {@linkcode MemoryMap}s (written through the real trie writer) and the
 * runtimes' handler as a {@linkcode MemoryEbpfHandler}, with the trie's entries decoded. Test-only.
 *
 * @module
 */
import { MemoryEbpfHandler } from "../interpreter/memory_ebpf_handler.ts";
import type { ProcessBpf } from "../process/process_bpf.ts";
import type { Pid } from "../types.ts";
import { PidPageMappings } from "../unwind/pid_page_mappings.ts";
import { decodeBiasAndUnwindProgram } from "../../support/bias_and_unwind_program.ts";
import { pidPageMappingInfoLayout, pidPageMappingKeyLayout } from "../../support/types.ts";
import { MemoryMap } from "./memory_map.ts";

/** One entry of the trie, decoded. */
export interface TrieEntry {
  readonly pid: Pid;
  /** The mapping it belongs to: [start, end). */
  readonly start: number;
  readonly end: number;
  readonly bpfId: number;
  readonly program: number;
}

/** Process state "in BPF", in memory. */
export class MemoryProcessBpf implements ProcessBpf {
  readonly trieMap = new MemoryMap();
  readonly generation = new MemoryMap();
  readonly knownPids = new MemoryMap();
  readonly trie = new PidPageMappings(this.trieMap, this.generation);
  readonly ebpf = new MemoryEbpfHandler();

  /** The trie's entries. */
  entries(): TrieEntry[] {
    const out: TrieEntry[] = [];
    for (const [key, value] of this.trieMap.pairs()) {
      const keyView = new DataView(key.buffer);
      const view = new DataView(value.buffer);
      const u64 = (offset: number) =>
        view.getUint32(offset, true) + view.getUint32(offset + 4, true) * 2 ** 32;
      out.push({
        pid: keyView.getUint32(pidPageMappingKeyLayout.pid_be.offset, false) as Pid,
        start: u64(pidPageMappingInfoLayout.start.offset),
        end: u64(pidPageMappingInfoLayout.end.offset),
        bpfId: u64(pidPageMappingInfoLayout.file_id.offset),
        program: decodeBiasAndUnwindProgram(value, pidPageMappingInfoLayout.bias_and_unwind_program.offset)
          .unwindProgram,
      });
    }
    return out;
  }

  /** The pids with entries in the trie, each once, in ascending order. */
  pids(): Pid[] {
    return [...new Set(this.entries().map((entry) => entry.pid))].sort((a, b) => a - b);
  }
}
