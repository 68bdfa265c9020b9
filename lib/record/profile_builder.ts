/**
 * Turns the aggregated stacks of a session into a {@linkcode Profile}: one location per distinct frame,
 * symbolized once, on the host: kernel frames by the symbolizer given (the kernel's own names through BPF
 * during a recording, else /proc/kallsyms), native frames from the ELF symbol
 * tables of the mapped files (or their separate debug files), demangled. A frame that cannot be named
 * reads `[binary+0xoffset]` so that it can still be looked up later by hand.
 *
 * @example
 * ```ts ignore
 * import { buildProfile } from "./profile_builder.ts";
 * const profile = buildProfile(table.stacks(), { startTimeNs, durationNs, periodNs });
 * ```
 *
 * @module
 */
import {
  frameKindOf,
  type Profile,
  type ProfileLocation,
  type ProfileMapping,
  type ProfileSample,
} from "../profile/profile.ts";
import type { MappedFile } from "../process/mapped_file.ts";
import { type KernelSymbolLookup, KernelSymbols } from "../symbolize/kallsyms.ts";
import { formatUnknownFrame, NativeSymbolizer } from "../symbolize/native.ts";
import type { Address, FileOffset, KernelAddress } from "../types.ts";
import type { Stack, StackFrame } from "./stack_table.ts";
import { delay } from "../sys/timer.ts";

/** Session facts that go into the profile as they are. */
export interface ProfileInfo {
  startTimeNs: number;
  durationNs: number;
  periodNs: number;
}

/** Symbolizers to use instead of fresh ones (tests, or reuse across profiles). */
export interface Symbolizers {
  native?: NativeSymbolizer;
  /** Kernel symbols, or how to get them when the first kernel frame needs them. */
  kernel?: KernelSymbolLookup | null | (() => KernelSymbolLookup | null);
}

/** x86-64 user space ends at 2^47. */
const USER_SPACE_END = 0x800000000000;

/** How long symbolizing runs between two turns of the event loop, in which a Ctrl-C can be seen. */
const YIELD_EVERY_MS = 50;

/** Builds and symbolizes the profile. */
export function buildProfile(
  stacks: readonly Stack[],
  info: ProfileInfo,
  symbolizers: Symbolizers = {},
): Profile {
  const builder = new Builder(symbolizers);
  try {
    const samples = stacks.map((stack) => builder.sample(stack));
    return { ...info, mappings: builder.mappings, locations: builder.locations, samples };
  } finally {
    builder.close();
  }
}

/**
 * As {@linkcode buildProfile}, but letting the event loop turn every `yieldEveryMs` ms; once
 * `interrupt` aborts, the frames not named yet keep their addresses and are not looked up
 * (`[binary+0xADDRESS]`, `[kernel+0xADDRESS]`): `complete` is then false.
 */
export async function buildProfileInterruptibly(
  stacks: readonly Stack[],
  info: ProfileInfo,
  symbolizers: Symbolizers,
  interrupt: AbortSignal,
  yieldEveryMs = YIELD_EVERY_MS,
): Promise<{ profile: Profile; complete: boolean }> {
  const builder = new Builder(symbolizers);
  try {
    const samples: ProfileSample[] = [];
    let turned = performance.now();
    for (const stack of stacks) {
      if (builder.symbolizing && performance.now() - turned >= yieldEveryMs) {
        await delay(0);
        turned = performance.now();
        if (interrupt.aborted) builder.symbolizing = false;
      }
      samples.push(builder.sample(stack));
    }
    const profile = { ...info, mappings: builder.mappings, locations: builder.locations, samples };
    return { profile, complete: builder.symbolizing };
  } finally {
    builder.close();
  }
}

class Builder {
  readonly mappings: ProfileMapping[] = [];
  readonly locations: ProfileLocation[] = [];
  #locationIndex = new Map<string, number>();
  #mappingIndex = new Map<MappedFile, number>();
  #native: NativeSymbolizer;
  #ownsNative: boolean;
  #kernel: KernelSymbolLookup | null | undefined | (() => KernelSymbolLookup | null);
  /** False: new locations are named by their addresses alone, without reading a symbol table. */
  symbolizing = true;

  constructor(symbolizers: Symbolizers) {
    this.#native = symbolizers.native ?? new NativeSymbolizer();
    this.#ownsNative = symbolizers.native === undefined;
    this.#kernel = symbolizers.kernel;
  }

  sample(stack: Stack): ProfileSample {
    return {
      locations: stack.frames.map((frame) => this.location(frame)),
      count: stack.count,
      pid: stack.pid,
      tid: stack.tid,
      comm: stack.comm,
    };
  }

