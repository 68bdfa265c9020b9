/**
 * The user part of sampled stacks, judged the same way for every profiler: is the leaf (the function the
 * thread was running) named, and does the stack reach the program's start. Short-lived processes are where
 * a profiler that learns about a process too late shows it: their frames read `[unknown]` and their
 * stacks stop early.
 *
 * Both parsers keep, per frame, its name, the file it is in (when the output says) and whether it is a
 * kernel frame:
 * - omniprof's folded lines (`-o X.folded`): `comm;root;...;leaf COUNT`; kernel frames end in `_[k]`, a
 *   frame in a known file without a symbol reads `[file+0xADDRESS]`, one in no known file `[unknown]`.
 * - `perf script -F comm,pid,tid,time,ip,sym,dso`: a header `comm pid/tid sec.nsec:` and one frame a line,
 *   leaf first, `ADDRESS SYMBOL (DSO)`; a frame without a symbol reads `[unknown] (DSO)`, and DSO is
 *   `[unknown]` too when perf knows no mapping there; kernel frames are in `[kernel.kallsyms]`.
 *
 * The figures, over the samples whose thread name is `comm` ({@linkcode userStackFigures}):
 * - named leaf: the innermost user frame has a function name (not `[unknown]`, not `[file+0x...]`, not an
 *   address); a sample with no user frame at all is not named.
 * - leaf in a known file: the innermost user frame is named, or at least its file is known.
 * - complete: the outermost user frame is `_start`, glibc's `__libc_start_main` (or `__libc_start_main_impl`,
 *   `__libc_start_call_main`), or `main`: the unwinder walked from the leaf up to where the program
 *   starts (frame-pointer unwinding ends at `main` or glibc's frame above it, DWARF unwinding at `_start`).
 *
 * @example
 * ```ts
 * import { parseFoldedSamples, userStackFigures } from "./user_stacks.ts";
 * const samples = parseFoldedSamples("cc1;_start;__libc_start_main;main;toplev::main 3\n");
 * const figures = userStackFigures(samples, "cc1"); // { samples: 3, namedLeaf: 3, complete: 3, ... }
 * ```
 *
 * @module
 */

/** One frame: its name as printed (offsets removed), the file it is in when known, kernel or user. */
export interface Frame {
  name: string;
  /** The file (perf's DSO, or the file of omniprof's `[file+0x...]`), or null when unknown or not said. */
  file: string | null;
  kernel: boolean;
}

/** One distinct stack of one thread name, frames root first, with its sample count. */
export interface Sample {
  comm: string;
  frames: Frame[];
  count: number;
}

/** The frame names a complete stack starts with (its outermost user frame). */
export const PROGRAM_STARTS: ReadonlySet<string> = new Set([
  "_start",
  "__libc_start_main",
  "__libc_start_main_impl",
  "__libc_start_call_main",
  "main",
]);

const FOLDED_KERNEL = "_[k]";
const FILE_ADDRESS = /^\[(.+)\+0x[0-9a-f]+\]$/;

/** Parses one folded frame. */
function foldedFrame(text: string): Frame {
  if (text.endsWith(FOLDED_KERNEL)) {
    return { name: text.slice(0, -FOLDED_KERNEL.length), file: null, kernel: true };
  }
  const inFile = FILE_ADDRESS.exec(text);
  return { name: text, file: inFile === null ? null : inFile[1]!, kernel: false };
}

/** omniprof's folded output (`comm;root;...;leaf COUNT` lines). */
export function parseFoldedSamples(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    const space = line.lastIndexOf(" ");
    if (space <= 0) continue;
    const count = Number(line.slice(space + 1));
    if (!Number.isInteger(count) || count <= 0) continue;
    const [comm, ...frames] = line.slice(0, space).split(";");
    samples.push({ comm: comm!, frames: frames.map(foldedFrame), count });
  }
  return samples;
}

const PERF_HEADER = /^(\S.*?)\s+\d+\/\d+\s+\d+\.\d+:/;
const PERF_FRAME = /^\s+([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$/;
/** Addresses from here up are the kernel's on every 64-bit architecture perf runs on here. */
const KERNEL_START = 0x8000000000000000n;

/** `perf script -F comm,pid,tid,time,ip,sym,dso` output, one sample per header. */
export function parsePerfScriptSamples(text: string): Sample[] {
  const samples: Sample[] = [];
  let current: Sample | null = null;
  for (const line of text.split("\n")) {
    const header = PERF_HEADER.exec(line);
    if (header !== null) {
      current = { comm: header[1]!, frames: [], count: 1 };
      samples.push(current);
      continue;
    }
    const frame = current === null ? null : PERF_FRAME.exec(line);
    if (frame === null) {
      if (line.trim() === "") current = null;
      continue;
    }
    const dso = frame[3]!;
    const kernel = dso.startsWith("[kernel") || BigInt(`0x${frame[1]}`) >= KERNEL_START;
    current!.frames.unshift({
      name: frame[2]!.replace(/\+0x[0-9a-f]+$/, ""),
      file: dso === "[unknown]" ? null : dso,
      kernel,
    });
  }
  return samples;
}

/** Whether `name` names a function (rather than an address, `[unknown]` or `[file+0x...]`). */
export function isFunctionName(name: string): boolean {
  return name !== "" && !/^\[.*\]$/.test(name) && !/^(0x[0-9a-f]+|[0-9a-f]{8,})$/.test(name);
}

/** The name without a symbol version (`__libc_start_main@@GLIBC_2.34`) or offset. */
function bareName(name: string): string {
  return name.replace(/@.*$/, "").replace(/\+0x[0-9a-f]+$/, "");
}

/** The figures of one thread name's samples; the shares are these divided by `samples`. */
export interface UserStackFigures {
  samples: number;
  /** Samples whose innermost user frame has a function name. */
  namedLeaf: number;
  /** Samples whose innermost user frame is named or at least in a known file. */
  leafInKnownFile: number;
  /** Samples without any user frame. */
  noUserFrame: number;
  /** Samples whose outermost user frame is one of {@linkcode PROGRAM_STARTS}. */
  complete: number;
}

/** Counts the figures over the samples of thread name `comm`. */
export function userStackFigures(samples: readonly Sample[], comm: string): UserStackFigures {
  const figures: UserStackFigures = {
    samples: 0,
    namedLeaf: 0,
    leafInKnownFile: 0,
    noUserFrame: 0,
    complete: 0,
  };
  for (const sample of samples) {
    if (sample.comm !== comm) continue;
    figures.samples += sample.count;
    const user = sample.frames.filter((frame) => !frame.kernel);
    const leaf = user[user.length - 1];
    const root = user[0];
    if (leaf === undefined || root === undefined) {
      figures.noUserFrame += sample.count;
      continue;
    }
    const named = isFunctionName(leaf.name);
    if (named) figures.namedLeaf += sample.count;
    if (named || leaf.file !== null) figures.leafInKnownFile += sample.count;
    if (PROGRAM_STARTS.has(bareName(root.name))) figures.complete += sample.count;
  }
  return figures;
}
