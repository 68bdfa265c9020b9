/**
 * Test support: writes call-frame information entries byte by byte (well-formed or deliberately broken)
 * and wraps section contents into a minimal in-memory ELF64 file, for crafted and fuzzed inputs.
 *
 * @module
 */

/** Unsigned LEB128 bytes of `value` (a non-negative integer below 2^53). */
export function uleb(value: number): number[] {
  const out: number[] = [];
  do {
    let byte = value % 128;
    value = Math.floor(value / 128);
    if (value !== 0) byte |= 0x80;
    out.push(byte);
  } while (value !== 0);
  return out;
}

/** Signed LEB128 bytes of `value` (an integer of magnitude below 2^53). */
export function sleb(value: number): number[] {
  const out: number[] = [];
  while (true) {
    const byte = ((value % 128) + 128) % 128;
    value = Math.floor(value / 128);
    const done = (value === 0 && (byte & 0x40) === 0) || (value === -1 && (byte & 0x40) !== 0);
    out.push(done ? byte : byte | 0x80);
    if (done) return out;
  }
}

function u32(value: number): number[] {
  return [value & 0xff, (value >>> 8) & 0xff, (value >>> 16) & 0xff, (value >>> 24) & 0xff];
}

function u64(value: number): number[] {
  return [...u32(value >>> 0), ...u32(Math.floor(value / 2 ** 32))];
}

/** Fields of a CIE to write; defaults are those of GCC on x86-64. */
export interface CieSpec {
  version?: number;
  augmentation?: string;
  codeAlignment?: number;
  dataAlignment?: number;
  returnAddressRegister?: number;
  /** The augmentation data after its length (default: the FDE encoding byte, pcrel|sdata4). */
  augmentationData?: number[];
  /** The bytes of the augmentation data length (default: its ULEB128), to lie about it. */
  augmentationLength?: number[];
  /** Default: def_cfa rsp+8; offset rip at cfa-8. */
  instructions?: number[];
}

/** Builds `.eh_frame` (or `.debug_frame`) content at a given load address. */
export class CfiWriter {
  readonly bytes: number[] = [];
  readonly #vaddr: number;
  readonly #debug: boolean;

  /** @param vaddr where byte 0 is loaded (pc-relative FDE addresses are computed from it) */
  constructor(vaddr: number, kind: "eh_frame" | "debug_frame" = "eh_frame") {
    this.#vaddr = vaddr;
    this.#debug = kind === "debug_frame";
  }

  get offset(): number {
    return this.bytes.length;
  }

  /** Appends a CIE, padded with nops to a multiple of 8; returns its offset. */
  cie(spec: CieSpec = {}): number {
    const offset = this.offset;
    const augmentation = spec.augmentation ?? (this.#debug ? "" : "zR");
    const body = [
      ...(this.#debug ? u32(0xffffffff) : u32(0)),
      spec.version ?? 1,
      ...[...augmentation].map((c) => c.charCodeAt(0)),
      0,
      ...uleb(spec.codeAlignment ?? 1),
      ...sleb(spec.dataAlignment ?? -8),
      ...(spec.version === 3 ? uleb(spec.returnAddressRegister ?? 16) : [spec.returnAddressRegister ?? 16]),
    ];
    if (augmentation.startsWith("z")) {
      const data = spec.augmentationData ?? [0x1b];
      body.push(...(spec.augmentationLength ?? uleb(data.length)), ...data);
    }
    body.push(...(spec.instructions ?? [0x0c, 7, 8, 0x90, 1]));
    this.#entry(body);
    return offset;
  }

  /**
   * Appends an FDE of the CIE at `cieOffset` for [start, start + length), its CFA program
   * `instructions`; returns its offset. `.eh_frame`: pcrel|sdata4 addresses and an empty augmentation
   * data block; `.debug_frame`: 8-byte absolute addresses.
   */
  fde(cieOffset: number, start: number, length: number, instructions: number[] = []): number {
    const offset = this.offset;
    if (this.#debug) {
      this.#entry([...u32(cieOffset), ...u64(start), ...u64(length), ...instructions]);
    } else {
      const pointerField = offset + 4;
      const startField = offset + 8;
      const relative = start - (this.#vaddr + startField);
      this.#entry([
        ...u32(pointerField - cieOffset),
        ...u32(relative | 0),
        ...u32(length),
        0,
        ...instructions,
      ]);
    }
    return offset;
  }

  /** Appends raw bytes (a hand-made or broken entry). */
  raw(bytes: number[]): void {
    this.bytes.push(...bytes);
  }

  /** The content, with a zero terminator when `terminate`. */
  finish(terminate = true): Uint8Array {
    return Uint8Array.from(terminate ? [...this.bytes, 0, 0, 0, 0] : this.bytes);
  }

  #entry(body: number[]): void {
    while ((body.length + 4) % 8 !== 0) body.push(0);
    this.bytes.push(...u32(body.length), ...body);
  }
}

