/**
 * The version of a running HotSpot VM, from the static fields of `Abstract_VM_Version` its introspection
 * tables locate (present from JDK 9 to 25 at least; JDK 22 dropped `JDK_Version::_current`).
 *
 * @example
 * ```ts ignore
 * import { readJdkVersion } from "./jdk_version.ts";
 * const version = readJdkVersion(memory, vm, bias); // { major: 17, minor: 0, security: 15, build: 6, ... }
 * ```
 *
 * @module
 */
import type { RemoteMemory } from "../remote_memory.ts";
import { type VmStructs, VmStructsError } from "./vm_structs.ts";

/** A JVM's version: `17.0.15+6`, and the release string it prints (`17.0.15+6-Debian-1deb12u1`). */
export interface JdkVersion {
  major: number;
  minor: number;
  security: number;
  build: number;
  release: string;
}

/** Longest release string read. */
const MAX_RELEASE_BYTES = 128;

/**
 * Reads the version of the JVM whose tables are `vm`, in the process `memory` reads, with `libjvm.so`'s
 * load bias `bias`.
 *
 * @throws {VmStructsError} when the tables do not locate the version, or it is not one (major below 9).
 */
export function readJdkVersion(memory: RemoteMemory, vm: VmStructs, bias: number): JdkVersion {
  const address = (name: string): number => {
    const field = vm.field("Abstract_VM_Version", name);
    if (field === null || field.address === null) {
      throw new VmStructsError(`no static Abstract_VM_Version.${name} in the tables`);
    }
    return field.address + bias;
  };
  const version = {
    major: memory.i32(address("_vm_major_version")),
    minor: memory.i32(address("_vm_minor_version")),
    security: memory.i32(address("_vm_security_version")),
    build: memory.i32(address("_vm_build_number")),
    release: memory.cString(memory.pointer(address("_s_vm_release")), MAX_RELEASE_BYTES),
  };
  if (version.major < 9 || version.major > 1000 || version.minor < 0 || version.security < 0) {
    throw new VmStructsError(`version ${version.major}.${version.minor}.${version.security} is not a JDK's`);
  }
  return version;
}
