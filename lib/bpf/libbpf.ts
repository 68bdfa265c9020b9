/**
 * libbpf, loaded through Deno's FFI. Only APIs present in libbpf 1.1 (Debian 12) are bound, so the same
 * code runs on Debian 13's libbpf 1.5. Functions that return pointers set errno on failure (libbpf 1.0
 * semantics); functions that return int return a negative errno.
 *
 * @example
 * ```ts ignore
 * import { libbpf } from "./libbpf.ts";
 * console.log(libbpf().version); // "1.1"
 * ```
 *
 * @module
 */
import { getLogger } from "../log/logger.ts";
import { cString, libc } from "../sys/libc.ts";
import { lazySymbols } from "../sys/lazy_symbols.ts";

const symbols = {
  bpf_object__open_mem: { parameters: ["buffer", "usize", "pointer"], result: "pointer" },
  bpf_object__load: { parameters: ["pointer"], result: "i32" },
  bpf_object__close: { parameters: ["pointer"], result: "void" },
  bpf_object__find_program_by_name: { parameters: ["pointer", "buffer"], result: "pointer" },
  bpf_object__find_map_by_name: { parameters: ["pointer", "buffer"], result: "pointer" },
  bpf_object__next_map: { parameters: ["pointer", "pointer"], result: "pointer" },
  bpf_object__next_program: { parameters: ["pointer", "pointer"], result: "pointer" },
  bpf_map__name: { parameters: ["pointer"], result: "pointer" },
  bpf_map__type: { parameters: ["pointer"], result: "u32" },
  bpf_map__key_size: { parameters: ["pointer"], result: "u32" },
  bpf_map__value_size: { parameters: ["pointer"], result: "u32" },
  bpf_map__inner_map: { parameters: ["pointer"], result: "pointer" },
  bpf_map__fd: { parameters: ["pointer"], result: "i32" },
  bpf_map__reuse_fd: { parameters: ["pointer", "i32"], result: "i32" },
  bpf_map__set_max_entries: { parameters: ["pointer", "u32"], result: "i32" },
  bpf_map__max_entries: { parameters: ["pointer"], result: "u32" },
  bpf_map__map_flags: { parameters: ["pointer"], result: "u32" },
  bpf_map__set_map_flags: { parameters: ["pointer", "u32"], result: "i32" },
  bpf_map__initial_value: { parameters: ["pointer", "buffer"], result: "pointer" },
  bpf_program__fd: { parameters: ["pointer"], result: "i32" },
  bpf_program__name: { parameters: ["pointer"], result: "pointer" },
  bpf_program__section_name: { parameters: ["pointer"], result: "pointer" },
  bpf_program__type: { parameters: ["pointer"], result: "u32" },
  bpf_program__set_autoload: { parameters: ["pointer", "bool"], result: "i32" },
  bpf_program__attach: { parameters: ["pointer"], result: "pointer" },
  bpf_program__attach_perf_event: { parameters: ["pointer", "i32"], result: "pointer" },
  bpf_program__set_type: { parameters: ["pointer", "u32"], result: "i32" },
  bpf_program__attach_uprobe: {
    parameters: ["pointer", "bool", "i32", "buffer", "usize"],
    result: "pointer",
  },
  bpf_program__attach_kprobe: { parameters: ["pointer", "bool", "buffer"], result: "pointer" },
  bpf_program__attach_tracepoint: { parameters: ["pointer", "buffer", "buffer"], result: "pointer" },
  bpf_link__destroy: { parameters: ["pointer"], result: "i32" },
  bpf_map_update_elem: { parameters: ["i32", "buffer", "buffer", "u64"], result: "i32" },
  bpf_map_lookup_elem: { parameters: ["i32", "buffer", "buffer"], result: "i32" },
  bpf_map_delete_elem: { parameters: ["i32", "buffer"], result: "i32" },
  bpf_map_get_next_key: { parameters: ["i32", "buffer", "buffer"], result: "i32" },
  // The same two on a worker thread, for writes that block (a map of maps waits out an RCU grace period).
  bpf_map_update_elem_off_thread: {
    name: "bpf_map_update_elem",
    parameters: ["i32", "buffer", "buffer", "u64"],
    result: "i32",
    nonblocking: true,
  },
  bpf_map_delete_elem_off_thread: {
    name: "bpf_map_delete_elem",
    parameters: ["i32", "buffer"],
    result: "i32",
    nonblocking: true,
  },
  bpf_map_create: { parameters: ["u32", "buffer", "u32", "u32", "u32", "pointer"], result: "i32" },
  bpf_enable_stats: { parameters: ["i32"], result: "i32" },
  bpf_obj_get_info_by_fd: { parameters: ["i32", "buffer", "buffer"], result: "i32" },
  libbpf_num_possible_cpus: { parameters: [], result: "i32" },
  libbpf_major_version: { parameters: [], result: "u32" },
  libbpf_minor_version: { parameters: [], result: "u32" },
  libbpf_strerror: { parameters: ["i32", "buffer", "usize"], result: "i32" },
  libbpf_set_print: { parameters: ["function"], result: "pointer" },
  libbpf_probe_bpf_prog_type: { parameters: ["u32", "pointer"], result: "i32" },
  libbpf_probe_bpf_helper: { parameters: ["u32", "u32", "pointer"], result: "i32" },
  bpf_prog_test_run_opts: { parameters: ["i32", "buffer"], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;

/** libbpf's verifier log buffer is 16 MiB at most (BPF_LOG_BUF_SIZE). */
const PRINT_BUFFER_BYTES = 16 << 20;
/** Lines of a long message kept from its start and from its end. */
const LOG_HEAD_LINES = 10;
const LOG_TAIL_LINES = 150;

/** A verifier log can run to thousands of lines; its start and its end say what went wrong. */
function shortenLog(text: string): string {
  const lines = text.split("\n");
  if (lines.length <= LOG_HEAD_LINES + LOG_TAIL_LINES) return text;
  const dropped = lines.length - LOG_HEAD_LINES - LOG_TAIL_LINES;
  return [
    ...lines.slice(0, LOG_HEAD_LINES),
    `... (${dropped} lines left out) ...`,
    ...lines.slice(-LOG_TAIL_LINES),
  ].join("\n");
}

/** The Debian package that provides the library, named in error messages. */
export const LIBBPF_PACKAGE = "libbpf1";

/** libbpf could not be loaded. */
export class LibbpfMissingError extends Error {
  constructor(path: string, cause: unknown) {
    super(
      `Cannot load libbpf (${path}): ${cause instanceof Error ? cause.message : cause}. ` +
        `Install it with: apt-get install ${LIBBPF_PACKAGE}`,
      { cause },
    );
    this.name = "LibbpfMissingError";
  }
}

/** A libbpf call failed. `errno` is positive; the message includes libbpf's own text for it. */
export class LibbpfError extends Error {
  readonly errno: number;
  /** libbpf's log lines printed while the call ran (e.g. the verifier's complaint). */
  readonly log: string[];
  constructor(action: string, errno: number, log: string[] = []) {
    const detail = log.length > 0 ? `\n${log.join("\n")}` : "";
    super(`Cannot ${action}: ${libbpfStrerror(errno)} (errno ${errno})${detail}`);
    this.name = "LibbpfError";
    this.errno = errno;
    this.log = log;
  }
}

/** The loaded library. */
export interface Libbpf {
  readonly fn: Deno.DynamicLibrary<typeof symbols>["symbols"];
  /** "major.minor" */
  readonly version: string;
  /** Collects libbpf's log output while `body` runs (warnings and verifier logs). */
  captureLog<T>(body: () => T): { result: T; log: string[] };
}

let loaded: Libbpf | undefined;

const RTLD_NOW = 0x2;
/** <dlfcn.h>: the library stays mapped whatever dlclose() is called later. */
const RTLD_NODELETE = 0x1000;

/** The libbpf file to open: `OMNIPROF_LIBBPF` when set, else the system's libbpf.so.1. */
export function libbpfPath(): string {
  return Deno.env.get("OMNIPROF_LIBBPF") ?? "libbpf.so.1";
}

/**
 * Opens libbpf once. `OMNIPROF_LIBBPF` may name another library file (e.g. a newer libbpf in
 * /usr/local/lib).
 */
export function libbpf(): Libbpf {
  if (loaded) return loaded;
  const path = libbpfPath();
  let lib: Deno.DynamicLibrary<Record<never, never>>;
  try {
    lib = Deno.dlopen(path, {});
  } catch (error) {
    throw new LibbpfMissingError(path, error);
  }
  // Pinned in memory for the life of the process: a map write on a worker thread (the *_off_thread
  // functions) can still be waiting in the kernel when the JS that opened the library ends and closes it,
  // as a test module's worker does, and would return into unmapped code (seen: SIGSEGV after the last
  // test of a file, one run in three).
  const handle = libc().fn.dlopen(cString(path), RTLD_NOW | RTLD_NODELETE);
  if (handle === null) {
    lib.close();
    throw new LibbpfMissingError(path, new Error("dlopen with RTLD_NODELETE failed"));
  }
  // Functions are bound on first use (lazy_symbols.ts), so a library without one of them is refused here,
  // as binding them all at once would.
  for (const [key, symbol] of Object.entries(symbols)) {
    const name = "name" in symbol ? symbol.name : key;
    if (libc().fn.dlsym(handle, cString(name)) === null) {
      lib.close();
      throw new LibbpfMissingError(path, new Error(`${path}: undefined symbol: ${name}`));
    }
  }
  const fn = lazySymbols(path, symbols);
  const logger = getLogger(["omniprof", "libbpf"]);
  let capture: string[] | null = null;
  // libbpf prints a whole verifier log in one call, and the verifier's complaint is at its end: the buffer
  // must hold the longest log (its pages are only touched when written).
  const formatted = new Uint8Array(PRINT_BUFFER_BYTES);
  const decoder = new TextDecoder();
  // libbpf calls this synchronously on the calling thread, so collecting into `capture` is safe. A JS
  // exception here would not stop libbpf, hence the catch.
  const print = new Deno.UnsafeCallback(
    { parameters: ["i32", "pointer", "pointer"], result: "i32" } as const,
    (level, format, args) => {
      // Levels: 0 warn, 1 info, 2 debug. Loading the object prints some 700 debug lines; formatting them
      // only to drop them cost about 20 ms. Failures are explained at warn level (the verifier's log).
      if (level === 2 && !logger.isEnabledFor("debug")) return 0;
      try {
        const length = libc().fn.vsnprintf(formatted, BigInt(formatted.length), format, args);
        const text = shortenLog(
          decoder.decode(formatted.subarray(0, Math.min(Math.max(length, 0), formatted.length - 1)))
            .trimEnd(),
        );
        if (capture !== null) capture.push(text);
        if (level === 0) logger.warn("{text}", { text });
        else logger.debug("{text}", { text });
      } catch {
        // Logging must never break a libbpf call.
      }
      return 0;
    },
  );
  fn.libbpf_set_print(print.pointer);
  loaded = {
    fn,
    version: `${fn.libbpf_major_version()}.${fn.libbpf_minor_version()}`,
    captureLog<T>(body: () => T) {
      const previous = capture;
      const log: string[] = [];
      capture = log;
      try {
        return { result: body(), log };
      } finally {
        capture = previous;
      }
    },
  };
  return loaded;
}

/** libbpf's text for an error number (it knows libbpf-specific codes beyond errno). */
export function libbpfStrerror(errno: number): string {
  const buffer = new Uint8Array(256);
  libbpf().fn.libbpf_strerror(errno, buffer, BigInt(buffer.length));
  const end = buffer.indexOf(0);
  return new TextDecoder().decode(buffer.subarray(0, end < 0 ? buffer.length : end));
}
