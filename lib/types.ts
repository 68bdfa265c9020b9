/**
 * Branded primitive types shared across omniprof. A brand makes the compiler refuse a `Pid` where a `Tid`
 * or a raw number is expected; values get their brand where they are validated (CLI, /proc, ELF bytes).
 *
 * @module
 */

declare const brand: unique symbol;
/** A primitive with a compile-time tag. */
export type Brand<T, Tag extends string> = T & { readonly [brand]: Tag };

/** A process id (the kernel's tgid). */
export type Pid = Brand<number, "Pid">;
/** A thread id (the kernel's pid). */
export type Tid = Brand<number, "Tid">;
/**
 * A user-space virtual address. x86-64 user space ends below 2^47, so a JS number holds it exactly.
 * Kernel addresses do not fit; see {@linkcode KernelAddress}.
 */
export type Address = Brand<number, "Address">;
/**
 * A kernel text address, stored as its low 32 bits. On x86-64 all kernel text (the kernel image, modules
 * and BPF JIT images) lies in the top 2 GiB (0xffffffff80000000 and up), so the high half is always
 * 0xffffffff and the low half identifies the address exactly without a BigInt.
 */
export type KernelAddress = Brand<number, "KernelAddress">;
/** An offset into a file (as opposed to a virtual address). */
export type FileOffset = Brand<number, "FileOffset">;
/**
 * The identity of an executable or library file: 32 hex digits, the first 128 bits of SHA-256 over the
 * first 4 KiB, the last 4 KiB and the length of the file. Equal files in different paths or containers
 * share one id.
 */
export type FileId = Brand<string, "FileId">;

/** Brands a number as a {@linkcode Pid} after checking it is a positive integer. */
export function asPid(value: number): Pid {
  if (!Number.isInteger(value) || value <= 0 || value > 0x3fffffff) {
    throw new RangeError(`Cannot use ${value} as a PID: not a positive integer below 2^30`);
  }
  return value as Pid;
}
