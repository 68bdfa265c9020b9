/**
 * Layout queries over BTF: where each member of a C struct lies and how big it is, and the values of C enums.
 * These are what TypeScript needs to read and write the bytes BPF programs share with it.
 *
 * @example
 * ```ts
 * import { parseBtf } from "./btf.ts";
 * import { enumValues, structLayout } from "./layout.ts";
 *
 * const btf = parseBtf(await Deno.readFile("/sys/kernel/btf/vmlinux"));
 * const regs = structLayout(btf, "pt_regs");
 * console.log(regs.size, regs.members.find((m) => m.name === "ip")?.offset);
 * console.log(enumValues(btf, "bpf_map_type").get("BPF_MAP_TYPE_HASH"));
 * ```
 *
 * @module
 */

import { type Btf, type BtfComposite, BtfKind, type BtfTypeId } from "./btf.ts";

/** Where one member lies in a struct. */
export interface MemberLayout {
  /** The C member name. */
  readonly name: string;
  /** Byte offset from the start of the struct; for a bitfield, of the first byte holding its bits. */
  readonly offset: number;
  /** Bit offset from the start of the struct (`offset * 8` unless a bitfield). */
  readonly bitOffset: number;
  /** Width of a bitfield in bits; 0 when the member is not a bitfield. */
  readonly bitSize: number;
  /** `sizeof` the member; for a bitfield, the number of bytes its bits touch. */
  readonly size: number;
  /** The member's declared C type, e.g. `"u32"`, `"struct foo"`, `"char[16]"`. */
  readonly typeName: string;
  /** Element count when the member is an array. */
  readonly arrayLength?: number;
  /** Size of one element when the member is an array. */
  readonly elementSize?: number;
}

/** The layout of a C struct or union. */
export interface StructLayout {
  /** The name looked up (a struct, union or typedef name). */
  readonly name: string;
  /** `sizeof` the struct. */
  readonly size: number;
  /** Whether it is a union. */
  readonly union: boolean;
  /**
   * Members in declaration order. Members of an anonymous struct or union member are listed in its place,
   * with offsets from the outer struct, because C code names them as if they were direct members.
   */
  readonly members: readonly MemberLayout[];
}

/** Deepest nesting of anonymous struct/union members followed before assuming a cycle in hostile input. */
const MAX_NESTING = 64;

/**
 * The layout of the struct or union named `name` (or of the struct a typedef named `name` stands for).
 * Throws an `Error` naming the type when the BTF has no complete definition of it, or several that differ
 * (bitcode linking keeps one copy per compilation unit; identical copies are fine).
 */
export function structLayout(btf: Btf, name: string): StructLayout {
  let ids = btf.findByName(name, BtfKind.Struct, BtfKind.Union);
  if (ids.length === 0) {
    ids = btf.findByName(name, BtfKind.Typedef).map((id) => btf.resolve(id)).filter((id) => {
      const kind = btf.kind(id);
      return kind === BtfKind.Struct || kind === BtfKind.Union;
    });
  }
  if (ids.length === 0) {
    const forward = btf.findByName(name, BtfKind.Fwd).length > 0;
    throw new Error(
      `Cannot find struct ${name} in the BTF${forward ? ": it holds only a forward declaration" : ""}`,
    );
  }
  const layouts = ids.map((id) => ({ ...structLayoutOf(btf, id), name }));
  return single(layouts, `struct ${name}`);
}

/** The layout of the struct or union with type id `id`. */
export function structLayoutOf(btf: Btf, id: BtfTypeId): StructLayout {
  const t = btf.type(id);
  if (t.kind !== BtfKind.Struct && t.kind !== BtfKind.Union) {
    throw new Error(`Cannot lay out BTF type ${id} (${btf.typeName(id)}): not a struct or union`);
  }
  const members: MemberLayout[] = [];
  addMembers(btf, t, 0, members, 0);
  return { name: t.name, size: t.size, union: t.kind === BtfKind.Union, members };
}

