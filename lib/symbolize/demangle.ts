/**
 * Demangling of C++ (Itanium ABI, `_Z...`) and Rust (legacy `_ZN...17h<hash>E`, v0 `_R...`) symbol names,
 * as GNU `c++filt -i` prints them: by GNU's demangler itself ({@linkcode demangleGnu}). Where binutils is
 * missing, Rust names are read by rustc-demangle ({@linkcode demangleRust}) and C++ names stay mangled.
 * A name that does not demangle stays as it is: a wrong name is never shown for a right one.
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

import { demangleGnu, hasGnuDemangler } from "./gnu_demangle.ts";
import { demangleRust, isRustName } from "./rust_demangle.ts";

/** Longer names are returned as they are: real mangled names stay far below this. */
const MAX_MANGLED_LENGTH = 1 << 16;

/**
 * Returns the demangled form of `name`, or `name` unchanged when it is not a mangled C++ or Rust name or
 * does not demangle. Rust legacy hashes (`::h0123...`) are dropped. Never throws.
 */
export function demangle(name: string): string {
  if (name.length < 3 || name.length > MAX_MANGLED_LENGTH || name.charCodeAt(0) !== 0x5f /* _ */) return name;
  const second = name.charCodeAt(1);
  if (second !== 0x5a /* Z */ && second !== 0x52 /* R */) return name;
  if (hasGnuDemangler()) return demangleGnu(name) ?? name;
  return isRustName(name) ? demangleRust(name) ?? name : name;
}
