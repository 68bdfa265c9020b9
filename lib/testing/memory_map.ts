/**
 * A BPF map held in memory, for tests of code that writes maps: it takes updates and deletes as the
 * kernel's hash maps and tries do (by the key's bytes) and shows what is in it. Test-only.
 *
 * @module
 */
import type { MapWriter } from "../bpf/map.ts";

/** Entries by their key's bytes. */
export class MemoryMap implements MapWriter {
  /** Hex of each key -> a copy of its value. */
  readonly entries = new Map<string, Uint8Array>();
  /** Updates and deletes so far. */
  writes = 0;

  update(key: Uint8Array, value: Uint8Array): void {
    this.writes++;
    this.entries.set(hex(key), value.slice());
  }

  delete(key: Uint8Array): boolean {
    this.writes++;
    return this.entries.delete(hex(key));
  }

  /** The entries present: key and value bytes. */
  pairs(): [Uint8Array, Uint8Array][] {
    return [...this.entries].map(([text, value]) => [unhex(text), value]);
  }
}

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
}

function unhex(text: string): Uint8Array {
  return Uint8Array.from(text.match(/../g) ?? [], (pair) => parseInt(pair, 16));
}
