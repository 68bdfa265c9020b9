/**
 * V8 as rusty_v8 builds it: the V8 inside Deno and inside every program `deno compile` makes (omniprof's
 * own executable among them). Such a file has no `v8dbg_*` introspection data, no symbol table and no
 * `.eh_frame`, so nothing in it says where V8 keeps a frame's function or a function's name: its
 * JavaScript frames are named only from the perf map V8 writes when the process is started with
 * {@linkcode DENO_PERF_MAP_FLAGS}. What the file does say is V8's version, as `MAJOR.MINOR.BUILD.PATCH-rusty`
 * in `.rodata` (rusty_v8 appends `-rusty`), which is how this module recognises it.
 *
 * The V8 loader throws a {@linkcode FlagsRequiredError} for such a file; a process that maps it and was
 * started without the flags is then named to the user once, with the flags to add.
 *
 * @example
 * ```ts ignore
 * import { ElfFile } from "../../elf/elf_file.ts";
 * import { readRustyV8Version } from "./rusty_v8.ts";
 * using elf = ElfFile.open(Deno.execPath());
 * readRustyV8Version(elf); // "15.0.245.2-rusty", as `deno --version` says
 * ```
 *
 * @module
 */
import type { ElfFile } from "../../elf/elf_file.ts";
import type { Pid } from "../../types.ts";
import { FlagsRequiredError, type FlagsRequirement, type ProcessLaunch } from "../interpreter.ts";

/** The V8 flags that make V8 write a perf map of its code and give interpreted frames code of their own. */
export const DENO_PERF_MAP_FLAGS = "--perf-basic-prof,--interpreted-frames-native-stack";

/**
 * A flag that makes V8 write names of its code where omniprof reads them: a perf map (of all code, or of
 * functions only), or a jitdump.
 */
const PERF_FLAG = /^--perf[-_](basic[-_])?prof([-_]only[-_]functions)?(=true)?$/;
/** rusty_v8's suffix, and the version string it ends (NUL-terminated in `.rodata`). */
const SUFFIX = [...new TextEncoder().encode("-rusty\0")];
const VERSION = /(\d{1,4}\.\d{1,4}\.\d{1,6}\.\d{1,6}-rusty)\0$/;
/** Files with less `.rodata` than this hold no V8 (Deno's has 25 MB), and are not searched. */
const MIN_RODATA_BYTES = 4 << 20;
/** `.rodata` is searched in windows of this size, each overlapping the last by the longest match. */
const WINDOW_BYTES = 4 << 20;
const OVERLAP_BYTES = 40;
const latin1 = new TextDecoder("latin1");

/**
 * The rusty_v8 version string of `elf` (`15.0.245.2-rusty`), or null for a file without one. Only a file
 * built by rustc (its `.comment` says so) with a large `.rodata` is searched, once per file: about 5 ms
 * for Deno's.
 */
export function readRustyV8Version(elf: ElfFile): string | null {
  const rodata = elf.section(".rodata");
  const comment = elf.section(".comment");
  if (rodata === undefined || rodata.size < MIN_RODATA_BYTES || comment === undefined) return null;
  if (comment.size > 4096 || !latin1.decode(elf.readSection(comment)).includes("rustc")) return null;
  const end = rodata.offset + rodata.size;
  for (let offset = rodata.offset; offset < end; offset += WINDOW_BYTES) {
    const start = offset === rodata.offset ? offset : offset - OVERLAP_BYTES;
    const bytes = elf.read(start, Math.min(end, offset + WINDOW_BYTES) - start);
    // The suffix by a byte search (decoding 4 MiB as text takes 100 ms), then the digits before it.
    for (let at = bytes.indexOf(SUFFIX[0]!); at >= 0; at = bytes.indexOf(SUFFIX[0]!, at + 1)) {
      if (!suffixAt(bytes, at)) continue;
      const found = VERSION.exec(latin1.decode(bytes.subarray(Math.max(0, at - 32), at + SUFFIX.length)));
      if (found !== null) return found[1]!;
    }
  }
  return null;
}

/** Whether {@linkcode SUFFIX} starts at `at` in `bytes` (no closure per candidate: `-` is common). */
function suffixAt(bytes: Uint8Array, at: number): boolean {
  for (let i = 0; i < SUFFIX.length; i++) {
    if (bytes[at + i] !== SUFFIX[i]) return false;
  }
  return true;
}

/** Whether a process of Deno (or of a program it compiled) was started with one of the perf flags. */
export function hasPerfMapFlags(launch: ProcessLaunch): boolean {
  // `--v8-flags=...` among the arguments (Deno's), or the environment variable Deno reads first. Other
  // arguments can only be the script's: a false "yes" costs the advice, not a frame.
  const listsFlag = (list: string) => list.split(/[,\s]+/).some((flag) => PERF_FLAG.test(flag));
  if (launch.argv.some((arg) => arg.startsWith("--v8-flags=") && listsFlag(arg.slice(11)))) return true;
  return listsFlag(launch.environ.get("DENO_V8_FLAGS") ?? "");
}

/** The flags a process of a rusty_v8 file needs for its JavaScript frames to be named. */
export class DenoPerfMapFlags implements FlagsRequirement {
  readonly version: string;

  constructor(version: string) {
    this.version = version;
  }

  satisfiedBy(launch: ProcessLaunch): boolean {
    return hasPerfMapFlags(launch);
  }

  advice(pid: Pid, path: string): string {
    return `PID ${pid} runs V8 ${this.version} (${path}), whose JavaScript frames are named only from ` +
      `V8's perf map: start it with --v8-flags=${DENO_PERF_MAP_FLAGS}, or with ` +
      `DENO_V8_FLAGS=${DENO_PERF_MAP_FLAGS} in its environment`;
  }
}

/** The error the V8 loader throws for a rusty_v8 file: a claim it cannot make, and why. */
export function rustyV8Refusal(version: string, fileName: string): FlagsRequiredError {
  return new FlagsRequiredError(
    `V8 ${version} in ${fileName} holds no introspection data: its frames are named from its perf map only`,
    new DenoPerfMapFlags(version),
  );
}
