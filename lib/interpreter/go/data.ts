/**
 * Per-file Go state: the release, its label offsets, where g is in TLS and the Go text; and
 * {@linkcode GoData.attach}, which writes a process's `go_procs` record. Nothing of a Go process needs
 * reading from its memory on the host: the record is the same for every process of the file.
 *
 * @example
 * ```ts ignore
 * import { GoData } from "./data.ts";
 * const instance = data.attach(ebpf, pid, bias, memory, mappings);
 * instance.detach(ebpf, pid);
 * ```
 *
 * @module
 */
import type { Pid } from "../../types.ts";
import { goProcInfoLayout } from "../../../support/types.ts";
import type { AddressRange, Data, EbpfHandler, Instance } from "../interpreter.ts";
import { InstanceStubs } from "../interpreter.ts";
import type { GoVersion } from "./build_info.ts";
import type { GoLabelOffsets } from "./offsets.ts";

/** What the loader learned of a Go executable. */
export interface GoFileFacts {
  readonly version: GoVersion;
  readonly offsets: GoLabelOffsets;
  /** g's offset from the thread pointer. */
  readonly tlsGOffset: number;
  /** ELF address range of the Go functions. */
  readonly text: AddressRange;
}

/** The `struct go_proc_info` of a process of a file with `facts`. */
export function goProcRecord(facts: GoFileFacts): Uint8Array {
  const L = goProcInfoLayout;
  const record = new Uint8Array(L.sizeof);
  const view = new DataView(record.buffer);
  view.setBigInt64(L.tls_g_offset.offset, BigInt(facts.tlsGOffset), true);
  view.setUint16(L.g_m.offset, facts.offsets.gM, true);
  view.setUint16(L.m_curg.offset, facts.offsets.mCurg, true);
  view.setUint16(L.g_labels.offset, facts.offsets.gLabels, true);
  view.setUint8(L.layout.offset, facts.offsets.layout);
  return record;
}

/** A Go process: its record in BPF is all there is; its frames are native. */
class GoInstance extends InstanceStubs {
  detach(ebpf: EbpfHandler, pid: Pid): void {
    ebpf.deleteProcData("go", pid);
  }
}

/** A Go executable's data, shared by every process of it. */
export class GoData implements Data {
  readonly fileName: string;
  readonly facts: GoFileFacts;
  readonly #record: Uint8Array;

  constructor(fileName: string, facts: GoFileFacts) {
    this.fileName = fileName;
    this.facts = facts;
    this.#record = goProcRecord(facts);
  }

  attach(ebpf: EbpfHandler, pid: Pid): Instance {
    ebpf.updateProcData("go", pid, this.#record);
    return new GoInstance();
  }
}
