/**
 * The `pid_page_to_mapping_info` LPM trie: for each process, which address ranges belong to which file,
 * with the bias that turns an address into the file's ELF virtual address and the unwind program to
 * run there. A mapping becomes a few aligned prefixes (lib/lpm/prefixes.ts); keys hold the pid and the
 * address big-endian so that a prefix of the key's bits is a prefix of (pid, address).
 *
 * The unwinder keeps the trie's answers per CPU across samples while `mapping_generation` holds the
 * value it had when they were found; so every change that can make an answer wrong (a removal, a prefix
 * laid over a mapping) writes a new value there, after the trie has changed. One object of this class is
 * the trie's only writer in a session (the process manager's mappings and the runtimes' areas both go
 * through it), so a count of changes is a value no earlier answer carries.
 *
 * @module
 */
import { type MapWriter, writeU64 } from "../bpf/map.ts";
import { type Prefix, prefixesForRange } from "../lpm/prefixes.ts";
import type { Pid } from "../types.ts";
import { encodeBiasAndUnwindProgram } from "../../support/bias_and_unwind_program.ts";
import {
  pidPageMappingInfoLayout,
  pidPageMappingKeyLayout,
  StackDeltaConstants,
} from "../../support/types.ts";
import { BPF_MAPS } from "../../support/bpf_catalogue.ts";

const PID_BITS = StackDeltaConstants.BitWidthPid;
const ADDRESS_BITS = StackDeltaConstants.BitWidthPage;

/** Writes and removes a process's entries of the trie. */
export class PidPageMappings {
  #map: MapWriter;
  #generation: MapWriter;
  #generationKey = new Uint8Array(BPF_MAPS.mapping_generation.keySize);
  #generationValue = new Uint8Array(BPF_MAPS.mapping_generation.valueSize);
  /** Changes that could make a cached answer wrong, so far: the generation BPF compares against. */
  #changes = 0;
  #key = new Uint8Array(pidPageMappingKeyLayout.sizeof);
  #keyView = new DataView(this.#key.buffer);
  #value = new Uint8Array(pidPageMappingInfoLayout.sizeof);
  #valueView = new DataView(this.#value.buffer);
  /** Entries currently in the trie. */
  entries = 0;
  /** Map updates and deletes made so far (each one a bpf() call). */
  writes = 0;

  /** `map` is the trie, `generation` the one-entry array the unwinder checks its cached answers against. */
  constructor(map: MapWriter, generation: MapWriter) {
    this.#map = map;
    this.#generation = generation;
  }

  /**
   * Maps [start, end) of `pid` to `fileId` with `bias` and `unwindProgram`; returns the prefixes used.
   * When the trie refuses one (it is full), the prefixes already written are removed again and the error
   * is thrown: a mapping is installed whole or not at all, and nothing is left that no one would delete.
   */
  install(
    pid: Pid,
    start: number,
    end: number,
    fileId: number,
    bias: number,
    unwindProgram: number,
  ): Prefix[] {
    const prefixes = prefixesForRange(start, end, ADDRESS_BITS);
    this.#setValue(start, end, fileId, bias, unwindProgram);
    let written = 0;
    try {
      for (const prefix of prefixes) {
        this.#setKey(pid, prefix);
        this.writes++;
        this.#map.update(this.#key, this.#value);
        this.entries++;
        written++;
      }
    } catch (error) {
      this.remove(pid, prefixes.slice(0, written));
      throw error;
    }
    return prefixes;
  }

  /**
   * Maps the addresses of one prefix of `pid` (e.g. a runtime's JIT area) to `fileId` with `bias` and
   * `unwindProgram`; undo with {@linkcode remove}.
   */
  installPrefix(pid: Pid, prefix: Prefix, fileId: number, bias: number, unwindProgram: number): void {
    const start = prefix.value;
    const end = start + 2 ** (ADDRESS_BITS - prefix.length);
    this.#setValue(start, end, fileId, bias, unwindProgram);
    this.#setKey(pid, prefix);
    this.#map.update(this.#key, this.#value);
    this.entries++;
    this.writes++;
    // It may lie inside a mapping the unwinder has cached.
    this.#changeGeneration();
  }

  #setValue(start: number, end: number, fileId: number, bias: number, unwindProgram: number): void {
    writeU64(this.#valueView, pidPageMappingInfoLayout.file_id.offset, fileId);
    this.#value.set(
      encodeBiasAndUnwindProgram(bias, unwindProgram),
      pidPageMappingInfoLayout.bias_and_unwind_program.offset,
    );
    writeU64(this.#valueView, pidPageMappingInfoLayout.start.offset, start);
    writeU64(this.#valueView, pidPageMappingInfoLayout.end.offset, end);
  }

  /** Removes prefixes installed for `pid`. */
  remove(pid: Pid, prefixes: readonly Prefix[]): void {
    let removed = false;
    for (const prefix of prefixes) {
      this.#setKey(pid, prefix);
      this.writes++;
      if (this.#map.delete(this.#key)) {
        this.entries--;
        removed = true;
      }
    }
    if (removed) this.#changeGeneration();
  }

  /** Writes the next generation: BPF starts at 0, and counts stay exact in a double far past any session. */
  #changeGeneration(): void {
    writeU64(new DataView(this.#generationValue.buffer), 0, ++this.#changes);
    this.#generation.update(this.#generationKey, this.#generationValue);
  }

  #setKey(pid: Pid, prefix: Prefix): void {
    const view = this.#keyView;
    view.setUint32(pidPageMappingKeyLayout.prefix_len.offset, PID_BITS + prefix.length, true);
    view.setUint32(pidPageMappingKeyLayout.pid_be.offset, pid, false);
    const page = pidPageMappingKeyLayout.page_be.offset;
    view.setUint32(page, Math.floor(prefix.value / 0x100000000), false);
    view.setUint32(page + 4, prefix.value % 0x100000000, false);
  }
}
