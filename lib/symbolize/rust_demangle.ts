/**
 * Demangling of Rust symbol names, legacy (`_ZN...17h<hash>E`) and v0 (`_R...`), with rustc-demangle as
 * Mozilla's WebAssembly build ships it (`gecko-profiler-demangle`, the one the Firefox Profiler uses), for
 * machines without binutils, whose demangler reads Rust names too. The WASM module (half a megabyte) is
 * compiled on the first Rust name, not on import: compiling it costs about 20 ms of CPU.
 *
 * The package's C++ demangler (cpp_demangle) is not used: it misnames about one C++ name in seven of
 * Debian's libraries (`__class_type_info&::__upcast_result` for `__class_type_info::__upcast_result&`).
 *
 * @example
 * ```ts
 * import { demangleRust } from "./rust_demangle.ts";
 * demangleRust("_ZN4core3fmt5write17h0123456789abcdefE"); // "core::fmt::write"
 * demangleRust("_RNvCs1234_7mycrate3foo"); // "mycrate::foo"
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

/**
 * Legacy Rust names are Itanium nested names whose last part is the crate's hash (`17h` and 16 hex
 * digits), optionally followed by an LLVM suffix (`.llvm.123`); GNU c++filt tells them from C++ the same way.
 */
const LEGACY_RUST = /^_ZN.*17h[0-9a-f]{16}E(?:\.[0-9A-Za-z_.$]*)?$/;

/** Whether `name` is a Rust symbol name, legacy or v0 (`_R`). */
export function isRustName(name: string): boolean {
  return name.startsWith("_R") || LEGACY_RUST.test(name);
}

/**
 * The demangled form of a Rust symbol name, without the legacy hash and v0's crate disambiguators, or
 * null when it does not demangle. Never throws.
 */
export function demangleRust(name: string): string | null {
  try {
    demangler ??= instantiate();
    const out = demangler.demangle_any(name);
    // Names it does not recognize come back unchanged or without their first underscore.
    return out === "" || out === name || out === name.slice(1) ? null : out;
  } catch {
    // A trap inside the demangler (malformed input it did not anticipate) must not lose the frame.
    return null;
  }
}
