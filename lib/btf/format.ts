/**
 * The BTF binary format itself, shared by the full parser (btf.ts) and the lazy
 * reader of the kernel's BTF (kernel_btf.ts): type kinds, the blob's header, and how long each kind's
 * record is.
 *
 * @example
 * ```ts
 * import { BtfKind, readBtfHeader, typeRecordBodySize } from "./format.ts";
 *
 * const bytes = await Deno.readFile("/sys/kernel/btf/vmlinux");
 * const header = readBtfHeader(bytes, bytes.length);
 * console.log(header.typeEnd - header.typeStart); // bytes of type records
 * console.log(typeRecordBodySize(BtfKind.Struct, 3)); // 36: three 12-byte members
 * ```
 *
 * @module
 */

/**
 * Size of a pointer in bytes. BTF does not record it; BPF and every 64-bit kernel use 8.
 */
export const POINTER_SIZE = 8;

/** The kind of a BTF type, as numbered in the format. */
export const BtfKind = {
  Void: 0,
  Int: 1,
  Ptr: 2,
  Array: 3,
  Struct: 4,
  Union: 5,
  Enum: 6,
  Fwd: 7,
  Typedef: 8,
  Volatile: 9,
  Const: 10,
  Restrict: 11,
  Func: 12,
  FuncProto: 13,
  Var: 14,
  Datasec: 15,
  Float: 16,
  DeclTag: 17,
  TypeTag: 18,
  Enum64: 19,
} as const;
/** The kind of a BTF type. */
export type BtfKind = (typeof BtfKind)[keyof typeof BtfKind];

/** The format's names of the kinds, by number. */
export const KIND_NAMES = [
  "VOID",
  "INT",
  "PTR",
  "ARRAY",
  "STRUCT",
  "UNION",
  "ENUM",
  "FWD",
  "TYPEDEF",
  "VOLATILE",
  "CONST",
  "RESTRICT",
  "FUNC",
  "FUNC_PROTO",
  "VAR",
  "DATASEC",
  "FLOAT",
  "DECL_TAG",
  "TYPE_TAG",
  "ENUM64",
] as const;

/** The name the BTF format gives a kind, e.g. `"STRUCT"`. */
export function kindName(kind: BtfKind): string {
  return KIND_NAMES[kind] ?? `KIND_${kind}`;
}

const HEADER_SIZE = 24;
/** Size in bytes of a BTF type record's header, before its kind-specific body. */
export const BTF_TYPE_HEADER_SIZE = 12;
const BTF_MAGIC = 0xeb9f;
/** The error every malformed blob gets: "Cannot parse BTF: STATE". */
export function parseError(state: string): RangeError {
  return new RangeError(`Cannot parse BTF: ${state}`);
}

/** Where the sections of a BTF blob lie, from its header; byte offsets from the start of the blob. */
export interface BtfHeader {
  readonly littleEndian: boolean;
  readonly typeStart: number;
  readonly typeEnd: number;
  readonly strStart: number;
  readonly strEnd: number;
}

/**
 * Reads and checks the header at the start of `bytes`, a blob of `totalLength` bytes (`bytes` may hold
 * only its beginning). Throws a `RangeError` ("Cannot parse BTF: ...") when it is not BTF or a section
 * runs past the end.
 */
export function readBtfHeader(bytes: Uint8Array, totalLength: number): BtfHeader {
  if (bytes.length < HEADER_SIZE || totalLength < HEADER_SIZE) {
    throw parseError(
      `${Math.min(bytes.length, totalLength)} bytes is shorter than the ${HEADER_SIZE}-byte header`,
    );
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, HEADER_SIZE);
  const magic = view.getUint16(0, true);
  let le: boolean;
  if (magic === BTF_MAGIC) le = true;
  else if (magic === 0x9feb) le = false;
  else throw parseError(`bad magic 0x${magic.toString(16)}`);
  if (bytes[2] !== 1) throw parseError(`unsupported version ${bytes[2]}`);
  const hdrLen = view.getUint32(4, le);
  if (hdrLen < HEADER_SIZE || hdrLen > totalLength) {
    throw parseError(`header length ${hdrLen} outside 24..${totalLength}`);
  }
  const typeStart = hdrLen + view.getUint32(8, le);
  const typeEnd = typeStart + view.getUint32(12, le);
  const strStart = hdrLen + view.getUint32(16, le);
  const strEnd = strStart + view.getUint32(20, le);
  if (typeEnd > totalLength) {
    throw parseError(`type section ${typeStart}..${typeEnd} ends past the ${totalLength}-byte blob`);
  }
  if (strEnd > totalLength) {
    throw parseError(`string section ${strStart}..${strEnd} ends past the ${totalLength}-byte blob`);
  }
  return { littleEndian: le, typeStart, typeEnd, strStart, strEnd };
}

