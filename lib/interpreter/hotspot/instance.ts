/**
 * A JVM process: writes its `hotspot_procs` record once the JVM has set up its code cache, names the
 * frames its BPF unwinder recorded from the process's memory while it lives, and removes its record when
 * it goes.
 *
 * Every name is checked against the cookie BPF recorded with the frame (a method's ConstMethod, an
 * nmethod's compile id): a method or code freed and reused since is counted and shown as such, never
 * named after what lives there now.
 *
 * @example
 * ```ts ignore
 * import { HotspotInstance } from "./instance.ts";
 * const instance = new HotspotInstance(data, memory, bias);
 * const frames = instance.symbolize({ kind: HotspotFrameMarker.Hotspot, fileId, addrOrLine });
 * ```
 *
 * @module
 */
import type { Pid } from "../../types.ts";
import { HotspotFrameMarker, HotspotFrameType } from "../../../support/types.ts";
import {
  type EbpfHandler,
  InstanceStubs,
  type InterpreterFrame,
  InterpreterMismatchError,
  type Metric,
  type SymbolizedFrame,
  UNKNOWN_SOURCE_FILE,
} from "../interpreter.ts";
import type { ResolvedMapping } from "../../process/mapped_file.ts";
import { type RemoteMemory, RemoteMemoryError } from "../remote_memory.ts";
import { type CodeBlob, readCodeBlob, readCodeHeaps } from "./code_cache.ts";
import { type CompiledScopes, readCompiledScopes, scopesAt } from "./compiled_scopes.ts";
import type { HotspotData, HotspotLayout } from "./data.ts";
import { type JavaMethod, lineAt, readJavaMethod } from "./java_method.ts";
import { hotspotProcRecord } from "./proc_record.ts";
import { VmNotReadyError, VmStructsError } from "./vm_structs.ts";

/** The frame kind of Java frames in profiles (the runtime's name). */
const KIND = "hotspot";
/** addr_or_line is a position below this, and a cookie times this. */
const COOKIE_UNIT = 2 ** HotspotFrameType.CookieShift;
/** A cookie is the low bits of a value: ConstMethod >> 3, or a compile id. */
const COOKIE_VALUES = HotspotFrameType.CookieMask + 1;
/** Methods and compiled methods kept named; the caches are emptied when full. */
const MAX_CACHED = 8192;

/** A method as read, with the cookie of the ConstMethod it was read through. */
interface CachedMethod {
  cookie: number;
  method: JavaMethod;
}

/** A compiled method as read: its blob (compile id included) and scopes. */
interface CachedCode {
  blob: CodeBlob;
  scopes: CompiledScopes | null;
}

/** One process's JVM. */
export class HotspotInstance extends InstanceStubs {
  readonly #data: HotspotData;
  readonly #memory: RemoteMemory;
  readonly #bias: number;
  #layout: HotspotLayout | null = null;
  #written = false;
  #failure: VmStructsError | null = null;
  readonly #methods = new Map<number, CachedMethod>();
  readonly #code = new Map<number, CachedCode>();
  readonly stats = { named: 0, stale: 0, failed: 0 };
  #reported = { named: 0, stale: 0, failed: 0 };

  constructor(data: HotspotData, memory: RemoteMemory, bias: number) {
    super();
    this.#data = data;
    this.#memory = memory;
    this.#bias = bias;
  }

  /** Why this JVM cannot be read (its tables are malformed or lack what is read), or null. */
  get failure(): VmStructsError | null {
    return this.#failure;
  }

