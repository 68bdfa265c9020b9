/**
 * Puts processes' executable mappings into the pid/page trie, which tells the BPF unwinder, for each
 * process and address, the file (by BPF id), the bias that turns the address into the file's ELF address,
 * and the unwind program to run there. Each installed mapping holds a reference to its file in the file
 * registry, given back when the mapping goes. Files without state (anonymous memory, JIT code, unreadable
 * files) and mappings whose bias cannot be found are installed with file id 0, which tells the unwinder to
 * follow frame pointers there; anonymous memory of a process that maps a JIT runtime's file (Node.js's V8)
 * gets that runtime's unwinder, which tells its compiled code's frames from others. The process manager keeps each process's installed mappings; this module
 * holds no process state of its own.
 *
 * @example
 * ```ts ignore
 * import { MappingInstaller } from "./mapping_installer.ts";
 * const installer = new MappingInstaller(files, bpf);
 * let installed = installer.update(pid, [], mappings);
 * installed = installer.update(pid, installed, reread); // writes only what changed
 * installer.remove(pid, installed);
 * ```
 *
 * @module
 */
import { getLogger } from "../log/logger.ts";
import { FullMaps } from "../bpf/full_maps.ts";
import { type MapWriter, u32Key } from "../bpf/map.ts";
import type { Prefix } from "../lpm/prefixes.ts";
import type { Pid } from "../types.ts";
import type { PidPageMappings } from "../unwind/pid_page_mappings.ts";
import { UnwindProgram } from "../../support/types.ts";
import type { FileRegistry } from "./file_registry.ts";
import type { MappedFile, ResolvedMapping } from "./mapped_file.ts";
import { mappingBias } from "./proc_maps.ts";

const logger = getLogger(["omniprof", "unwind"]);
const USER_SPACE_END = 2 ** 47;

/** One mapping of a process as the trie holds it. */
export interface InstalledMapping {
  readonly start: number;
  readonly end: number;
  readonly bpfId: number;
  readonly bias: number;
  readonly program: number;
  /** The trie's keys for it; empty without a trie. */
  readonly prefixes: readonly Prefix[];
  /** The file whose reference it holds, or null (a file without state). */
  readonly file: MappedFile | null;
}

/** The maps the installer writes; absent for a process manager that keeps only the host side. */
export interface InstallerMaps {
  /** The pid/page trie's one writer. */
  readonly trie: PidPageMappings;
  /** The processes the unwinder knows (pid -> 1): BPF reports the others to the host. */
  readonly knownPids: MapWriter;
}

/** Counters for `check`, the status line and benchmarks. */
export interface TrieStats {
  /** Mappings left out of the trie (it was full, or refused them): they unwind by frame pointers. */
  mappingsNotInstalled: number;
  /** Entries in the pid/page trie. */
  trieEntries: number;
  /** Updates and deletes of those entries so far. */
  trieWrites: number;
}

/** Writes mappings into the trie and takes their files' references. */
export class MappingInstaller {
  readonly #files: FileRegistry;
  readonly #maps: InstallerMaps | null;
  readonly #full = new FullMaps(logger);
  #mappingsNotInstalled = 0;

  constructor(files: FileRegistry, maps: InstallerMaps | null) {
    this.#files = files;
    this.#maps = maps;
  }

  get stats(): TrieStats {
    return {
      mappingsNotInstalled: this.#mappingsNotInstalled,
      trieEntries: this.#maps?.trie.entries ?? 0,
      trieWrites: this.#maps?.trie.writes ?? 0,
    };
  }

  /**
   * Brings the trie's view of `pid` from `installed` to `mappings`, and returns what it holds now. A
   * process is read again whenever the unwinder meets an address it does not know (a new library, a
   * runtime's new code area), so only what changed is written: rewriting every mapping cost a Deno
   * process about 2,000 map updates and deletes per reading.
   */
  update(
    pid: Pid,
    installed: readonly InstalledMapping[],
    mappings: readonly ResolvedMapping[],
  ): InstalledMapping[] {
    const previous = new Map<string, InstalledMapping>();
    for (const entry of installed) previous.set(`${entry.start}:${entry.end}`, entry);
    const next: InstalledMapping[] = [];
    const added: { entry: Omit<InstalledMapping, "prefixes">; path: string }[] = [];
    // [vsyscall] sits in kernel space (and is never unwound through).
    const inUserSpace = mappings.filter((mapping) => mapping.end <= USER_SPACE_END);
    const uses = inUserSpace.map((mapping) => this.#files.acquire(mapping.file));
    const jitProgram = uses.find((use) => use?.jitProgram != null)?.jitProgram ?? UnwindProgram.Native;
    for (let i = 0; i < inUserSpace.length; i++) {
      const mapping = inUserSpace[i]!;
      const use = uses[i] ?? null;
      const file = use === null ? null : mapping.file;
      let bpfId = 0;
      let bias = 0;
      let program: number = mapping.file.kind === "anonymous" ? jitProgram : UnwindProgram.Native;
      if (use !== null && use.segments.length > 0) {
        const segmentBias = mappingBias(mapping, use.segments);
        if (segmentBias !== null && segmentBias >= 0) {
          bpfId = use.bpfId;
          bias = segmentBias;
          program = use.program;
        }
      }
      const key = `${mapping.start}:${mapping.end}`;
      const old = previous.get(key);
      if (
        old && old.file === file && old.bpfId === bpfId && old.bias === bias && old.program === program
      ) {
        // Unchanged: its prefixes and its reference to the file stay as they are.
        if (file) this.#files.release(file);
        previous.delete(key);
        next.push(old);
        continue;
      }
      added.push({
        entry: { start: mapping.start, end: mapping.end, bpfId, bias, program, file },
        path: mapping.path,
      });
    }
    // What vanished or changed goes first: a changed mapping's new prefixes may reuse its old keys.
    this.remove(pid, [...previous.values()]);
    for (const { entry, path } of added) {
      const prefixes = this.#install(pid, entry, path);
      if (prefixes !== null) next.push({ ...entry, prefixes });
      else if (entry.file) this.#files.release(entry.file);
    }
    this.#markKnown(pid);
    return next;
  }

  /** Removes `installed` of `pid` from the trie and gives back their files' references. */
  remove(pid: Pid, installed: readonly InstalledMapping[]): void {
    for (const entry of installed) {
      this.#maps?.trie.remove(pid, entry.prefixes);
      if (entry.file) this.#files.release(entry.file);
    }
  }

  /** `pid` is gone: BPF forgets it too. */
  forget(pid: Pid): void {
    this.#maps?.knownPids.delete(u32Key(pid));
  }

  /** The mapping's prefixes in the trie, or null when the trie refused it (it is then not installed). */
  #install(pid: Pid, entry: Omit<InstalledMapping, "prefixes">, path: string): readonly Prefix[] | null {
    if (this.#maps === null) return [];
    try {
      return this.#maps.trie.install(pid, entry.start, entry.end, entry.bpfId, entry.bias, entry.program);
    } catch (error) {
      if (!this.#full.reported("BPF map pid_page_to_mapping_info", error)) {
        logger.warn("Cannot install mapping {path} of {pid}: {error}", { path, pid, error: String(error) });
      }
      this.#mappingsNotInstalled++;
      return null;
    }
  }

  #markKnown(pid: Pid): void {
    if (this.#maps === null) return;
    try {
      this.#maps.knownPids.update(u32Key(pid), new Uint8Array([1]));
    } catch (error) {
      // Unmarked, BPF reports the process again now and then, and it is read again: slower, not wrong.
      if (!this.#full.reported("BPF map known_pids", error)) throw error;
    }
  }
}