/**
 * Size in bytes of the body that follows the 12-byte header of a type record of `kind` with `vlen`
 * entries; -1 for a kind this reader does not know (its size cannot be known either).
 */
export function typeRecordBodySize(kind: number, vlen: number): number {
  switch (kind) {
    case BtfKind.Int:
    case BtfKind.Var:
    case BtfKind.DeclTag:
      return 4;
    case BtfKind.Array:
      return 12;
    case BtfKind.Struct:
    case BtfKind.Union:
    case BtfKind.Datasec:
    case BtfKind.Enum64:
      return 12 * vlen;
    case BtfKind.Enum:
    case BtfKind.FuncProto:
      return 8 * vlen;
    case BtfKind.Ptr:
    case BtfKind.Fwd:
    case BtfKind.Typedef:
    case BtfKind.Volatile:
    case BtfKind.Const:
    case BtfKind.Restrict:
    case BtfKind.Func:
    case BtfKind.Float:
    case BtfKind.TypeTag:
      return 0;
    default:
      return -1;
  }
}

/** Longest typedef/qualifier/array chain followed before assuming a cycle in hostile input. */
export const MAX_CHAIN = 64;

/** What {@linkcode resolveType} and {@linkcode sizeOfType} read of a BTF reader's types. */
export interface BtfTypeReader {
  /** The kind of type `id`; throws when there is no such type. */
  kindOf(id: number): number;
  /** The 32-bit word `byteOffset` bytes into type `id`'s record. */
  wordOf(id: number, byteOffset: number): number;
}

/** Follows typedefs, qualifiers and type tags from `id` to the type they stand for. */
export function resolveType(types: BtfTypeReader, id: number): number {
  let current = id;
  for (let hops = 0; hops < MAX_CHAIN; hops++) {
    switch (types.kindOf(current)) {
      case BtfKind.Typedef:
      case BtfKind.Volatile:
      case BtfKind.Const:
      case BtfKind.Restrict:
      case BtfKind.TypeTag:
        current = types.wordOf(current, 8);
        break;
      default:
        return current;
    }
  }
  throw new RangeError(`Cannot resolve BTF type ${id}: chain longer than ${MAX_CHAIN} types (a cycle?)`);
}

/** Size in bytes of a value of type `id` (`sizeof`); throws for void, functions and forward declarations. */
export function sizeOfType(types: BtfTypeReader, id: number): number {
  let count = 1;
  let current = resolveType(types, id);
  for (let hops = 0; hops < MAX_CHAIN; hops++) {
    const kind = types.kindOf(current);
    switch (kind) {
      case BtfKind.Int:
      case BtfKind.Struct:
      case BtfKind.Union:
      case BtfKind.Enum:
      case BtfKind.Enum64:
      case BtfKind.Float:
      case BtfKind.Datasec:
        return count * types.wordOf(current, 8);
      case BtfKind.Ptr:
        return count * POINTER_SIZE;
      case BtfKind.Array:
        count *= types.wordOf(current, BTF_TYPE_HEADER_SIZE + 8);
        if (count > 0xffffffff) throw new RangeError(`Cannot size BTF type ${id}: array larger than 4 GiB`);
        current = resolveType(types, types.wordOf(current, BTF_TYPE_HEADER_SIZE));
        break;
      default:
        throw new RangeError(`Cannot size BTF type ${id}: a ${kindName(kind as BtfKind)} has no size`);
    }
  }
  throw new RangeError(`Cannot size BTF type ${id}: arrays nested deeper than ${MAX_CHAIN}`);
}
