/**
 * Kernel addresses in a profile, and a profile without them. An exact kernel address tells where the
 * kernel was loaded (its KASLR base: subtract the symbol's offset in the distribution's published
 * System.map), which helps whoever attacks the kernel; a profile is often shared, so outputs keep none
 * unless asked (`record --kernel-addresses`), and a file that holds some is readable by its owner only.
 *
 * Without addresses, a kernel frame is its function: the name (`do_syscall_64`, `name [module]`), with no
 * address, nor offset in the function (`function+0x1f` would split one function into as many frames as it
 * had sampled instructions, in every viewer). Kernel frames of the same function become one location. A
 * frame the kernel's symbols did not name reads `[kernel]`. Mappings of kernel code (`[kernel.kallsyms]`,
 * modules) lose their address range. What remains (names, call paths, counts) is what a CPU profile is
 * read for.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { holdsKernelAddresses, withoutKernelAddresses } from "./kernel_addresses.ts";
 * import type { Profile } from "../profile/profile.ts";
 * const profile: Profile = {
 *   startTimeNs: 0, durationNs: 1e9, periodNs: 1e7, mappings: [],
 *   locations: [{ kind: "kernel", mapping: -1, address: 0x81234567, functionName: "vfs_read", sourceFile: "", line: 0 }],
 *   samples: [{ locations: [0], count: 1, pid: 1, tid: 1, comm: "init" }],
 * };
 * assert.ok(holdsKernelAddresses(profile));
 * assert.equal(withoutKernelAddresses(profile).locations[0]!.address, 0);
 * ```
 *
 * @module
 */
import type { Profile, ProfileLocation, ProfileMapping } from "../profile/profile.ts";
import { frameKindOfMapping } from "./pprof.ts";

/** A kernel text address written out in a name, e.g. `[kernel+0xffffffff81234567]` for an unnamed frame. */
const ADDRESS_IN_NAME = /ffffffff[0-9a-f]{8}/i;

/** The name of a kernel frame without a symbol, once its address is dropped. */
export const UNNAMED_KERNEL_FRAME = "[kernel]";

/** Which mappings hold kernel code. */
function kernelMappings(mappings: readonly ProfileMapping[]): boolean[] {
  return mappings.map((mapping) => frameKindOfMapping(mapping.fileName) === "kernel");
}

function isKernel(location: ProfileLocation, kernelMapping: readonly boolean[]): boolean {
  return location.kind === "kernel" || (location.mapping >= 0 && kernelMapping[location.mapping] === true);
}

/**
 * Whether `profile` holds an exact kernel address: in an address field (a kernel location's address, a
 * kernel mapping's range), or in a kernel frame's name. With `namesOnly`, only names count (for outputs
 * that write names and no addresses: folded stacks, speedscope, HTML).
 */
export function holdsKernelAddresses(profile: Profile, options: { namesOnly?: boolean } = {}): boolean {
  const kernelMapping = kernelMappings(profile.mappings);
  if (
    !options.namesOnly && profile.mappings.some((m, i) => kernelMapping[i] && (m.start !== 0 || m.end !== 0))
  ) {
    return true;
  }
  return profile.locations.some((location) =>
    isKernel(location, kernelMapping) &&
    ((!options.namesOnly && location.address !== 0) || ADDRESS_IN_NAME.test(location.functionName))
  );
}

/** `profile` without kernel addresses, as the module documentation says. `profile` is left as it is. */
export function withoutKernelAddresses(profile: Profile): Profile {
  const kernelMapping = kernelMappings(profile.mappings);
  const mappings = profile.mappings.map((mapping, i) =>
    kernelMapping[i] ? { ...mapping, start: 0, end: 0, fileOffset: 0 } : mapping
  );
  const locations: ProfileLocation[] = [];
  const indexOf = new Int32Array(profile.locations.length);
  const merged = new Map<string, number>();
  for (let i = 0; i < profile.locations.length; i++) {
    const location = profile.locations[i]!;
    if (!isKernel(location, kernelMapping)) {
      indexOf[i] = locations.push(location) - 1;
      continue;
    }
    const functionName = ADDRESS_IN_NAME.test(location.functionName)
      ? UNNAMED_KERNEL_FRAME
      : location.functionName;
    const key =
      `${location.kind}\0${location.mapping}\0${functionName}\0${location.sourceFile}\0${location.line}`;
    let index = merged.get(key);
    if (index === undefined) {
      index = locations.push({ ...location, address: 0, functionName }) - 1;
      merged.set(key, index);
    }
    indexOf[i] = index;
  }
  const samples = profile.samples.map((sample) => ({
    ...sample,
    locations: sample.locations.map((index) => indexOf[index] ?? index),
  }));
  return { ...profile, mappings, locations, samples };
}
