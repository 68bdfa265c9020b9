/**
 * Reader for BTF, the BPF Type Format: the compact type information clang emits into the `.BTF` section of a
 * BPF object built with `-g`, and that the kernel exposes as a raw blob for itself. omniprof uses it as the
 * one source of truth for the layout of C structs and the values of C enums shared with TypeScript.
 *
 * Parsing validates the whole blob once (every record inside the type section, every name inside the string
 * section, every type reference to an existing type) and keeps only typed arrays of record offsets and
 * kinds; names, members and enumerators are decoded when asked for.
 *
 * What clang 14 (`-target bpf -O2 -g`) emits into `.BTF`, learnt by compiling probes (the tests re-check):
 * - Types reachable from a global variable (in any section: `.maps`, `.rodata`, `.bss`, or a custom section
 *   named with `__attribute__((section(...)))`), from the signature of a non-inlined function (programs and
 *   global subprograms), following pointers and struct members. A named enum used only as the type of a
 *   struct member appears exactly when that struct does.
 * - Never: types used only by local variables (even `volatile` ones), casts or `sizeof`; types used nowhere;
 *   enums whose constants are only used in code, named or anonymous; `#define` constants.
 * - An anonymous enum appears only through a typedef, member or variable of that enum type.
 * - Reliable ways to force a type out: a global variable of it (or of a struct holding it) in a section the
 *   loader ignores, a `const volatile` global (costs `.rodata` bytes), a global with `__attribute__((used))`
 *   (costs `.bss` bytes), or a parameter of a global non-inlined function. An unused or write-only `static`
 *   variable is dropped unless marked `__attribute__((used))`.
 * - clang 14 never emits ENUM64 or signed enums: a 64-bit enum becomes an 8-byte ENUM whose values are cut to
 *   their low 32 bits, and a negative enumerator is stored as its unsigned 32-bit two's complement.
 * - DATASEC sizes and variable offsets are left 0 in the object; a loader fills them from the ELF symbols.
 * - Linking bitcode (`clang -emit-llvm`, `llvm-link`, `llc -march=bpf`) keeps `.BTF` with the types of every
 *   linked module, but a type defined in several modules appears once per module (no deduplication).
 *
 * @example
 * ```ts
 * import { BtfKind, parseBtf } from "./btf.ts";
 *
 * const btf = parseBtf(await Deno.readFile("/sys/kernel/btf/vmlinux"));
 * const [id] = btf.findByName("task_struct", BtfKind.Struct);
 * if (id !== undefined) console.log(btf.sizeOf(id));
 * ```
 *
 * @module
 */

import type { Brand } from "../types.ts";
import {
  BTF_TYPE_HEADER_SIZE,
  BtfKind,
  type BtfTypeReader,
  KIND_NAMES,
  MAX_CHAIN,
  parseError,
  readBtfHeader,
  resolveType,
  sizeOfType,
  typeRecordBodySize,
} from "./format.ts";

export {
  BTF_TYPE_HEADER_SIZE,
  type BtfHeader,
  BtfKind,
  kindName,
  POINTER_SIZE,
  readBtfHeader,
  typeRecordBodySize,
} from "./format.ts";

/** The id of a type inside one {@linkcode Btf}; 0 is `void`. */
export type BtfTypeId = Brand<number, "BtfTypeId">;

/** The id BTF uses for `void`. */
export const VOID_TYPE_ID = 0 as BtfTypeId;

/** A member of a struct or union. */
export interface BtfMember {
  /** `""` for an anonymous struct or union member. */
  readonly name: string;
  readonly type: BtfTypeId;
  /** Offset from the start of the enclosing struct, in bits. */
  readonly bitOffset: number;
  /** Width of a bitfield in bits, 0 when the member is not a bitfield. */
  readonly bitSize: number;
}

/** One `NAME = value` of an enum. */
export interface BtfEnumerator {
  readonly name: string;
  /** A number when it is a safe integer, else (only possible for ENUM64) a bigint. */
  readonly value: number | bigint;
}