function addMembers(btf: Btf, t: BtfComposite, baseBits: number, out: MemberLayout[], depth: number): void {
  if (depth > MAX_NESTING) {
    throw new RangeError(`Cannot lay out ${btf.typeName(t.id)}: anonymous members nest too deep (a cycle?)`);
  }
  for (const member of t.members) {
    let bitOffset = baseBits + member.bitOffset;
    let bitSize = member.bitSize;
    const resolved = btf.type(btf.resolve(member.type));
    if (member.name === "" && (resolved.kind === BtfKind.Struct || resolved.kind === BtfKind.Union)) {
      addMembers(btf, resolved, bitOffset, out, depth + 1);
      continue;
    }
    // Without the struct's kind_flag, older producers mark a bitfield by an INT narrower than its storage.
    if (
      bitSize === 0 && resolved.kind === BtfKind.Int &&
      (resolved.bitOffset !== 0 || resolved.bits !== resolved.size * 8)
    ) {
      bitOffset += resolved.bitOffset;
      bitSize = resolved.bits;
    }
    const typeName = btf.typeName(member.type);
    const offset = Math.floor(bitOffset / 8);
    if (bitSize !== 0) {
      const size = Math.ceil(((bitOffset % 8) + bitSize) / 8);
      out.push({ name: member.name, offset, bitOffset, bitSize, size, typeName });
    } else if (resolved.kind === BtfKind.Array) {
      const size = btf.sizeOf(resolved.id);
      const elementSize = btf.sizeOf(resolved.elementType);
      out.push({
        name: member.name,
        offset,
        bitOffset,
        bitSize,
        size,
        typeName,
        arrayLength: resolved.count,
        elementSize,
      });
    } else {
      out.push({ name: member.name, offset, bitOffset, bitSize, size: btf.sizeOf(resolved.id), typeName });
    }
  }
}

/**
 * The enumerators of the enum named `name` (or of the enum a typedef named `name` stands for), in
 * declaration order. Throws an `Error` naming the enum when it is missing, defined differently more than
 * once, holds a value beyond 2^53, or is an 8-byte ENUM (whose 32-bit values may be truncated).
 */
export function enumValues(btf: Btf, name: string): Map<string, number> {
  let ids = btf.findByName(name, BtfKind.Enum, BtfKind.Enum64);
  if (ids.length === 0) {
    ids = btf.findByName(name, BtfKind.Typedef).map((id) => btf.resolve(id)).filter((id) => {
      const kind = btf.kind(id);
      return kind === BtfKind.Enum || kind === BtfKind.Enum64;
    });
  }
  if (ids.length === 0) throw new Error(`Cannot find enum ${name} in the BTF`);
  const maps = ids.map((id) => {
    const values = enumValuesOf(btf, id);
    if (typeof values === "string") throw new Error(`Cannot use enum ${name}: ${values}`);
    return values;
  });
  return single(maps, `enum ${name}`);
}

/** The enumerators of enum `id`, or why they cannot be trusted. */
function enumValuesOf(btf: Btf, id: BtfTypeId): Map<string, number> | string {
  const t = btf.type(id);
  if (t.kind !== BtfKind.Enum && t.kind !== BtfKind.Enum64) return `type ${id} is not an enum`;
  if (t.kind === BtfKind.Enum && t.size > 4) {
    return `it is an 8-byte ENUM, whose values the compiler cut to 32 bits (clang before 15 does this)`;
  }
  const values = new Map<string, number>();
  for (const e of t.enumerators) {
    if (typeof e.value !== "number") return `${e.name} = ${e.value} does not fit a JavaScript number`;
    values.set(e.name, e.value);
  }
  return values;
}

/**
 * Every enumerator of every enum, named or anonymous, mapped to its distinct values (one unless enums in
 * different compilation units reuse the name). Enumerators whose values cannot be trusted (see
 * {@linkcode enumValues}) are left out. This finds constants declared as `enum { NAME = 1 };`, provided
 * something made the compiler emit that enum.
 */
export function allEnumerators(btf: Btf): Map<string, number[]> {
  const result = new Map<string, number[]>();
  for (const id of btf.idsOfKind(BtfKind.Enum, BtfKind.Enum64)) {
    const values = enumValuesOf(btf, id);
    if (typeof values === "string") continue;
    for (const [name, value] of values) {
      const known = result.get(name);
      if (known === undefined) result.set(name, [value]);
      else if (!known.includes(value)) known.push(value);
    }
  }
  return result;
}

/**
 * The value of the enumerator `name`, from any enum. Throws an `Error` when no trustworthy enumerator has
 * that name or enums disagree on its value.
 */
export function enumeratorValue(btf: Btf, name: string): number {
  const values = allEnumerators(btf).get(name);
  if (values === undefined) throw new Error(`Cannot find enumerator ${name} in the BTF`);
  if (values.length > 1) {
    throw new Error(`Cannot choose a value for enumerator ${name}: enums give it ${values.join(", ")}`);
  }
  return values[0]!;
}

/** The one value all definitions agree on. */
function single<T>(candidates: readonly T[], what: string): T {
  const first = candidates[0]!;
  const key = canonical(first);
  if (candidates.some((c) => canonical(c) !== key)) {
    throw new Error(
      `Cannot choose between the ${candidates.length} different definitions of ${what} in the BTF`,
    );
  }
  return first;
}

function canonical(value: unknown): string {
  return JSON.stringify(value instanceof Map ? [...value] : value);
}
