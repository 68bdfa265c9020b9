/**
 * Kernel symbols named by the kernel itself: bpf/kernel_symbols.bpf.c prints each address with
 * bpf_snprintf's `%pS` (`function+0xoffset/0xsize [module]`), run by the host on the addresses a profile
 * holds. /proc/kallsyms has to be read whole to name a few hundred addresses: its 200k lines are formatted
 * by the kernel and parsed here, about 0.1 s of CPU for every `record`. Kernels without syscall programs
 * or bpf_snprintf (before 5.14) fall back to it ({@linkcode kernelNamesSupported} says which).
 *
 * @example
 * ```ts ignore
 * import { BpfKernelNames } from "./bpf_kernel_names.ts";
 * const names = new BpfKernelNames(tracer.object);
 * names.name([address]);
 * console.log(names.lookup(address)); // { name: "do_syscall_64", module: null, offset: 48 }
 * ```
 *
 * @module
 */
import type { BpfMap } from "../bpf/map.ts";
import type { BpfObject } from "../bpf/object.ts";
import { libbpf, LibbpfError } from "../bpf/libbpf.ts";
import type { KernelAddress } from "../types.ts";
import type { KernelSymbol } from "./kallsyms.ts";
import { kernelNameBatchLayout, KernelNameLimits } from "../../support/types.ts";
import { BPF_MAPS } from "../../support/bpf_catalogue.ts";

/** The program in the BPF object. */
export const KERNEL_NAMES_PROGRAM = "name_kernel_addresses";

// UAPI values (include/uapi/linux/bpf.h), fixed by the kernel's ABI.
const BPF_PROG_TYPE_SYSCALL = 31;
const BPF_FUNC_SNPRINTF = 165;
/** sizeof(struct bpf_test_run_opts) in libbpf 1.1 and later; retval sits at byte 56. */
const TEST_RUN_OPTS_BYTES = 80;
const TEST_RUN_RETVAL = 56;
/** A JITed BPF program: `bpf_prog_<tag>_<name>` (kernel functions such as bpf_prog_array_* are not). */
const BPF_PROGRAM_SYMBOL = /^bpf_prog_[0-9a-f]{16}(_|$)/;
/** Kernel text lies in the top 2 GiB: a {@linkcode KernelAddress} is the low half. */
const HIGH_HALF = 0xffffffff;

/** Whether this kernel can run the naming program (syscall programs with bpf_snprintf, Linux 5.14+). */
export function kernelNamesSupported(): boolean {
  const fn = libbpf().fn;
  return fn.libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_SYSCALL, null) === 1 &&
    fn.libbpf_probe_bpf_helper(BPF_PROG_TYPE_SYSCALL, BPF_FUNC_SNPRINTF, null) === 1;
}

/**
 * Parses one `%pS` result. The kernel prints a bare `0x...` for an address no symbol holds: null then.
 * BPF programs have no module in `%pS`; they get `bpf`, as /proc/kallsyms shows them.
 */
export function parseSymbolText(text: string): KernelSymbol | null {
  const match = /^(.+)\+0x([0-9a-f]+)\/0x[0-9a-f]+(?: \[([^\]]+)\])?$/.exec(text);
  if (match === null) return null;
  const name = match[1]!;
  const module = match[3] ?? (BPF_PROGRAM_SYMBOL.test(name) ? "bpf" : null);
  return { name, module, offset: parseInt(match[2]!, 16) };
}

/** Names kernel addresses in batches through the BPF program, and remembers them. */
export class BpfKernelNames {
  readonly #programFd: number;
  readonly #batches: BpfMap;
  readonly #names = new Map<KernelAddress, KernelSymbol | null>();
  readonly #batch = new Uint8Array(kernelNameBatchLayout.sizeof);
  readonly #view = new DataView(this.#batch.buffer);
  /** The one batch's index (the map is an array). */
  readonly #key = new Uint8Array(BPF_MAPS.kernel_names.keySize);
  readonly #decoder = new TextDecoder();

  /** `object` must be loaded with {@linkcode KERNEL_NAMES_PROGRAM}. */
  constructor(object: BpfObject) {
    this.#programFd = object.program(KERNEL_NAMES_PROGRAM).fd;
    this.#batches = object.map("kernel_names");
  }

  /**
   * Names every address not named yet.
   *
   * @throws {LibbpfError} when the kernel refuses to run the program.
   */
  name(addresses: Iterable<KernelAddress>): void {
    const wanted = [...new Set(addresses)].filter((address) => !this.#names.has(address));
    for (let start = 0; start < wanted.length; start += KernelNameLimits.Batch) {
      this.#run(wanted.slice(start, start + KernelNameLimits.Batch));
    }
  }

  /** The symbol holding a named address, or null (unknown to the kernel, or never named). */
  lookup(address: KernelAddress): KernelSymbol | null {
    return this.#names.get(address) ?? null;
  }

  #run(addresses: KernelAddress[]): void {
    const layout = kernelNameBatchLayout;
    this.#batch.fill(0);
    this.#view.setUint32(layout.count.offset, addresses.length, true);
    addresses.forEach((address, i) => {
      const at = layout.addresses.offset + i * layout.addresses.elementSize;
      this.#view.setUint32(at, address, true);
      this.#view.setUint32(at + 4, HIGH_HALF, true);
    });
    this.#batches.update(this.#key, this.#batch);
    const opts = new Uint8Array(TEST_RUN_OPTS_BYTES);
    const optsView = new DataView(opts.buffer);
    optsView.setBigUint64(0, BigInt(TEST_RUN_OPTS_BYTES), true);
    const result = libbpf().fn.bpf_prog_test_run_opts(this.#programFd, opts);
    if (result < 0) throw new LibbpfError(`run program ${KERNEL_NAMES_PROGRAM}`, -result);
    if (optsView.getUint32(TEST_RUN_RETVAL, true) !== 0) {
      throw new Error(`Cannot name kernel addresses: ${KERNEL_NAMES_PROGRAM} found no batch`);
    }
    if (!this.#batches.lookup(this.#key, this.#batch)) {
      throw new Error("Cannot name kernel addresses: the batch map is empty");
    }
    addresses.forEach((address, i) => {
      const at = layout.names.offset + i * layout.names.elementSize;
      const bytes = this.#batch.subarray(at, at + layout.names.elementSize);
      const end = bytes.indexOf(0);
      this.#names.set(address, parseSymbolText(this.#decoder.decode(bytes.subarray(0, end < 0 ? 0 : end))));
    });
  }
}
