/**
 * Reading V8's heap objects in another process: tagged fields, Smis, instance types, strings and arrays,
 * as the layout read from the file says (introspection.ts). 64-bit V8 without pointer compression (what
 * Node.js builds): a field is a word, a heap object pointer has tag 1 in its low bits, and a Smi keeps its
 * value in the upper half of the word.
 *
 * Every read is checked: an object of the wrong type, a string too long or a chain too deep is a
 * {@linkcode V8ObjectError}, never a wrong name.
 *
 * @example
 * ```ts ignore
 * import { V8Heap } from "./heap.ts";
 * const heap = new V8Heap(memory, layout);
 * const name = heap.string(heap.field(script, layout.script.name));
 * ```
 *
 * @module
 */
import type { RemoteMemory } from "../remote_memory.ts";
import type { V8Layout } from "./introspection.ts";
import { codeOfEntryWord, dispatchEntryAddress } from "./dispatch_table.ts";

/** An object was not what its reader expected: freed, moved, or of another type. */
export class V8ObjectError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "V8ObjectError";
  }
}

const TAG_MASK = 3;
/** The instance-type bit of an external string whose characters' address V8 does not cache. */
const UNCACHED_EXTERNAL_STRING = 0x10;
const HEAP_OBJECT_TAG = 1;
const TWO_POW_32 = 4294967296;
/** Names and file names longer than this are cut (V8 allows far longer strings: source text). */
export const MAX_NAME_LENGTH = 1024;
/** Cons and sliced strings nest; a deeper chain is taken as corrupt. */
const MAX_STRING_DEPTH = 16;
const latin1 = new TextDecoder("latin1");
const utf16 = new TextDecoder("utf-16le");

/** A heap object's address (its tag cleared). */
export type V8Object = number & { readonly __v8Object: unique symbol };

/** Reads V8 objects of one process. */
export class V8Heap {
  readonly #memory: RemoteMemory;
  readonly #layout: V8Layout;
  /** Map address -> instance type: maps do not change their type, and few exist. */
  readonly #mapTypes = new Map<number, number>();
  readonly #bias: number;
  #dispatchTable = 0;

  /** `bias`: the load bias of the file V8 is in (for its globals). */
  constructor(memory: RemoteMemory, layout: V8Layout, bias = 0) {
    this.#memory = memory;
    this.#layout = layout;
    this.#bias = bias;
  }

  /**
   * The address of the process's JS dispatch table (V8 13), or 0: not found yet (the process has not made
   * its IsolateGroup), or a V8 without one. {@linkcode locateDispatchTable} looks for it.
   */
  get dispatchTable(): number {
    return this.#dispatchTable;
  }