/** A parameter of a function prototype; a variadic `...` is the last one, with name `""` and type void. */
export interface BtfParam {
  readonly name: string;
  readonly type: BtfTypeId;
}

/** A variable placed in a data section. */
export interface BtfVarSecinfo {
  readonly type: BtfTypeId;
  readonly offset: number;
  readonly size: number;
}

interface BtfTypeBase {
  readonly id: BtfTypeId;
  /** `""` when anonymous. */
  readonly name: string;
}

/** An integer type such as `unsigned int`. */
export interface BtfInt extends BtfTypeBase {
  readonly kind: typeof BtfKind.Int;
  readonly size: number;
  readonly signed: boolean;
  readonly char: boolean;
  readonly bool: boolean;
  readonly bitOffset: number;
  readonly bits: number;
}

/** A pointer, typedef, qualifier or type tag: a named or qualified reference to another type. */
export interface BtfRef extends BtfTypeBase {
  readonly kind:
    | typeof BtfKind.Ptr
    | typeof BtfKind.Typedef
    | typeof BtfKind.Volatile
    | typeof BtfKind.Const
    | typeof BtfKind.Restrict
    | typeof BtfKind.TypeTag;
  readonly type: BtfTypeId;
}

/** A fixed-size array. */
export interface BtfArray extends BtfTypeBase {
  readonly kind: typeof BtfKind.Array;
  readonly elementType: BtfTypeId;
  readonly indexType: BtfTypeId;
  readonly count: number;
}

/** A struct or union with its members. */
export interface BtfComposite extends BtfTypeBase {
  readonly kind: typeof BtfKind.Struct | typeof BtfKind.Union;
  readonly size: number;
  readonly members: readonly BtfMember[];
}

/** An enum, 32-bit (ENUM) or 64-bit (ENUM64). */
export interface BtfEnum extends BtfTypeBase {
  readonly kind: typeof BtfKind.Enum | typeof BtfKind.Enum64;
  readonly size: number;
  readonly signed: boolean;
  readonly enumerators: readonly BtfEnumerator[];
}

/** A forward declaration of a struct or union. */
export interface BtfFwd extends BtfTypeBase {
  readonly kind: typeof BtfKind.Fwd;
  readonly union: boolean;
}

/** A function: its name, prototype and linkage (0 static, 1 global, 2 extern). */
export interface BtfFunc extends BtfTypeBase {
  readonly kind: typeof BtfKind.Func;
  readonly type: BtfTypeId;
  readonly linkage: number;
}

/** A function prototype. */
export interface BtfFuncProto extends BtfTypeBase {
  readonly kind: typeof BtfKind.FuncProto;
  readonly returnType: BtfTypeId;
  readonly params: readonly BtfParam[];
}

/** A global variable and its linkage (0 static, 1 global, 2 extern). */
export interface BtfVar extends BtfTypeBase {
  readonly kind: typeof BtfKind.Var;
  readonly type: BtfTypeId;
  readonly linkage: number;
}

/** A data section and the variables in it. */
export interface BtfDatasec extends BtfTypeBase {
  readonly kind: typeof BtfKind.Datasec;
  readonly size: number;
  readonly vars: readonly BtfVarSecinfo[];
}

/** A floating-point type. */
export interface BtfFloat extends BtfTypeBase {
  readonly kind: typeof BtfKind.Float;
  readonly size: number;
}

/** A `btf_decl_tag` attribute on a type, or on one of its members or parameters. */
export interface BtfDeclTag extends BtfTypeBase {
  readonly kind: typeof BtfKind.DeclTag;
  readonly type: BtfTypeId;
  /** The member or parameter index the tag is on, -1 for the type itself. */
  readonly componentIndex: number;
}

/** `void`, type id 0. */
export interface BtfVoid extends BtfTypeBase {
  readonly kind: typeof BtfKind.Void;
}

