/**
 * Demangling of C++ (Itanium ABI, `_Z...`) and Rust (legacy `_ZN...17h<hash>E`, v0 `_R...`) symbol names
 * with Mozilla's WebAssembly demangler (`gecko-profiler-demangle`, the one the Firefox Profiler uses). The
 * WASM module (half a megabyte) is compiled on the first mangled name, not on import: most profiles of C
 * programs never need it, and compiling it cost every start about 20 ms of CPU.
 *
 * @example
 * ```ts
 * import { demangle } from "./demangle.ts";
 * demangle("_ZNSt6vectorIiSaIiEE9push_backERKi"); // "std::vector<int, std::allocator<int> >::push_back(int const&)"
 * demangle("_ZN4core3fmt5write17h0123456789abcdefE"); // "core::fmt::write"
 * demangle("main"); // "main"
 * ```
 *
 * @module
 */

import * as glue from "gecko-profiler-demangle/index_bg.js";
// The package's own entry imports the .wasm as a module, which compiles it at once; its bytes as a raw
// import are only bytes until instantiate() runs.
import wasmBytes from "../../node_modules/gecko-profiler-demangle/index_bg.wasm" with { type: "bytes" };

/** The package's wasm-bindgen glue, as far as it is used here. */
interface Glue {
  __wbg_set_wasm(exports: WebAssembly.Exports): void;
  demangle_any(name: string): string;
}

let demangler: Glue | null = null;

/** Compiles and starts the WASM module, as the package's index.js does on import. */
function instantiate(): Glue {
  const bindings = glue as unknown as Glue & WebAssembly.ModuleImports;
  const instance = new WebAssembly.Instance(new WebAssembly.Module(wasmBytes), { "./index_bg.js": bindings });
  bindings.__wbg_set_wasm(instance.exports);
  (instance.exports.__wbindgen_start as () => void)();
  return bindings;
}

/** Longer names are returned as they are: real mangled names stay far below this. */
const MAX_MANGLED_LENGTH = 1 << 16;

/**
 * Returns the demangled form of `name`, or `name` unchanged when it is not a mangled C++ or Rust name or
 * does not demangle. Rust legacy hashes (`::h0123...`) are dropped. Never throws.
 */
export function demangle(name: string): string {
  // The WASM demangler strips a leading underscore from anything it does not recognize (Mach-O style),
  // so only names with a mangling prefix are passed to it.
  if (name.length < 3 || name.length > MAX_MANGLED_LENGTH || name.charCodeAt(0) !== 0x5f /* _ */) return name;
  const second = name.charCodeAt(1);
  if (second !== 0x5a /* Z */ && second !== 0x52 /* R */) return name;
  try {
    demangler ??= instantiate();
    const out = demangler.demangle_any(name);
    return out === "" || out === name.slice(1) ? name : out;
  } catch {
    // A trap inside the demangler (malformed input it did not anticipate) must not lose the frame.
    return name;
  }
}