/** A section of a built ELF; `claimedSize`/`claimedOffset` override the header to lie about it. */
export interface SectionSpec {
  name: string;
  type?: number;
  flags?: number;
  addr: number;
  bytes: Uint8Array;
  claimedSize?: number;
  claimedOffset?: number;
}

/** A PT_LOAD segment of a built ELF (no file content of its own). */
export interface SegmentSpec {
  type?: number;
  flags: number;
  vaddr: number;
  memsz: number;
  offset?: number;
  filesz?: number;
}

const SHT_PROGBITS = 1;
const SHT_STRTAB = 3;
const SHF_ALLOC = 2;

/**
 * A little-endian ELF64 x86-64 shared object: header, program headers, section contents (8-aligned), a
 * section name table and the section header table.
 */
export function buildElf(sections: SectionSpec[], segments: SegmentSpec[]): Uint8Array {
  const names = [0];
  const nameOffsets: number[] = [];
  for (const s of [...sections.map((s) => s.name), ".shstrtab"]) {
    nameOffsets.push(names.length);
    names.push(...[...s].map((c) => c.charCodeAt(0)), 0);
  }
  const phoff = 64;
  let cursor = phoff + segments.length * 56;
  const contentOffsets: number[] = [];
  for (const s of sections) {
    cursor = Math.ceil(cursor / 8) * 8;
    contentOffsets.push(cursor);
    cursor += s.bytes.length;
  }
  const namesOffset = cursor;
  cursor += names.length;
  const shoff = Math.ceil(cursor / 8) * 8;
  const shnum = sections.length + 2;
  const out = new Uint8Array(shoff + shnum * 64);
  const view = new DataView(out.buffer);
  const set64 = (at: number, value: number) => {
    view.setUint32(at, value >>> 0, true);
    view.setUint32(at + 4, Math.floor(value / 2 ** 32), true);
  };
  out.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1]);
  view.setUint16(16, 3, true);
  view.setUint16(18, 62, true);
  view.setUint32(20, 1, true);
  set64(32, segments.length > 0 ? phoff : 0);
  set64(40, shoff);
  view.setUint16(52, 64, true);
  view.setUint16(54, 56, true);
  view.setUint16(56, segments.length, true);
  view.setUint16(58, 64, true);
  view.setUint16(60, shnum, true);
  view.setUint16(62, shnum - 1, true);
  for (const [i, p] of segments.entries()) {
    const at = phoff + i * 56;
    view.setUint32(at, p.type ?? 1, true);
    view.setUint32(at + 4, p.flags, true);
    set64(at + 8, p.offset ?? 0);
    set64(at + 16, p.vaddr);
    set64(at + 24, p.vaddr);
    set64(at + 32, p.filesz ?? 0);
    set64(at + 40, p.memsz);
    set64(at + 48, 0x1000);
  }
  for (const [i, s] of sections.entries()) out.set(s.bytes, contentOffsets[i]!);
  out.set(names, namesOffset);
  const header = (
    index: number,
    name: number,
    type: number,
    flags: number,
    addr: number,
    offset: number,
    size: number,
  ) => {
    const at = shoff + index * 64;
    view.setUint32(at, name, true);
    view.setUint32(at + 4, type, true);
    set64(at + 8, flags);
    set64(at + 16, addr);
    set64(at + 24, offset);
    set64(at + 32, size);
    set64(at + 48, 8);
  };
  for (const [i, s] of sections.entries()) {
    header(
      i + 1,
      nameOffsets[i]!,
      s.type ?? SHT_PROGBITS,
      s.flags ?? SHF_ALLOC,
      s.addr,
      s.claimedOffset ?? contentOffsets[i]!,
      s.claimedSize ?? s.bytes.length,
    );
  }
  header(shnum - 1, nameOffsets[sections.length]!, SHT_STRTAB, 0, 0, namesOffset, names.length);
  return out;
}