  /**
   * Looks for the process's JS dispatch table if the layout has one and it is not known yet; returns
   * whether it became known now.
   *
   * @throws {RemoteMemoryError} when the process's memory cannot be read.
   */
  locateDispatchTable(): boolean {
    const location = this.#layout.dispatchTable;
    if (location === null || this.#dispatchTable !== 0) return false;
    const group = this.#memory.pointer(this.#bias + location.groupPointer);
    if (group === 0) return false;
    this.#dispatchTable = this.#memory.pointer(group + location.tableOffset);
    return this.#dispatchTable !== 0;
  }

  /**
   * The code object of JSFunction `fn`: its code field, or the entry of the dispatch table its handle
   * names; null when not known.
   */
  jsFunctionCode(fn: V8Object): V8Object | null {
    const L = this.#layout;
    if (L.dispatchTable === null) return this.field(fn, L.jsFunction.code);
    if (this.#dispatchTable === 0) return null;
    const entry = dispatchEntryAddress(this.#dispatchTable, this.#memory.u32(fn + L.jsFunction.code));
    if (entry === null) return null;
    const [high, low] = this.#memory.u64Halves(entry);
    return codeOfEntryWord(high, low) as V8Object;
  }

  get layout(): V8Layout {
    return this.#layout;
  }

  /** Forgets cached memory: objects may have moved since the last reads. */
  refresh(): void {
    this.#memory.clearCache();
  }

  /** The object a tagged word points to, or null when the word is a Smi or not a pointer. */
  static untag(word: number): V8Object | null {
    return (word & TAG_MASK) === HEAP_OBJECT_TAG ? (word - HEAP_OBJECT_TAG) as V8Object : null;
  }

  /** The tagged field at `offset` of `object`, as the object it points to, or null (a Smi). */
  field(object: V8Object, offset: number): V8Object | null {
    return this.objectAt(object + offset);
  }

  /** The Smi field at `offset` of `object`, or null when it holds no Smi. */
  smi(object: V8Object, offset: number): number | null {
    return this.smiAt(object + offset);
  }

  /** The Smi word at `address`, or null when it holds no Smi. */
  smiAt(address: number): number | null {
    return smiValue(...this.#memory.u64Halves(address));
  }

  /** The object the tagged word at `address` points to, or null (a Smi). */
  objectAt(address: number): V8Object | null {
    const [high, low] = this.#memory.u64Halves(address);
    if ((low & TAG_MASK) !== HEAP_OBJECT_TAG || high >= 0x8000) return null;
    return (high * TWO_POW_32 + low - HEAP_OBJECT_TAG) as V8Object;
  }

  /** `length` raw bytes at `address` (a BytecodeArray's bytecodes). */
  bytes(address: number, length: number): Uint8Array {
    return this.#memory.read(address, length);
  }

  /** The u32 at `address` (a raw field: a size, flags). */
  u32(address: number): number {
    return this.#memory.u32(address);
  }

  /** The instance type of `object`. */
  type(object: V8Object): number {
    const map = this.field(object, this.#layout.heapObjectMap);
    if (map === null) throw new V8ObjectError(`0x${object.toString(16)} has no map`);
    let type = this.#mapTypes.get(map);
    if (type === undefined) {
      type = this.#memory.u16(map + this.#layout.mapInstanceType);
      this.#mapTypes.set(map, type);
    }
    return type;
  }

  /** `object`, checked to be of instance type `type` (`what` names it in the error). */
  expect(object: V8Object | null, type: number, what: string): V8Object {
    if (object === null) throw new V8ObjectError(`no ${what}`);
    const actual = this.type(object);
    if (actual !== type) {
      throw new V8ObjectError(`0x${object.toString(16)} is not a ${what} (type 0x${actual.toString(16)})`);
    }
    return object;
  }

  /** Whether `object` is a string. */
  isString(object: V8Object): boolean {
    return this.type(object) < this.#layout.string.firstNonString;
  }

  /**
   * The string `object`, cut at `maxLength` characters.
   *
   * @throws {V8ObjectError} when it is no string, or one this reader cannot read (external strings, whose
   * characters live outside V8's heap, return null instead).
   */
  string(object: V8Object, maxLength = MAX_NAME_LENGTH): string {
    return this.#string(object, 0, maxLength, 0);
  }

  /**
   * The string `object` if V8 keeps its characters in its heap, or null for an external string (Node's
   * built-in modules' sources).
   */
  stringOrNull(object: V8Object, maxLength: number): string | null {
    try {
      return this.#string(object, 0, maxLength, 0);
    } catch (error) {
      if (error instanceof ExternalStringError) return null;
      throw error;
    }
  }

  /** The bytes of a ByteArray-like object whose data starts `dataOffset` into it and whose length is a Smi. */
  byteArray(object: V8Object, maxLength: number): Uint8Array {
    const L = this.#layout;
    const length = this.smi(object, L.fixedArray.length);
    if (length === null || length < 0 || length > maxLength) {
      throw new V8ObjectError(`0x${object.toString(16)}: a byte array of length ${length}`);
    }
    return this.#memory.read(object + L.fixedArray.data, length);
  }

  /** Element `index` of a FixedArray-like object: the object it points to, or null (a Smi or a hole). */
  element(array: V8Object, index: number): V8Object | null {
    return this.objectAt(this.#elementAddress(array, index));
  }

  /**
   * Element `index` of a weak array (V8 12.5's literal arrays): a weak reference is read as the object
   * it points to, a cleared one as null.
   */
  weakElement(array: V8Object, index: number): V8Object | null {
    const [high, low] = this.#memory.u64Halves(this.#elementAddress(array, index));
    if ((low & 1) === 0 || high >= 0x8000) return null;
    return (high * TWO_POW_32 + low - (low & TAG_MASK)) as V8Object;
  }

  /** Element `index` of a FixedArray-like object as a Smi, or null. */
  smiElement(array: V8Object, index: number): number | null {
    return this.smiAt(this.#elementAddress(array, index));
  }

  /** Where element `index` of a FixedArray-like object lies, checked against its length. */
  #elementAddress(array: V8Object, index: number): number {
    const L = this.#layout;
    const length = this.smi(array, L.fixedArray.length);
    if (length === null || index < 0 || index >= length) {
      throw new V8ObjectError(`0x${array.toString(16)}: no element ${index} of ${length}`);
    }
    return array + L.fixedArray.data + index * 8;
  }

  #string(object: V8Object, start: number, maxLength: number, depth: number): string {
    const S = this.#layout.string;
    if (depth > MAX_STRING_DEPTH) throw new V8ObjectError("a string nested too deep");
    const type = this.type(object);
    if (type >= S.firstNonString) {
      throw new V8ObjectError(`0x${object.toString(16)} is not a string (type 0x${type.toString(16)})`);
    }
    const length = this.#memory.i32(object + S.length);
    if (length < 0) throw new V8ObjectError(`a string of length ${length}`);
    const count = Math.max(0, Math.min(length - start, maxLength));
    if (count === 0) return "";
    const representation = type & S.representationMask;
    const oneByte = (type & S.encodingMask) === S.oneByteTag;
    if (representation === S.seqTag) {
      const width = oneByte ? 1 : 2;
      const chars = oneByte ? S.seqOneByteChars : S.seqTwoByteChars;
      const bytes = this.#memory.read(object + chars + start * width, count * width);
      return oneByte ? latin1.decode(bytes) : utf16.decode(bytes);
    }
    if (representation === S.consTag) {
      const first = this.#part(object, S.consFirst);
      const firstLength = this.#memory.i32(first + S.length);
      let text = start < firstLength ? this.#string(first, start, maxLength, depth + 1) : "";
      if (text.length < count) {
        const second = this.#part(object, S.consSecond);
        text += this.#string(second, Math.max(0, start - firstLength), count - text.length, depth + 1);
      }
      return text;
    }
    if (representation === S.thinTag) {
      return this.#string(this.#part(object, S.thinActual), start, maxLength, depth + 1);
    }
    if (representation === S.slicedTag) {
      const offset = this.smi(object, S.slicedOffset);
      if (offset === null || offset < 0) throw new V8ObjectError("a sliced string without an offset");
      return this.#string(this.#part(object, S.slicedParent), offset + start, count, depth + 1);
    }
    if (representation === S.externalTag) {
      // The embedder keeps the characters (Node: its built-in modules' sources); V8 caches their address
      // right after the resource, unless the string is marked uncached.
      if ((type & UNCACHED_EXTERNAL_STRING) !== 0) throw new ExternalStringError();
      const [high, low] = this.#memory.u64Halves(object + S.externalResource + 8);
      const data = high * TWO_POW_32 + low;
      if (data === 0 || high >= 0x8000) throw new ExternalStringError();
      const width = oneByte ? 1 : 2;
      const bytes = this.#memory.read(data + start * width, count * width);
      return oneByte ? latin1.decode(bytes) : utf16.decode(bytes);
    }
    throw new V8ObjectError(`a string of representation ${representation}`);
  }

  #part(object: V8Object, offset: number): V8Object {
    const part = this.field(object, offset);
    if (part === null) throw new V8ObjectError("a string part that is not a string");
    return part;
  }
}

/** An external string: its characters live outside V8's heap, in the embedder's memory. */
class ExternalStringError extends V8ObjectError {
  constructor() {
    super("an external string");
  }
}

/** The value of a Smi word given as its halves, or null when the word is no Smi. */
export function smiValue(high: number, low: number): number | null {
  if (low !== 0) return null;
  return high | 0;
}
