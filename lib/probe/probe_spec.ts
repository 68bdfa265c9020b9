/**
 * What `record -e EVENT` names, checked at the edge: parsed from the user's text, then resolved against
 * this machine (the file and its function, the tracepoint, the kernel function) before anything is loaded,
 * so that a typo is a clear error rather than a failed attach halfway through setting up.
 *
 *   uprobe:PATH:SYMBOL      entry of function SYMBOL of the executable or library PATH (a name without a
 *                           slash is looked up in PATH, then in the system's library folders)
 *   uretprobe:PATH:SYMBOL   return from it (the stack is then its caller's)
 *   tracepoint:CAT:NAME     a kernel tracepoint (`tracepoint:syscalls:sys_enter_write`)
 *   kprobe:FUNCTION         entry of kernel function FUNCTION, where the kernel allows kprobes
 *
 * @example
 * ```ts
 * import { parseProbe } from "./probe_spec.ts";
 * import assert from "node:assert/strict";
 * assert.deepEqual(parseProbe("tracepoint:syscalls:sys_enter_write"), {
 *   kind: "tracepoint",
 *   category: "syscalls",
 *   name: "sys_enter_write",
 * });
 * ```
 *
 * @module
 */
import { ElfFile } from "../elf/elf_file.ts";
import { findElfSymbols } from "../interpreter/elf_symbols.ts";
import { KernelSymbols } from "../symbolize/kallsyms.ts";
import { pathExists } from "../sys/files.ts";
import type { Address } from "../types.ts";
import type { Tracefs } from "./tracefs.ts";

/** A probe as the user named it. */
export type ProbeSpec =
  | { kind: "uprobe" | "uretprobe"; path: string; symbol: string }
  | { kind: "tracepoint"; category: string; name: string }
  | { kind: "kprobe"; function: string };

/** A probe resolved on this machine: where to attach. */
export type ResolvedProbe =
  | { kind: "uprobe" | "uretprobe"; name: string; path: string; fileOffset: number }
  | { kind: "tracepoint"; name: string; category: string; tracepoint: string }
  | { kind: "kprobe"; name: string; function: string };

/** The user's text names no probe, or one this machine does not have. */
export class ProbeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProbeError";
  }
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_.]*$/;
const USAGE = "use uprobe:PATH:SYMBOL, uretprobe:PATH:SYMBOL, tracepoint:CATEGORY:NAME or kprobe:FUNCTION";
/** Where a library named without a folder is looked for after PATH (Debian's multiarch folders). */
const LIBRARY_DIRS = ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib", "/lib"];
const STT_FUNC = 2;
const STT_GNU_IFUNC = 10;

/**
 * Parses `-e`'s text.
 *
 * @throws {ProbeError} saying what is wrong and what is accepted.
 */
export function parseProbe(text: string): ProbeSpec {
  const colon = text.indexOf(":");
  const kind = colon < 0 ? text : text.slice(0, colon);
  const rest = colon < 0 ? "" : text.slice(colon + 1);
  switch (kind) {
    case "uprobe":
    case "uretprobe": {
      // The symbol is after the last colon: a path may hold one, a C symbol never does.
      const last = rest.lastIndexOf(":");
      const path = rest.slice(0, Math.max(0, last));
      const symbol = rest.slice(last + 1);
      if (last <= 0 || path === "" || !IDENTIFIER.test(symbol)) {
        throw new ProbeError(
          `-e ${text}: expected ${kind}:PATH:SYMBOL, such as ${kind}:/usr/bin/bash:readline`,
        );
      }
      return { kind, path, symbol };
    }
    case "tracepoint": {
      const [category, name, extra] = rest.split(":");
      if (extra !== undefined || !IDENTIFIER.test(category ?? "") || !IDENTIFIER.test(name ?? "")) {
        throw new ProbeError(
          `-e ${text}: expected tracepoint:CATEGORY:NAME, such as tracepoint:syscalls:sys_enter_write`,
        );
      }
      return { kind, category: category!, name: name! };
    }
    case "kprobe":
      if (!IDENTIFIER.test(rest)) {
        throw new ProbeError(`-e ${text}: expected kprobe:FUNCTION, such as kprobe:do_sys_openat2`);
      }
      return { kind, function: rest };
    default:
      throw new ProbeError(`-e ${text}: unknown kind of event "${kind}": ${USAGE}`);
  }
}

/** The text a resolved probe is shown as: the user's, with the file's full path. */
export function probeName(spec: ProbeSpec, path?: string): string {
  switch (spec.kind) {
    case "uprobe":
    case "uretprobe":
      return `${spec.kind}:${path ?? spec.path}:${spec.symbol}`;
    case "tracepoint":
      return `tracepoint:${spec.category}:${spec.name}`;
    case "kprobe":
      return `kprobe:${spec.function}`;
  }
}

