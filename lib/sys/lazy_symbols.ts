/**
 * A shared library's functions, each bound through Deno's FFI the first time it is used rather than all
 * at once. `Deno.dlopen` compiles a fast-call trampoline (with Cranelift) for every synchronous function
 * it binds, 0.1 to 0.3 ms of CPU each: binding libc's 39 functions took 6 ms and libbpf's 49 about as
 * much, in every run, while a `record` session calls fewer than half of them. Bound one by one, a
 * function costs the same once it is used, and nothing when it is not.
 *
 * Each function is bound by a `Deno.dlopen` of its own, which the dynamic loader answers with the library
 * already loaded. Those handles are never closed, as the library bound whole never was.
 *
 * @example
 * ```ts
 * import { lazySymbols } from "./lazy_symbols.ts";
 * const fn = lazySymbols("libc.so.6", { getpid: { parameters: [], result: "i32" } });
 * console.log(fn.getpid()); // bound now, on first use
 * ```
 *
 * @module
 */

/**
 * The functions of `symbols` in library `path`, as `Deno.dlopen(path, symbols).symbols` has them, each
 * bound when first read. The library must be loadable and hold every symbol (the caller checks that
 * first, if it can fail): a function that cannot be bound throws where it is first read.
 */
export function lazySymbols<const S extends Deno.ForeignLibraryInterface>(
  path: string,
  symbols: S,
): Deno.DynamicLibrary<S>["symbols"] {
  // Getters on a prototype, each replaced by a data property of the object itself once bound: the object
  // keeps a fast (non-dictionary) layout, and a call site sees a plain property after the first call.
  const getters: PropertyDescriptorMap = {};
  for (const name of Object.keys(symbols)) {
    getters[name] = {
      get(this: object) {
        const bound = Deno.dlopen(path, { [name]: symbols[name]! }).symbols[name];
        Object.defineProperty(this, name, { value: bound, enumerable: true });
        return bound;
      },
    };
  }
  return Object.create(Object.create(null, getters));
}
