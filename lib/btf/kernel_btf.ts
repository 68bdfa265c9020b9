/**
 * The running kernel's BTF, read lazily: only the pages of `/sys/kernel/btf/vmlinux` and the type records
 * that a question needs. The BPF programs read a handful of fields of kernel structures (a task's pid, its
 * kernel stack, its thread pointer); this is where the host finds their offsets before loading them.
 *
 * Why not the full parse (btf.ts) or libbpf's CO-RE: the kernel's BTF is 5 MiB or more, and
 * sysfs hands it out 4 KiB per read. Loading it whole cost every recording about 20 ms of CPU and thousands
 * of page faults, while the structs the programs read (`task_struct`, `signal_struct`, `thread_struct`)
 * sit among its first few hundred types, and their names early in its string section: pahole writes types
 * and names in the order it meets them, starting with the core of the kernel.
 *
 * @example
 * ```ts ignore
 * import { KernelBtf } from "./kernel_btf.ts";
 * using btf = KernelBtf.open();
 * const { offset, size } = btf.field("task_struct", "thread.fsbase");
 * ```
 *
 * @module
 */
import {
  BTF_TYPE_HEADER_SIZE,
  type BtfHeader,
  BtfKind,
  type BtfTypeReader,
  MAX_CHAIN,
  readBtfHeader,
  resolveType,
  sizeOfType,
  typeRecordBodySize,
} from "./format.ts";

/** Where the kernel publishes its own BTF (CONFIG_DEBUG_INFO_BTF). */
export const VMLINUX_BTF_PATH = "/sys/kernel/btf/vmlinux";

/** A field of a kernel structure: its byte offset from the start of the structure, and its size. */
export interface KernelField {
  readonly offset: number;
  readonly size: number;
}

const PAGE_SIZE = 4096;
const PAGE_SHIFT = 12;

const textEncoder = new TextEncoder();

/** The kernel's BTF, opened for field lookups. Close it (or `using`) to release the file. */
export class KernelBtf implements Disposable {
  readonly #path: string;
  readonly #file: Deno.FsFile;
  readonly #length: number;
  readonly #pages = new Map<number, DataView>();
  readonly #header: BtfHeader;
  /** Byte offset of each type record walked so far, by type id; index 0 (void) unused. */
  readonly #records: number[] = [0];
  #walkedTo: number;
  readonly #structs = new Map<string, number>();
  readonly #types: BtfTypeReader = {
    kindOf: (id) => {
      if (!this.#walkTo(id)) throw new RangeError(`type ${id} does not exist`);
      return this.#kind(id);
    },
    wordOf: (id, byteOffset) => this.#u32(this.#records[id]! + byteOffset),
  };

  private constructor(path: string, file: Deno.FsFile, length: number) {
    this.#path = path;
    this.#file = file;
    this.#length = length;
    const first = this.#page(0);
    this.#header = readBtfHeader(new Uint8Array(first.buffer, first.byteOffset, first.byteLength), length);
    this.#walkedTo = this.#header.typeStart;
  }

  /**
   * Opens the BTF at `path` (the running kernel's by default). Throws when there is none: the kernel was
   * built without CONFIG_DEBUG_INFO_BTF.
   */
  static open(path: string = VMLINUX_BTF_PATH): KernelBtf {
    let file: Deno.FsFile;
    try {
      file = Deno.openSync(path);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new Error(
        `Cannot read the kernel's BTF at ${path} (${reason}): omniprof needs a kernel built with ` +
          "CONFIG_DEBUG_INFO_BTF=y",
      );
    }
    try {
      return new KernelBtf(path, file, file.statSync().size);
    } catch (error) {
      file.close();
      throw new Error(`Cannot read the kernel's BTF at ${path}: ${(error as Error).message}`);
    }
  }

  /** How many 4 KiB pages of the file have been read so far. */
  get pagesRead(): number {
    return this.#pages.size;
  }