  /**
   * Writes the process's record once the JVM has set up its code cache; until then, each new reading of
   * the process tries again (BPF reports the process while it has no record). A permanent failure is
   * kept in {@linkcode failure}, and nothing is tried again.
   */
  override synchronizeMappings(ebpf: EbpfHandler, pid: Pid, _mappings: readonly ResolvedMapping[]): void {
    if (this.#written || this.#failure !== null) return;
    try {
      const layout = this.#data.layout(this.#memory, this.#bias);
      const heaps = readCodeHeaps(this.#memory, layout.code, this.#bias);
      ebpf.updateProcData("hotspot", pid, hotspotProcRecord(layout, heaps));
      this.#layout = layout;
      this.#written = true;
    } catch (error) {
      if (error instanceof VmNotReadyError) return;
      if (error instanceof VmStructsError) this.#failure = error;
      else throw error;
    }
  }

  detach(ebpf: EbpfHandler, pid: Pid): void {
    if (this.#written) ebpf.deleteProcData("hotspot", pid);
  }

  override symbolize(frame: InterpreterFrame): readonly SymbolizedFrame[] {
    if (frame.kind !== HotspotFrameMarker.Hotspot) throw new InterpreterMismatchError();
    const type = frame.fileId % (HotspotFrameType.FrameTypeMask + 1);
    const pointer = frame.fileId - type;
    const position = frame.addrOrLine % COOKIE_UNIT;
    const cookie = Math.floor(frame.addrOrLine / COOKIE_UNIT);
    const layout = this.#layout;
    if (layout === null) return [this.#unnamed("[jvm: not read yet]")];
    try {
      switch (type) {
        case HotspotFrameType.FrameInterpreted:
          return this.#interpreted(layout, pointer, position, cookie);
        case HotspotFrameType.FrameCompiled:
        case HotspotFrameType.FrameNativeWrapper:
          return this.#compiled(layout, pointer, position, cookie);
        default:
          return this.#stub(layout, pointer);
      }
    } catch (error) {
      if (!(error instanceof VmStructsError || error instanceof RemoteMemoryError)) throw error;
      this.stats.failed++;
      return [this.#unnamed("[jvm: unreadable]")];
    }
  }

  override getAndResetMetrics(): Metric[] {
    const stats = this.stats;
    const metrics = [
      { id: "hotspot.frames_named", value: stats.named - this.#reported.named },
      { id: "hotspot.frames_stale", value: stats.stale - this.#reported.stale },
      { id: "hotspot.frames_failed", value: stats.failed - this.#reported.failed },
    ];
    this.#reported = { ...stats };
    return metrics;
  }

  /** An interpreted frame: its method at its bytecode index, if the method is still what BPF saw. */
  #interpreted(layout: HotspotLayout, address: number, bci: number, cookie: number): SymbolizedFrame[] {
    const method = this.#method(layout, address, cookie);
    if (method === null) {
      this.stats.stale++;
      return [this.#unnamed("[jvm: method unloaded]")];
    }
    this.stats.named++;
    return [javaFrame(method, bci === HotspotFrameType.BciUnknown ? 0 : lineAt(method, bci), false)];
  }

  /** A compiled frame: the methods inlined at its pc, innermost first, then the compiled one. */
  #compiled(layout: HotspotLayout, address: number, offset: number, compileId: number): SymbolizedFrame[] {
    const code = this.#compiledCode(layout, address, compileId);
    if (code === null) {
      this.stats.stale++;
      return [this.#unnamed("[jvm: compiled code freed]")];
    }
    const scopes = code.scopes === null
      ? []
      : scopesAt(code.scopes, offset, layout.methods.unsigned5Excluded);
    const frames: SymbolizedFrame[] = [];
    scopes.forEach(({ method: pointer, bci }, i) => {
      const method = this.#method(layout, pointer, null)!;
      frames.push(javaFrame(method, lineAt(method, Math.max(bci, 0)), i < scopes.length - 1));
    });
    if (frames.length === 0) {
      // No scope at pc (a native wrapper, code before the first call): the compiled method itself.
      const method = this.#method(layout, code.blob.method, null)!;
      frames.push(javaFrame(method, 0, false));
    }
    this.stats.named++;
    return frames;
  }

  #stub(layout: HotspotLayout, address: number): SymbolizedFrame[] {
    const blob = readCodeBlob(this.#memory, layout.code, address);
    this.stats.named++;
    return [this.#unnamed(`[jvm: ${blob.name}]`)];
  }

  /**
   * The method at `address`, or null when its ConstMethod no longer matches `cookie` (null: not checked,
   * for methods an nmethod checked by its compile id names).
   */
  #method(layout: HotspotLayout, address: number, cookie: number | null): JavaMethod | null {
    const cached = this.#methods.get(address);
    if (cached !== undefined && (cookie === null || cached.cookie === cookie)) return cached.method;
    const constMethod = this.#memory.pointer(address + layout.methods.methodConstMethod);
    const current = Math.floor(constMethod / 8) % COOKIE_VALUES;
    if (cookie !== null && current !== cookie) return null;
    const method = readJavaMethod(this.#memory, layout.methods, address);
    if (this.#methods.size >= MAX_CACHED) this.#methods.clear();
    this.#methods.set(address, { cookie: current, method });
    return method;
  }

  /** The nmethod at `address` with its scopes, or null when it is no longer compilation `compileId`. */
  #compiledCode(layout: HotspotLayout, address: number, compileId: number): CachedCode | null {
    const cached = this.#code.get(address);
    if (cached !== undefined && cached.blob.compileId % COOKIE_VALUES === compileId) return cached;
    const blob = readCodeBlob(this.#memory, layout.code, address);
    if (
      blob.compileId % COOKIE_VALUES !== compileId ||
      (blob.kind !== "nmethod" && blob.kind !== "native nmethod")
    ) {
      return null;
    }
    const scopes = blob.kind === "nmethod" ? readCompiledScopes(this.#memory, layout.scopes, blob) : null;
    if (this.#code.size >= MAX_CACHED) this.#code.clear();
    const code = { blob, scopes };
    this.#code.set(address, code);
    return code;
  }

  #unnamed(name: string): SymbolizedFrame {
    return { kind: KIND, functionName: name, sourceFile: UNKNOWN_SOURCE_FILE, line: 0 };
  }
}

/**
 * A Java method's frame: `package.Class.method`, and its source file under its package's folder
 * (`java/util/HashMap.java`), as stack traces and IDEs find it.
 */
function javaFrame(method: JavaMethod, line: number, inlined: boolean): SymbolizedFrame {
  const dot = method.className.lastIndexOf(".");
  const folder = dot < 0 ? "" : `${method.className.slice(0, dot).replaceAll(".", "/")}/`;
  const frame: SymbolizedFrame = {
    kind: KIND,
    functionName: `${method.className}.${method.name}`,
    sourceFile: method.sourceFile === null ? UNKNOWN_SOURCE_FILE : `${folder}${method.sourceFile}`,
    line,
  };
  return inlined ? { ...frame, inlined: true } : frame;
}