/** One decoded BTF type; `kind` tells which. */
export type BtfType =
  | BtfVoid
  | BtfInt
  | BtfRef
  | BtfArray
  | BtfComposite
  | BtfEnum
  | BtfFwd
  | BtfFunc
  | BtfFuncProto
  | BtfVar
  | BtfDatasec
  | BtfFloat
  | BtfDeclTag;

const textDecoder = new TextDecoder();
const textEncoder = new TextEncoder();

/**
 * A parsed BTF blob. Create it with {@linkcode parseBtf}; it keeps a reference to the bytes it was given.
 */
export class Btf {
  /** Number of type ids, counting `void` (id 0): valid ids are 0 to `typeCount - 1`. */
  readonly typeCount: number;
  /** Whether the blob is little-endian (the byte order of its target). */
  readonly littleEndian: boolean;
  readonly #bytes: Uint8Array;
  readonly #view: DataView;
  /** Byte offset of each type's record in #bytes; index 0 (void) unused. */
  readonly #offsets: Uint32Array;
  readonly #kinds: Uint8Array;
  readonly #strStart: number;
  readonly #strEnd: number;
  readonly #types: BtfTypeReader = {
    kindOf: (id) => this.kind(id as BtfTypeId),
    wordOf: (id, byteOffset) => this.#u32(this.#offsets[id]! + byteOffset),
  };

  /** Parses and validates `bytes`; prefer {@linkcode parseBtf}. */
  constructor(bytes: Uint8Array) {
    const { littleEndian: le, typeStart, typeEnd, strStart, strEnd } = readBtfHeader(bytes, bytes.length);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    // A NUL-terminated section means every in-range name offset reads a terminated string.
    if (strEnd === strStart || bytes[strEnd - 1] !== 0) {
      throw parseError("string section is empty or does not end with NUL");
    }

    const maxTypes = Math.floor((typeEnd - typeStart) / BTF_TYPE_HEADER_SIZE) + 1;
    const offsets = new Uint32Array(maxTypes);
    const kinds = new Uint8Array(maxTypes);
    let id = 1;
    let off = typeStart;
    let maxRef = 0;
    let maxName = 0;
    while (off < typeEnd) {
      if (off + BTF_TYPE_HEADER_SIZE > typeEnd) throw parseError(`type ${id} at byte ${off} is truncated`);
      const nameOff = view.getUint32(off, le);
      const info = view.getUint32(off + 4, le);
      const kind = (info >>> 24) & 0x1f;
      const vlen = info & 0xffff;
      const sizeOrType = view.getUint32(off + 8, le);
      if (nameOff > maxName) maxName = nameOff;
      const extra = typeRecordBodySize(kind, vlen);
      if (extra < 0) throw parseError(`type ${id} at byte ${off} has unknown kind ${kind}`);
      const end = off + BTF_TYPE_HEADER_SIZE + extra;
      if (end > typeEnd) {
        throw parseError(
          `type ${id} (${KIND_NAMES[kind]}, vlen ${vlen}) at byte ${off} runs past the section`,
        );
      }
      // Track the largest reference so one comparison at the end validates them all.
      switch (kind) {
        case BtfKind.Ptr:
        case BtfKind.Typedef:
        case BtfKind.Volatile:
        case BtfKind.Const:
        case BtfKind.Restrict:
        case BtfKind.Func:
        case BtfKind.TypeTag:
        case BtfKind.Var:
          if (sizeOrType > maxRef) maxRef = sizeOrType;
          break;
        case BtfKind.DeclTag: {
          if (sizeOrType > maxRef) maxRef = sizeOrType;
          if (view.getInt32(off + 12, le) < -1) throw parseError(`decl tag ${id} has a bad component index`);
          break;
        }
        case BtfKind.Array: {
          const elem = view.getUint32(off + 12, le);
          const index = view.getUint32(off + 16, le);
          if (elem > maxRef) maxRef = elem;
          if (index > maxRef) maxRef = index;
          break;
        }
        case BtfKind.Struct:
        case BtfKind.Union:
          for (let m = off + BTF_TYPE_HEADER_SIZE; m < end; m += 12) {
            const name = view.getUint32(m, le);
            const type = view.getUint32(m + 4, le);
            if (name > maxName) maxName = name;
            if (type > maxRef) maxRef = type;
          }
          break;
        case BtfKind.Enum:
          for (let m = off + BTF_TYPE_HEADER_SIZE; m < end; m += 8) {
            const name = view.getUint32(m, le);
            if (name > maxName) maxName = name;
          }
          break;
        case BtfKind.Enum64:
          for (let m = off + BTF_TYPE_HEADER_SIZE; m < end; m += 12) {
            const name = view.getUint32(m, le);
            if (name > maxName) maxName = name;
          }
          break;
        case BtfKind.FuncProto:
          if (sizeOrType > maxRef) maxRef = sizeOrType;
          for (let m = off + BTF_TYPE_HEADER_SIZE; m < end; m += 8) {
            const name = view.getUint32(m, le);
            const type = view.getUint32(m + 4, le);
            if (name > maxName) maxName = name;
            if (type > maxRef) maxRef = type;
          }
          break;
        case BtfKind.Datasec:
          for (let m = off + BTF_TYPE_HEADER_SIZE; m < end; m += 12) {
            const type = view.getUint32(m, le);
            if (type > maxRef) maxRef = type;
          }
          break;
      }
      offsets[id] = off;
      kinds[id] = kind;
      id++;
      off = end;
    }
    if (maxRef >= id) throw parseError(`a type refers to type ${maxRef} but the last type is ${id - 1}`);
    if (maxName >= strEnd - strStart) {
      throw parseError(`name offset ${maxName} lies outside the ${strEnd - strStart}-byte string section`);
    }

    this.typeCount = id;
    this.littleEndian = le;
    this.#bytes = bytes;
    this.#view = view;
    this.#offsets = offsets.slice(0, id);
    this.#kinds = kinds.slice(0, id);
    this.#strStart = strStart;
    this.#strEnd = strEnd;
  }

  /** The kind of type `id`. */
  kind(id: BtfTypeId): BtfKind {
    this.#check(id);
    return this.#kinds[id] as BtfKind;
  }

  /** The name of type `id`, `""` when anonymous. */
  name(id: BtfTypeId): string {
    this.#check(id);
    return id === 0 ? "" : this.#string(this.#u32(this.#offsets[id]!));
  }

  /** Decodes type `id` completely (members, enumerators, parameters...). */
  type(id: BtfTypeId): BtfType {
    this.#check(id);
    if (id === 0) return { kind: BtfKind.Void, id, name: "" };
    const off = this.#offsets[id]!;
    const kind = this.#kinds[id] as BtfKind;
    const name = this.#string(this.#u32(off));
    const info = this.#u32(off + 4);
    const vlen = info & 0xffff;
    const kindFlag = info >>> 31 === 1;
    const sizeOrType = this.#u32(off + 8);
    const body = off + BTF_TYPE_HEADER_SIZE;
    switch (kind) {
      case BtfKind.Int: {
        const encoding = this.#u32(body);
        return {
          kind,
          id,
          name,
          size: sizeOrType,
          signed: (encoding & 0x01000000) !== 0,
          char: (encoding & 0x02000000) !== 0,
          bool: (encoding & 0x04000000) !== 0,
          bitOffset: (encoding >>> 16) & 0xff,
          bits: encoding & 0xff,
        };
      }
      case BtfKind.Ptr:
      case BtfKind.Typedef:
      case BtfKind.Volatile:
      case BtfKind.Const:
      case BtfKind.Restrict:
      case BtfKind.TypeTag:
        return { kind, id, name, type: sizeOrType as BtfTypeId };
      case BtfKind.Array:
        return {
          kind,
          id,
          name,
          elementType: this.#u32(body) as BtfTypeId,
          indexType: this.#u32(body + 4) as BtfTypeId,
          count: this.#u32(body + 8),
        };
      case BtfKind.Struct:
      case BtfKind.Union: {
        const members: BtfMember[] = [];
        for (let i = 0; i < vlen; i++) {
          const m = body + 12 * i;
          const offset = this.#u32(m + 8);
          members.push({
            name: this.#string(this.#u32(m)),
            type: this.#u32(m + 4) as BtfTypeId,
            bitOffset: kindFlag ? offset & 0xffffff : offset,
            bitSize: kindFlag ? offset >>> 24 : 0,
          });
        }
        return { kind, id, name, size: sizeOrType, members };
      }
      case BtfKind.Enum: {
        const enumerators: BtfEnumerator[] = [];
        for (let i = 0; i < vlen; i++) {
          const m = body + 8 * i;
          const value = kindFlag ? this.#view.getInt32(m + 4, this.littleEndian) : this.#u32(m + 4);
          enumerators.push({ name: this.#string(this.#u32(m)), value });
        }
        return { kind, id, name, size: sizeOrType, signed: kindFlag, enumerators };
      }
      case BtfKind.Enum64: {
        const enumerators: BtfEnumerator[] = [];
        for (let i = 0; i < vlen; i++) {
          const m = body + 12 * i;
          const lo = this.#u32(m + 4);
          const hi = kindFlag ? this.#view.getInt32(m + 8, this.littleEndian) : this.#u32(m + 8);
          // hi * 2^32 is exact; the sum is exact whenever it is a safe integer.
          const approx = hi * 0x100000000 + lo;
          const value = Number.isSafeInteger(approx) ? approx : (BigInt(hi) << 32n) + BigInt(lo);
          enumerators.push({ name: this.#string(this.#u32(m)), value });
        }
        return { kind, id, name, size: sizeOrType, signed: kindFlag, enumerators };
      }
      case BtfKind.Fwd:
        return { kind, id, name, union: kindFlag };
      case BtfKind.Func:
        return { kind, id, name, type: sizeOrType as BtfTypeId, linkage: vlen };
      case BtfKind.FuncProto: {
        const params: BtfParam[] = [];
        for (let i = 0; i < vlen; i++) {
          const m = body + 8 * i;
          params.push({ name: this.#string(this.#u32(m)), type: this.#u32(m + 4) as BtfTypeId });
        }
        return { kind, id, name, returnType: sizeOrType as BtfTypeId, params };
      }
      case BtfKind.Var:
        return { kind, id, name, type: sizeOrType as BtfTypeId, linkage: this.#u32(body) };
      case BtfKind.Datasec: {
        const vars: BtfVarSecinfo[] = [];
        for (let i = 0; i < vlen; i++) {
          const m = body + 12 * i;
          vars.push({ type: this.#u32(m) as BtfTypeId, offset: this.#u32(m + 4), size: this.#u32(m + 8) });
        }
        return { kind, id, name, size: sizeOrType, vars };
      }
      case BtfKind.Float:
        return { kind, id, name, size: sizeOrType };
      case BtfKind.DeclTag:
        return {
          kind,
          id,
          name,
          type: sizeOrType as BtfTypeId,
          componentIndex: this.#view.getInt32(body, this.littleEndian),
        };
      default:
        // The constructor admits only the kinds above.
        throw new RangeError(`Cannot decode BTF type ${id}: kind ${kind}`);
    }
  }

  /**
   * Ids of the types named `name`, optionally only of the given kinds, in id order. Compares the UTF-8
   * bytes in place, so a lookup allocates nothing per type.
   */
  findByName(name: string, ...kinds: BtfKind[]): BtfTypeId[] {
    const wanted = textEncoder.encode(name);
    const bytes = this.#bytes;
    const result: BtfTypeId[] = [];
    const anyKind = kinds.length === 0;
    for (let id = 1; id < this.typeCount; id++) {
      if (!anyKind && !kinds.includes(this.#kinds[id] as BtfKind)) continue;
      const start = this.#strStart + this.#u32(this.#offsets[id]!);
      if (start + wanted.length >= this.#strEnd || bytes[start + wanted.length] !== 0) continue;
      let i = 0;
      while (i < wanted.length && bytes[start + i] === wanted[i]) i++;
      if (i === wanted.length) result.push(id as BtfTypeId);
    }
    return result;
  }

  /** Ids of all types of the given kinds, in id order. */
  idsOfKind(...kinds: BtfKind[]): BtfTypeId[] {
    const result: BtfTypeId[] = [];
    for (let id = 1; id < this.typeCount; id++) {
      if (kinds.includes(this.#kinds[id] as BtfKind)) result.push(id as BtfTypeId);
    }
    return result;
  }

  /** Follows typedefs, qualifiers and type tags to the type they stand for. */
  resolve(id: BtfTypeId): BtfTypeId {
    return resolveType(this.#types, id) as BtfTypeId;
  }

  /** Size in bytes of a value of type `id` (`sizeof`); throws for void, functions and forward declarations. */
  sizeOf(id: BtfTypeId): number {
    return sizeOfType(this.#types, id);
  }

  /** A C spelling of type `id` for messages and comments, e.g. `"struct foo *"`, `"u32[4]"`. */
  typeName(id: BtfTypeId): string {
    return this.#typeName(id, 0);
  }

  #typeName(id: BtfTypeId, depth: number): string {
    if (depth > MAX_CHAIN) return "...";
    const t = this.type(id);
    const tagged = (keyword: string) => `${keyword} ${t.name === "" ? "(anon)" : t.name}`;
    switch (t.kind) {
      case BtfKind.Void:
        return "void";
      case BtfKind.Struct:
        return tagged("struct");
      case BtfKind.Union:
        return tagged("union");
      case BtfKind.Enum:
      case BtfKind.Enum64:
        return tagged("enum");
      case BtfKind.Fwd:
        return tagged(t.union ? "union" : "struct");
      case BtfKind.Ptr:
        return `${this.#typeName(t.type, depth + 1)} *`;
      case BtfKind.Const:
        return `const ${this.#typeName(t.type, depth + 1)}`;
      case BtfKind.Volatile:
        return `volatile ${this.#typeName(t.type, depth + 1)}`;
      case BtfKind.Restrict:
        return `restrict ${this.#typeName(t.type, depth + 1)}`;
      case BtfKind.TypeTag:
        return this.#typeName(t.type, depth + 1);
      case BtfKind.Array: {
        // C writes the outermost dimension first: int[2][3] is an array of 2 arrays of 3 ints.
        let dims = `[${t.count}]`;
        let element = t.elementType;
        for (let i = 0; i < MAX_CHAIN; i++) {
          const inner = this.type(element);
          if (inner.kind !== BtfKind.Array) break;
          dims += `[${inner.count}]`;
          element = inner.elementType;
        }
        return `${this.#typeName(element, depth + 1)}${dims}`;
      }
      case BtfKind.FuncProto:
        return `${this.#typeName(t.returnType, depth + 1)} (${
          t.params.map((p) => p.type === 0 ? "..." : this.#typeName(p.type, depth + 1)).join(", ")
        })`;
      default:
        return t.name;
    }
  }

  #check(id: number): void {
    if (!Number.isInteger(id) || id < 0 || id >= this.typeCount) {
      throw new RangeError(`Cannot read BTF type ${id}: ids run from 0 to ${this.typeCount - 1}`);
    }
  }

  #u32(offset: number): number {
    return this.#view.getUint32(offset, this.littleEndian);
  }

  #string(offset: number): string {
    const start = this.#strStart + offset;
    // The constructor checked offset < section length and that the section ends with NUL.
    const end = this.#bytes.indexOf(0, start);
    return textDecoder.decode(this.#bytes.subarray(start, end));
  }
}

/**
 * Parses a raw BTF blob: the `.BTF` section of a BPF object, or the kernel's own BTF. Throws a
 * `RangeError` ("Cannot parse BTF: ...") for malformed input.
 *
 * @example
 * ```ts
 * const btf = parseBtf(await Deno.readFile("/sys/kernel/btf/vmlinux"));
 * console.log(btf.typeCount);
 * ```
 */
export function parseBtf(bytes: Uint8Array): Btf {
  return new Btf(bytes);
}
