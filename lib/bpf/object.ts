/**
 * A BPF object (the ELF built from bpf/): open from bytes, configure, load into the kernel, then find
 * its programs and maps. Follows libbpf's fixed sequence: open -> configure -> load -> attach -> close.
 *
 * Maps and programs are named as support/bpf_catalogue.ts, generated from the object built from bpf/,
 * names them, so a misspelt name is a type error. An object whose names are known only at run time (a
 * test build's variant) is opened as `BpfObject.open<string, string>(...)`.
 *
 * @example
 * ```ts ignore
 * import { BpfObject } from "./object.ts";
 * using object = BpfObject.open(bytes, "omniprof");
 * object.map("events").setMaxEntries(8 << 20);
 * object.load();
 * const fd = object.map("metrics").fd;
 * ```
 *
 * @module
 */
import { cString, libc } from "../sys/libc.ts";
import { libbpf, LibbpfError } from "./libbpf.ts";
import { BpfMap } from "./map.ts";
import { BpfProgram } from "./program.ts";
import type { BpfMapName, BpfProgramName } from "../../support/bpf_catalogue.ts";

/**
 * An opened (and later loaded) BPF object. Closing it unloads its programs and maps. `MapName` and
 * `ProgramName` are the names it has: by default those of the object built from bpf/.
 */
export class BpfObject<MapName extends string = BpfMapName, ProgramName extends string = BpfProgramName> {
  #pointer: Deno.PointerValue;
  // libbpf parses the ELF in place until load, so the bytes must outlive the object.
  #bytes: Uint8Array<ArrayBuffer>;
  #loaded = false;
  #maps = new Map<string, BpfMap>();
  #programs = new Map<string, BpfProgram>();

  private constructor(pointer: Deno.PointerObject, bytes: Uint8Array<ArrayBuffer>) {
    this.#pointer = pointer;
    this.#bytes = bytes;
  }

  /**
   * Opens an object from its ELF bytes; `name` appears in error messages. The bytes are those of the object
   * built from bpf/ unless the type arguments say which names the object has.
   */
  static open<MapName extends string = BpfMapName, ProgramName extends string = BpfProgramName>(
    bytes: Uint8Array,
    name: string,
  ): BpfObject<MapName, ProgramName> {
    const lib = libbpf();
    const copy = new Uint8Array(bytes);
    const { result: pointer, log } = lib.captureLog(() =>
      lib.fn.bpf_object__open_mem(copy, BigInt(copy.length), null)
    );
    if (pointer === null) throw new LibbpfError(`open BPF object ${name}`, libc().errno(), log);
    return new BpfObject<MapName, ProgramName>(pointer, copy);
  }

