/**
 * Reading what each profiler writes into one shape, stacks root first with counts, so the benchmark
 * judges every tool's stacks the same way; and reading `/usr/bin/time`'s resource summary.
 *
 * - omniprof and bcc's `profile -f` write folded lines, `comm;root;...;leaf COUNT`.
 * - `perf script -F comm,pid,tid,time,ip,sym,dso --ns` writes one block per sample: a header
 *   `comm pid/tid sec.nsec:` and then one frame per line, leaf first, `ADDRESS SYMBOL (DSO)`.
 * - bpftrace prints its map `@[comm, ustack, kstack] = count()` as `@[comm, \n frames \n, \n frames \n]: N`
 *   with both stacks leaf first, and an empty stack as nothing between two commas.
 * - bcc's libbpf-based `offcputime` lists each stack as indented frames, leaf first (kernel then user),
 *   then `    -   comm (pid)`, then the microseconds, then a blank line.
 *
 * Kernel frames get the `_[k]` suffix where the output tells them apart (perf, bpftrace, omniprof).
 *
 * @example
 * ```ts
 * import { completeShare, parsePerfScript } from "./peer_output.ts";
 * declare const text: string;
 * const { stacks } = parsePerfScript(text);
 * const share = completeShare(stacks, "chain_bench", ["main", "a", "b", "c"]);
 * ```
 *
 * @module
 */
import { hasChain, parseFolded } from "../helpers.ts";

/** One distinct stack of one thread name, frames root first, and how many samples had it. */
export interface Stack {
  comm: string;
  frames: string[];
  count: number;
}

/** Folded lines (omniprof, bcc `profile -f`). */
export function parseFoldedStacks(text: string): Stack[] {
  return parseFolded(text).filter((stack) => Number.isFinite(stack.count));
}

const offcputimeThread = /^\s+-\s+(.*) \((\d+)\)$/;

/**
 * bcc's libbpf `offcputime` listing: `count` is the stack's microseconds off the CPU. Frames are named as
 * it names them, without the kernel suffix (its listing does not mark them).
 */
export function parseOffcputimeListing(text: string): Stack[] {
  const stacks: Stack[] = [];
  let frames: string[] = [];
  let comm: string | null = null;
  for (const line of text.split("\n")) {
    if (line.trim() === "") {
      frames = [];
      comm = null;
      continue;
    }
    const thread = offcputimeThread.exec(line);
    if (thread !== null) {
      comm = thread[1]!.trim();
      continue;
    }
    if (comm !== null) {
      const value = Number(line.trim());
      if (Number.isFinite(value)) stacks.push({ comm, frames: [...frames].reverse(), count: value });
      frames = [];
      comm = null;
      continue;
    }
    if (/^\s/.test(line)) frames.push(line.trim());
  }
  return stacks;
}

const perfHeader = /^(.*?)\s+(\d+)\/(\d+)\s+(\d+)\.(\d{1,9}):/;
const perfFrame = /^\s+([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$/;

/** perf script samples (one stack per sample) and the CLOCK time of the earliest, in ns. */
export function parsePerfScript(text: string): { stacks: Stack[]; firstSampleNs: number | null } {
  const stacks: Stack[] = [];
  let firstSampleNs: number | null = null;
  let current: Stack | null = null;
  for (const line of text.split("\n")) {
    const header = perfHeader.exec(line);
    if (header !== null && !line.startsWith("\t") && !line.startsWith(" ")) {
      const ns = Number(header[4]) * 1e9 + Number(header[5]!.padEnd(9, "0"));
      if (firstSampleNs === null || ns < firstSampleNs) firstSampleNs = ns;
      current = { comm: header[1]!, frames: [], count: 1 };
      stacks.push(current);
      continue;
    }
    if (current === null) continue;
    const frame = perfFrame.exec(line);
    if (frame === null) {
      if (line.trim() === "") current = null;
      continue;
    }
    const symbol = frame[2]!.replace(/\+0x[0-9a-f]+$/, "");
    const kernel = frame[3]!.startsWith("[kernel.") || frame[3] === "[kernel]";
    current.frames.unshift(kernel ? `${symbol}_[k]` : symbol);
  }
  return { stacks, firstSampleNs };
}

/** bpftrace's printout of `@[comm, ustack, kstack] = count()`. */
export function parseBpftraceMap(text: string): Stack[] {
  const stacks: Stack[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const first = lines[i]!;
    if (!first.startsWith("@[")) continue;
    const commEnd = first.indexOf(", ", 2);
    if (commEnd < 0) continue;
    const comm = first.slice(2, commEnd);
    // Sections: 0 user stack, 1 kernel stack. Each comma outside a frame line ends a section.
    const sections: string[][] = [[], []];
    let section = 0;
    let count: number | null = null;
    const separators = (rest: string): void => {
      const end = /\]: (\d+)\s*$/.exec(rest);
      if (end !== null) count = Number(end[1]);
      section += (end === null ? rest : rest.slice(0, end.index)).split(",").length - 1;
    };
    separators(first.slice(commEnd + 1));
    for (i++; count === null && i < lines.length; i++) {
      const line = lines[i]!;
      if (/^\s{2,}\S/.test(line) && !/^\s*,/.test(line)) {
        sections[Math.min(section, 1)]!.push(line.trim().replace(/\+\d+$/, ""));
      } else {
        separators(line);
      }
    }
    i--;
    if (count === null) continue;
    const user = sections[0]!.reverse();
    const kernel = sections[1]!.reverse().map((frame) => `${frame}_[k]`);
    stacks.push({ comm, frames: [...user, ...kernel], count });
  }
  return stacks;
}

/** Samples of thread name `comm`, and how many of them hold `chain` as consecutive frames in order. */
export function completeShare(
  stacks: Stack[],
  comm: string,
  chain: string[],
): { samples: number; complete: number } {
  let samples = 0;
  let complete = 0;
  for (const stack of stacks) {
    if (stack.comm !== comm) continue;
    samples += stack.count;
    if (hasChain(stack.frames, chain)) complete += stack.count;
  }
  return { samples, complete };
}

/** What `/usr/bin/time -f "%e %U %S %M"` measured for one process tree. */
export interface ResourceUsage {
  elapsedSeconds: number;
  userSeconds: number;
  systemSeconds: number;
  maxRssKb: number;
}

/** The format string that {@linkcode parseTimeOutput} reads. */
export const TIME_FORMAT = "%e %U %S %M";

/**
 * Reads `/usr/bin/time -f "%e %U %S %M" -o FILE`'s file: its last line holds the numbers (a line about
 * a non-zero exit status or a signal may come first).
 */
export function parseTimeOutput(text: string): ResourceUsage {
  const lines = text.trim().split("\n");
  const fields = (lines[lines.length - 1] ?? "").trim().split(/\s+/).map(Number);
  if (fields.length !== 4 || fields.some((value) => !Number.isFinite(value) || value < 0)) {
    throw new RangeError(`Cannot parse the time summary: ${JSON.stringify(text.slice(0, 200))}`);
  }
  const [elapsedSeconds, userSeconds, systemSeconds, maxRssKb] = fields as [number, number, number, number];
  return { elapsedSeconds, userSeconds, systemSeconds, maxRssKb };
}
