/**
 * The compiled BPF object, embedded in the program at build time (a raw import), so that omniprof needs
 * no compiler where it runs. `deno task build` (build.ts) produces the file from bpf/.
 *
 * This module sits two folders deep, like every module with a raw import of a built file: the bundle in
 * .build/omniprof/ leaves raw imports to Deno with their paths as written (support/program_bundle.ts).
 *
 * @module
 */
import bytes from "../../.build/omniprof.bpf.o" with { type: "bytes" };

/** The ELF bytes of .build/omniprof.bpf.o. */
export const bpfObjectBytes: Uint8Array = bytes;