  /**
   * The field at `path` (member names joined by dots, e.g. `"thread.fsbase"`) of `struct structName`.
   * Members of anonymous structs and unions count as members of the struct holding them, as in C. Throws
   * when the struct or a member is missing, or the field is a bitfield.
   */
  field(structName: string, path: string): KernelField {
    try {
      let type = this.#struct(structName);
      let offset = 0;
      for (const name of path.split(".")) {
        const member = this.#member(resolveType(this.#types, type), name, 0);
        if (!member) throw new Error(`it has no member ${name}`);
        offset += member.byteOffset;
        type = member.type;
      }
      return { offset, size: sizeOfType(this.#types, type) };
    } catch (error) {
      throw new Error(
        `Cannot find struct ${structName}'s ${path} in the kernel's BTF at ${this.#path}: ${
          (error as Error).message
        }`,
      );
    }
  }

  /** Closes the file. */
  close(): void {
    this.#file.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  /** The id of the struct named `name`, walking the type section only as far as it lies. */
  #struct(name: string): number {
    const known = this.#structs.get(name);
    if (known !== undefined) return known;
    const wanted = textEncoder.encode(name);
    for (let id = 1;; id++) {
      if (!this.#walkTo(id)) throw new Error("there is no such struct");
      if (this.#kind(id) === BtfKind.Struct && this.#nameIs(this.#u32(this.#records[id]!), wanted)) {
        this.#structs.set(name, id);
        return id;
      }
    }
  }

  /**
   * The member `name` of the struct or union `id`, searching anonymous members too; its byte offset is
   * from the start of `id`. Null when there is none.
   */
  #member(id: number, name: string, depth: number): { byteOffset: number; type: number } | null {
    const kind = this.#kind(id);
    if (kind !== BtfKind.Struct && kind !== BtfKind.Union) {
      throw new Error(`type ${id} is not a struct or union`);
    }
    if (depth > MAX_CHAIN) throw new Error(`anonymous members nest deeper than ${MAX_CHAIN}`);
    const record = this.#records[id]!;
    const info = this.#u32(record + 4);
    const count = info & 0xffff;
    const kindFlag = info >>> 31 === 1;
    const wanted = textEncoder.encode(name);
    const anonymous: number[] = [];
    for (let i = 0; i < count; i++) {
      const at = record + BTF_TYPE_HEADER_SIZE + 12 * i;
      const nameOffset = this.#u32(at);
      const type = this.#u32(at + 4);
      const offsetWord = this.#u32(at + 8);
      const bitOffset = kindFlag ? offsetWord & 0xffffff : offsetWord;
      const bitSize = kindFlag ? offsetWord >>> 24 : 0;
      if (nameOffset === 0) {
        anonymous.push(type, bitOffset);
        continue;
      }
      if (!this.#nameIs(nameOffset, wanted)) continue;
      if (bitSize !== 0 || bitOffset % 8 !== 0) throw new Error(`member ${name} is a bitfield`);
      return { byteOffset: bitOffset / 8, type };
    }
    for (let i = 0; i < anonymous.length; i += 2) {
      const inner = this.#member(resolveType(this.#types, anonymous[i]!), name, depth + 1);
      if (inner) return { byteOffset: anonymous[i + 1]! / 8 + inner.byteOffset, type: inner.type };
    }
    return null;
  }

  /** Walks type records until `id` has one; false when the type section ends first. */
  #walkTo(id: number): boolean {
    const records = this.#records;
    const end = this.#header.typeEnd;
    while (records.length <= id) {
      const at = this.#walkedTo;
      if (at >= end) return false;
      if (at + BTF_TYPE_HEADER_SIZE > end) throw new RangeError(`type ${records.length} is truncated`);
      const info = this.#u32(at + 4);
      const body = typeRecordBodySize((info >>> 24) & 0x1f, info & 0xffff);
      if (body < 0) throw new RangeError(`type ${records.length} has unknown kind ${(info >>> 24) & 0x1f}`);
      const next = at + BTF_TYPE_HEADER_SIZE + body;
      if (next > end) throw new RangeError(`type ${records.length} runs past the type section`);
      records.push(at);
      this.#walkedTo = next;
    }
    return true;
  }

  #kind(id: number): number {
    return (this.#u32(this.#records[id]! + 4) >>> 24) & 0x1f;
  }

  /** Whether the name at `nameOffset` in the string section is `wanted` (UTF-8). */
  #nameIs(nameOffset: number, wanted: Uint8Array): boolean {
    const start = this.#header.strStart + nameOffset;
    if (start + wanted.length >= this.#header.strEnd) return false;
    for (let i = 0; i < wanted.length; i++) {
      if (this.#byte(start + i) !== wanted[i]) return false;
    }
    return this.#byte(start + wanted.length) === 0;
  }

  // Records and their fields are 4-byte aligned from the 4-byte aligned header, so no word straddles pages.
  #u32(offset: number): number {
    return this.#page(offset >>> PAGE_SHIFT).getUint32(offset & (PAGE_SIZE - 1), this.#header.littleEndian);
  }

  #byte(offset: number): number {
    return this.#page(offset >>> PAGE_SHIFT).getUint8(offset & (PAGE_SIZE - 1));
  }

  #page(index: number): DataView {
    const cached = this.#pages.get(index);
    if (cached) return cached;
    const start = index * PAGE_SIZE;
    if (start >= this.#length) throw new RangeError(`byte ${start} lies past the ${this.#length}-byte file`);
    const bytes = new Uint8Array(Math.min(PAGE_SIZE, this.#length - start));
    this.#file.seekSync(start, Deno.SeekMode.Start);
    let filled = 0;
    while (filled < bytes.length) {
      const read = this.#file.readSync(bytes.subarray(filled));
      if (read === null) throw new RangeError(`the file ended at byte ${start + filled}, before its size`);
      filled += read;
    }
    const view = new DataView(bytes.buffer);
    this.#pages.set(index, view);
    return view;
  }
}