  /**
   * Opens this loaded object's ELF again as a second object whose maps are this object's own: loading it
   * creates no map (libbpf skips a map given a descriptor, data sections included, which keep the values
   * this object froze in them) and loads only the programs left to autoload, so a program this object
   * left out can be verified later and work on the same maps. Close it when its programs are in place
   * (a program array keeps a program loaded). The maps named in `except` are the new object's own (a
   * tail-call table for programs of another type).
   *
   * @throws {Error} when this object is not loaded, or the two objects' maps do not pair up.
   */
  openSharingMaps(options: { except?: readonly MapName[] } = {}): BpfObject<MapName, ProgramName> {
    if (!this.#loaded) throw new Error("Cannot share the maps of a BPF object before it is loaded");
    const lib = libbpf();
    const sharing = BpfObject.open<MapName, ProgramName>(this.#bytes, "omniprof.bpf.o (shared maps)");
    try {
      // The same ELF gives the same maps in the same order. A data section's map is named after its
      // object, which differs (`55922965.rodata`): only the part from the section's dot must match.
      let own = lib.fn.bpf_object__next_map(this.#live(), null);
      let other = lib.fn.bpf_object__next_map(sharing.#live(), null);
      for (; own !== null && other !== null;) {
        const ownName = Deno.UnsafePointerView.getCString(lib.fn.bpf_map__name(own)!);
        const otherName = Deno.UnsafePointerView.getCString(lib.fn.bpf_map__name(other)!);
        if (sectionPart(ownName) !== sectionPart(otherName)) {
          throw new Error(`Cannot share BPF map ${ownName}: the object opened again has ${otherName} there`);
        }
        if (!(options.except ?? []).some((name) => name === ownName)) {
          const fd = lib.fn.bpf_map__fd(own);
          if (fd < 0) throw new LibbpfError(`get the descriptor of map ${ownName}`, -fd);
          const result = lib.fn.bpf_map__reuse_fd(other, fd);
          if (result < 0) throw new LibbpfError(`share BPF map ${ownName}`, -result);
        }
        own = lib.fn.bpf_object__next_map(this.#live(), own);
        other = lib.fn.bpf_object__next_map(sharing.#live(), other);
      }
      if (own !== null || other !== null) {
        throw new Error("Cannot share the maps of a BPF object: the object opened again has other maps");
      }
    } catch (error) {
      sharing.close();
      throw error;
    }
    return sharing;
  }

  /** Whether {@linkcode load} has succeeded. */
  get loaded(): boolean {
    return this.#loaded;
  }

  /** The map called `name`; throws if the object has none. */
  map(name: MapName): BpfMap {
    let map = this.#maps.get(name);
    if (map) return map;
    const pointer = libbpf().fn.bpf_object__find_map_by_name(this.#live(), cString(name));
    if (pointer === null) throw new Error(`Cannot find BPF map ${name}: not in the object`);
    map = new BpfMap(pointer, name, () => this.#loaded);
    this.#maps.set(name, map);
    return map;
  }

  /** The program called `name` (the C function name); throws if the object has none. */
  program(name: ProgramName): BpfProgram {
    let program = this.#programs.get(name);
    if (program) return program;
    const pointer = libbpf().fn.bpf_object__find_program_by_name(this.#live(), cString(name));
    if (pointer === null) throw new Error(`Cannot find BPF program ${name}: not in the object`);
    program = new BpfProgram(pointer, name);
    this.#programs.set(name, program);
    return program;
  }

  /**
   * The names libbpf gives the object's maps, in the object's order. libbpf names a data section's map
   * after the object and the section (`55922965.rodata`: an object opened from memory is named by its
   * address); {@linkcode map} finds it by the section's name.
   */
  mapNames(): string[] {
    const lib = libbpf();
    const names: string[] = [];
    for (let map = lib.fn.bpf_object__next_map(this.#live(), null); map !== null;) {
      names.push(Deno.UnsafePointerView.getCString(lib.fn.bpf_map__name(map)!));
      map = lib.fn.bpf_object__next_map(this.#live(), map);
    }
    return names;
  }

  /** The names of the object's programs (subprograms, which are not programs, left out), in its order. */
  programNames(): string[] {
    const lib = libbpf();
    const names: string[] = [];
    for (let program = lib.fn.bpf_object__next_program(this.#live(), null); program !== null;) {
      names.push(Deno.UnsafePointerView.getCString(lib.fn.bpf_program__name(program)!));
      program = lib.fn.bpf_object__next_program(this.#live(), program);
    }
    return names;
  }

  /**
   * Loads every program (verifier included) and creates the maps. On failure the error carries
   * libbpf's log, which holds the verifier's explanation.
   */
  load(): void {
    const lib = libbpf();
    const { result, log } = lib.captureLog(() => lib.fn.bpf_object__load(this.#live()));
    if (result < 0) throw new LibbpfError("load BPF programs", -result, log);
    this.#loaded = true;
  }

  /** Unloads everything; links must be destroyed first. Safe to call twice. */
  close(): void {
    if (this.#pointer === null) return;
    libbpf().fn.bpf_object__close(this.#pointer);
    this.#pointer = null;
    this.#bytes = new Uint8Array(0);
  }

  [Symbol.dispose](): void {
    this.close();
  }

  #live(): Deno.PointerObject {
    if (this.#pointer === null) throw new Error("Cannot use BPF object: it is closed");
    return this.#pointer;
  }
}

/** A map's name as its section gives it: `.rodata` of a data section's `55922965.rodata`, else the name. */
function sectionPart(name: string): string {
  const dot = name.indexOf(".");
  return dot < 0 ? name : name.slice(dot);
}