  location(frame: StackFrame): number {
    // A return address points after the call; the call itself (address - 1) names the right function
    // and line, even when the call is the last instruction of a function.
    const lookup = frame.returnAddress ? frame.address - 1 : frame.address;
    const file = frame.file;
    const symbol = frame.symbol;
    if (symbol) {
      const key = `i${symbol.kind}\0${symbol.functionName}\0${symbol.sourceFile}\0${symbol.line}`;
      let index = this.#locationIndex.get(key);
      if (index === undefined) {
        index = this.locations.length;
        this.locations.push({ ...symbol, mapping: -1, address: 0 });
        this.#locationIndex.set(key, index);
      }
      return index;
    }
    const key = frame.addressKind === "kernel"
      ? `k${lookup}`
      : file
      ? `${file.key}\0${frame.addressKind}${lookup}${frame.signalTrampoline ? "s" : ""}`
      : `?${frame.kind}:${lookup}`;
    let index = this.#locationIndex.get(key);
    if (index === undefined) {
      index = this.locations.length;
      this.locations.push(this.#symbolize(frame, lookup));
      this.#locationIndex.set(key, index);
    }
    return index;
  }

  close(): void {
    if (this.#ownsNative) this.#native.close();
  }

  #symbolize(frame: StackFrame, lookup: number): ProfileLocation {
    const kind = frameKindOf(frame.kind);
    if (frame.addressKind === "kernel") return this.#kernelLocation(lookup as KernelAddress);
    const file = frame.file;
    if (!file) {
      return { kind, mapping: -1, address: lookup, functionName: "[unknown]", sourceFile: "", line: 0 };
    }
    const mappingIndex = this.#mapping(file);
    if (!file.readable) {
      const name = file.kind === "file"
        ? formatUnknownFrame(file.path, lookup)
        : `[${file.path.replace(/^\[|\]$/g, "")}]`;
      return { kind, mapping: mappingIndex, address: lookup, functionName: name, sourceFile: "", line: 0 };
    }
    const vaddr = frame.addressKind === "vaddr"
      ? lookup as Address
      : this.#native.fileOffsetToVaddr(file, lookup as FileOffset);
    if (!this.symbolizing) {
      const name = formatUnknownFrame(file.path, vaddr ?? lookup);
      return {
        kind,
        mapping: mappingIndex,
        address: vaddr ?? lookup,
        functionName: name,
        sourceFile: "",
        line: 0,
      };
    }
    const symbol = vaddr === null ? null : this.#native.symbolize(file, vaddr);
    if (symbol) this.mappings[mappingIndex]!.hasFunctions = true;
    let functionName = symbol?.functionName;
    if (functionName === undefined && frame.signalTrampoline) functionName = "[signal trampoline]";
    if (functionName === undefined) {
      // Unnamed code is named after the start of its function (its FDE), so that its samples add up.
      const start = vaddr === null ? undefined : this.#native.functionAt(file, vaddr)?.start;
      functionName = formatUnknownFrame(file.path, start ?? vaddr ?? lookup);
    }
    return { kind, mapping: mappingIndex, address: vaddr ?? lookup, functionName, sourceFile: "", line: 0 };
  }

  #kernelLocation(address: KernelAddress): ProfileLocation {
    // Unsymbolized, kernel frames go without names too: naming them reads /proc/kallsyms or runs BPF.
    const symbol = this.symbolizing ? this.#kernelSymbols()?.lookup(address) ?? null : null;
    // As text: 0xffffffff00000000 + address as a double would round to a multiple of 2048.
    const hex = `ffffffff${address.toString(16).padStart(8, "0")}`;
    const name = symbol === null
      ? `[kernel+0x${hex}]`
      : symbol.module === null
      ? symbol.name
      : `${symbol.name} [${symbol.module}]`;
    return { kind: "kernel", mapping: -1, address, functionName: name, sourceFile: "", line: 0 };
  }

  #kernelSymbols(): KernelSymbolLookup | null {
    if (typeof this.#kernel === "function") {
      this.#kernel = this.#kernel();
    } else if (this.#kernel === undefined) {
      try {
        this.#kernel = KernelSymbols.load();
      } catch {
        this.#kernel = null;
      }
    }
    return this.#kernel;
  }

  /**
   * One mapping per file, shared by every process that maps it, so its range cannot be any one process's:
   * it spans user space from 0, and locations hold ELF virtual addresses of the file.
   */
  #mapping(file: MappedFile): number {
    let index = this.#mappingIndex.get(file);
    if (index === undefined) {
      index = this.mappings.length;
      this.mappings.push({
        start: 0,
        end: USER_SPACE_END,
        fileOffset: 0,
        fileName: file.path,
        buildId: file.readable ? this.#native.buildId(file) : "",
        hasFunctions: false,
      });
      this.#mappingIndex.set(file, index);
    }
    return index;
  }
}