/** What resolving needs of the machine; the defaults read the real one. */
export interface ProbeMachine {
  /** The tracefs to look tracepoints up in (mounted if needed), when a tracepoint is asked for. */
  tracefs: () => Tracefs;
  /** Whether this kernel can attach kprobes. */
  kprobesSupported: () => boolean;
  /** Whether `name` is a function of the running kernel. */
  kernelFunction: (name: string) => boolean;
}

/**
 * Resolves `spec` on this machine.
 *
 * @throws {ProbeError} when the file, its function, the tracepoint or the kernel function does not
 *   exist, or the kernel cannot attach such a probe.
 */
export function resolveProbe(spec: ProbeSpec, machine: ProbeMachine): ResolvedProbe {
  switch (spec.kind) {
    case "uprobe":
    case "uretprobe":
      return resolveUprobe(spec);
    case "tracepoint": {
      const name = probeName(spec);
      let tracefs: Tracefs;
      try {
        tracefs = machine.tracefs();
      } catch (error) {
        throw new ProbeError(`-e ${name}: cannot list tracepoints (${(error as Error).message})`);
      }
      if (!tracefs.hasTracepoint(spec.category, spec.name)) {
        throw new ProbeError(
          `-e ${name}: this kernel has no such tracepoint (the list: ${tracefs.path}/available_events)`,
        );
      }
      return { kind: "tracepoint", name, category: spec.category, tracepoint: spec.name };
    }
    case "kprobe": {
      const name = probeName(spec);
      if (!machine.kprobesSupported()) {
        throw new ProbeError(
          `-e ${name}: this kernel cannot attach kprobes (it has no kprobe event source, ` +
            "/sys/bus/event_source/devices/kprobe); uprobes and tracepoints work without them",
        );
      }
      if (!machine.kernelFunction(spec.function)) {
        throw new ProbeError(
          `-e ${name}: the running kernel has no function ${spec.function} (/proc/kallsyms)`,
        );
      }
      return { kind: "kprobe", name, function: spec.function };
    }
  }
}

function resolveUprobe(spec: { kind: "uprobe" | "uretprobe"; path: string; symbol: string }): ResolvedProbe {
  const path = findFile(spec.path);
  if (path === null) {
    throw new ProbeError(
      `-e ${probeName(spec)}: no file ${spec.path}` +
        (spec.path.includes("/") ? "" : " in PATH or the library folders"),
    );
  }
  const name = probeName(spec, path);
  let elf: ElfFile;
  try {
    elf = ElfFile.open(path);
  } catch (error) {
    throw new ProbeError(`-e ${name}: not an ELF file that can be probed (${(error as Error).message})`);
  }
  try {
    const symbol = findElfSymbols(elf, [spec.symbol]).get(spec.symbol);
    if (symbol === undefined || (symbol.type !== STT_FUNC && symbol.type !== STT_GNU_IFUNC)) {
      throw new ProbeError(
        `-e ${name}: ${path} has no function ${spec.symbol}` +
          (elf.hasSymtab ? "" : " among its exported symbols (it has no full symbol table: stripped?)"),
      );
    }
    const fileOffset = elf.vaddrToFileOffset(symbol.value as Address);
    if (fileOffset === null) {
      throw new ProbeError(`-e ${name}: ${spec.symbol}'s address lies in no loaded part of ${path}`);
    }
    return { kind: spec.kind, name, path, fileOffset };
  } finally {
    elf.close();
  }
}

/** The real path of the file `path` names: as given, or for a bare name, found in PATH or a library folder. */
function findFile(path: string): string | null {
  const candidates = path.includes("/") ? [path] : [
    ...(Deno.env.get("PATH") ?? "/usr/bin:/bin").split(":").filter((dir) => dir !== "").map((dir) =>
      `${dir}/${path}`
    ),
    ...LIBRARY_DIRS.map((dir) => `${dir}/${path}`),
  ];
  for (const candidate of candidates) {
    try {
      if (Deno.statSync(candidate).isFile) return Deno.realPathSync(candidate);
    } catch {
      // not there
    }
  }
  return null;
}

/** Whether the kernel has the kprobe event source perf_event_open (and libbpf) attach kprobes through. */
export function kprobesSupported(): boolean {
  return pathExists("/sys/bus/event_source/devices/kprobe/type");
}

/** Whether /proc/kallsyms lists `name` as a function (text symbol) of the running kernel or a module. */
export function kernelFunction(name: string): boolean {
  return KernelSymbols.hasFunction(name);
}
