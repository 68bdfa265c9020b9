/**
 * The compiled BPF object, embedded in the program at build time (a raw import), so that omniprof needs
 * no compiler where it runs. `deno task build` (build.ts) produces the file from bpf/.
 *
 * @module
 */
import bytes from "../.build/omniprof.bpf.o" with { type: "bytes" };

/** The ELF bytes of .build/omniprof.bpf.o. */
export const bpfObjectBytes: Uint8Array = bytes;
