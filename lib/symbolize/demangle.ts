/**
 * Demangling of C++ (Itanium ABI, `_Z...`) and Rust (legacy `_ZN...17h<hash>E`, v0 `_R...`) symbol names
 * with Mozilla's WebAssembly demangler (`gecko-profiler-demangle`, the one the Firefox Profiler uses). The
 * WASM module is instantiated synchronously when this module is imported, so no init call is needed.
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

import { demangle_any } from "gecko-profiler-demangle";

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
    const out = demangle_any(name);
    return out === "" || out === name.slice(1) ? name : out;
  } catch {
    // A trap inside the demangler (malformed input it did not anticipate) must not lose the frame.
    return name;
  }
}
