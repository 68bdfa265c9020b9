/**
 * Per-file HotSpot state: the introspection symbols of one `libjvm.so`, and the layouts read from its
 * tables in the first of its JVMs that has filled them (once per file: every JVM of the file has the same),
 * and {@linkcode HotspotData.attach}, which makes the instance of a process.
 *
 * @example
 * ```ts ignore
 * import { HotspotData } from "./data.ts";
 * const instance = data.attach(ebpf, pid, bias, memory, mappings);
 * ```
 *
 * @module
 */
import type { Pid } from "../../types.ts";
import type { Data, EbpfHandler } from "../interpreter.ts";
import type { RemoteMemory } from "../remote_memory.ts";
import { type CodeCacheLayout, codeCacheLayout } from "./code_cache.ts";
import { type CompiledScopesLayout, compiledScopesLayout } from "./compiled_scopes.ts";
import { HotspotInstance } from "./instance.ts";
import { type JavaMethodLayout, javaMethodLayout } from "./java_method.ts";
import { type JdkVersion, readJdkVersion } from "./jdk_version.ts";
import { VmStructs, type VmStructsSymbols } from "./vm_structs.ts";

/** What the host and BPF read of a JVM's classes: true of every JVM of one `libjvm.so`. */
export interface HotspotLayout {
  version: JdkVersion;
  methods: JavaMethodLayout;
  code: CodeCacheLayout;
  scopes: CompiledScopesLayout;
}

/** A file's HotSpot, shared by every process that maps it. */
export class HotspotData implements Data {
  readonly fileName: string;
  readonly #symbols: VmStructsSymbols;
  #layout: HotspotLayout | null = null;

  constructor(fileName: string, symbols: VmStructsSymbols) {
    this.fileName = fileName;
    this.#symbols = symbols;
  }

  /**
   * Makes the instance of process `pid`, which writes the process's record now or, while the JVM is
   * starting, at a later reading of the process.
   *
   * @throws {VmStructsError} when the JVM's tables are malformed or lack what is read.
   */
  attach(ebpf: EbpfHandler, pid: Pid, bias: number, memory: RemoteMemory): HotspotInstance {
    const instance = new HotspotInstance(this, memory, bias);
    instance.synchronizeMappings(ebpf, pid, []);
    if (instance.failure !== null) throw instance.failure;
    return instance;
  }

  /**
   * The layouts of this file's JVM, read from the process `memory` reads (with the file at load bias
   * `bias`) the first time, then kept.
   *
   * @throws {VmNotReadyError} while that JVM is starting: ask again later.
   * @throws {VmStructsError} when the tables are malformed or lack what is read (permanent).
   */
  layout(memory: RemoteMemory, bias: number): HotspotLayout {
    if (this.#layout !== null) return this.#layout;
    const vm = VmStructs.read(memory, this.#symbols, bias);
    const version = readJdkVersion(memory, vm, bias);
    this.#layout = {
      version,
      methods: javaMethodLayout(vm, version),
      code: codeCacheLayout(vm),
      scopes: compiledScopesLayout(vm),
    };
    return this.#layout;
  }
}
