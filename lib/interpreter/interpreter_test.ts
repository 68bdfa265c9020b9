import assert from "node:assert/strict";
import { asPid, type FileId } from "../types.ts";
import { findElfSymbols } from "./elf_symbols.ts";
import {
  type EbpfHandler,
  InstanceStubs,
  InterpreterMismatchError,
  LoaderInfo,
  LRU_FUNCTION_CACHE_SIZE,
  TOP_LEVEL_FUNCTION_NAME,
  UNKNOWN_SOURCE_FILE,
} from "./interpreter.ts";
import { MemoryEbpfHandler } from "./memory_ebpf_handler.ts";
import { findProcessLibraries } from "./process_libraries.ts";
import { openableMappings } from "../testing/process_mappings.ts";
import { bootstrapped, requiring } from "../testing/requirements.ts";

const libc = findProcessLibraries(openableMappings(asPid(Deno.pid))).libc;
const mapsLibc = bootstrapped(libc === null ? "this process maps no libc" : null);

Deno.test("the constants shared with the OpenTelemetry eBPF profiler keep its values", () => {
  assert.equal(LRU_FUNCTION_CACHE_SIZE, 1024);
  assert.equal(UNKNOWN_SOURCE_FILE, "<unknown>");
  assert.equal(TOP_LEVEL_FUNCTION_NAME, "<top-level>");
});

Deno.test(requiring([mapsLibc], {
  name: "LoaderInfo opens the ELF once and getSymbolAsRanges() gives [value, value + size)",
  fn() {
    const info = new LoaderInfo({
      fileId: "0".repeat(32) as FileId,
      fileName: libc!.path,
      open: () => libc!.open(),
    });
    const elf = info.getElf();
    assert.equal(info.getElf(), elf, "cached");
    const malloc = findElfSymbols(elf, ["malloc"]).get("malloc")!;
    assert.deepEqual(info.getSymbolAsRanges("malloc"), [{
      start: malloc.value,
      end: malloc.value + malloc.size,
    }]);
    assert.throws(() => info.getSymbolAsRanges("no_such_symbol_here"), RangeError);
    assert.deepEqual(info.gaps, []);
    info.close();
    info.close();
    assert.notEqual(info.getElf(), elf, "reopened after close");
    info.close();
  },
}));

Deno.test("InstanceStubs gives no-op hooks and refuses to symbolize", () => {
  class Minimal extends InstanceStubs {
    detached = 0;
    detach(_ebpf: EbpfHandler): void {
      this.detached++;
    }
  }
  const instance = new Minimal();
  const ebpf = new MemoryEbpfHandler();
  instance.synchronizeMappings(ebpf, asPid(1), []);
  instance.updateTsdInfo(ebpf, asPid(1), { offset: 0, multiplier: 16, indirect: false });
  assert.deepEqual(instance.getAndResetMetrics(), []);
  assert.throws(() => instance.symbolize({ kind: 1, fileId: 0, addrOrLine: 0 }), InterpreterMismatchError);
  instance.detach(ebpf);
  assert.equal(instance.detached, 1);
});

Deno.test("MemoryEbpfHandler keeps and removes entries like the BPF maps", () => {
  const ebpf = new MemoryEbpfHandler();
  const pid = asPid(42);
  const fileId = "ab".repeat(16) as FileId;
  ebpf.updateInterpreterOffsets(4, fileId, [{ start: 16, end: 32 }]);
  assert.deepEqual(ebpf.interpreterOffsets.get(fileId), { program: 4, ranges: [{ start: 16, end: 32 }] });
  const record = new Uint8Array([1, 2, 3]);
  ebpf.updateProcData("python", pid, record);
  record[0] = 9;
  assert.deepEqual(ebpf.procDataOf("python", pid), new Uint8Array([1, 2, 3]), "a copy is kept");
  ebpf.deleteProcData("python", pid);
  assert.equal(ebpf.procDataOf("python", pid), undefined);
  ebpf.updatePidInterpreterMapping(pid, { value: 0x1000, length: 52 }, 4, fileId, 0x400000);
  assert.equal(ebpf.pidMappings.size, 1);
  ebpf.deletePidInterpreterMapping(pid, { value: 0x1000, length: 52 });
  assert.equal(ebpf.pidMappings.size, 0);
});
