import assert from "node:assert/strict";
import type { FileId, Pid } from "../../types.ts";
import { GoLabelLayout, goProcInfoLayout, GoUnwindProgram } from "../../../support/types.ts";
import { LoaderInfo } from "../interpreter.ts";
import { MemoryEbpfHandler } from "../memory_ebpf_handler.ts";
import { programs, requiring } from "../../testing/requirements.ts";
import { buildGoWorkload } from "../../../tests/helpers.ts";
import { ElfFile } from "../../elf/elf_file.ts";
import { hasGoBuildInfo, readGoBuildVersion } from "./build_info.ts";
import { goLoader } from "./loader.ts";
import type { GoData } from "./data.ts";

/** The text symbols (T) of `binary` with their addresses and sizes, as `go tool nm -size` lists them. */
function textSymbols(binary: string): Map<string, { address: number; size: number }> {
  const result = new Deno.Command("go", {
    args: ["tool", "nm", "-size", binary],
    env: { GOTOOLCHAIN: "local" },
  })
    .outputSync();
  assert.ok(result.success, new TextDecoder().decode(result.stderr));
  const symbols = new Map<string, { address: number; size: number }>();
  for (const line of new TextDecoder().decode(result.stdout).split("\n")) {
    const [address, size, type, name] = line.trim().split(/\s+/);
    if (type === "T" && name !== undefined) {
      symbols.set(name, { address: parseInt(address!, 16), size: Number(size) });
    }
  }
  return symbols;
}

function load(binary: string, ebpf: MemoryEbpfHandler): GoData | null {
  using info = new LoaderInfo({ fileId: binary as FileId, fileName: binary });
  return goLoader(ebpf, info) as GoData | null;
}

Deno.test(requiring([programs("go")], {
  name: "goLoader() claims a stripped Go binary and declares its Go text as the label reader's place",
  async fn() {
    const withSymbols = await buildGoWorkload("labels", {}, "-symbols");
    const stripped = await buildGoWorkload("labels", { ldflags: "-s -w" }, "-stripped");
    const symbols = textSymbols(withSymbols);
    assert.ok(symbols.has("main.c") && symbols.has("runtime.goexit.abi0"), "the workload's functions");
    for (const binary of [withSymbols, stripped]) {
      const ebpf = new MemoryEbpfHandler();
      const data = load(binary, ebpf);
      assert.ok(data !== null, binary);
      const declared = ebpf.interpreterOffsets.get(binary as FileId);
      assert.equal(declared?.program, GoUnwindProgram.Labels);
      assert.equal(declared.ranges.length, 1);
      const [range] = declared.ranges;
      // From the first Go function to the end of the last: every text symbol, and no more than .text.
      const starts = [...symbols.values()].map((symbol) => symbol.address);
      const ends = [...symbols.values()].map((symbol) => symbol.address + symbol.size);
      assert.equal(range!.start, Math.min(...starts), binary);
      assert.ok(range!.end >= Math.max(...ends), binary);
      using elf = ElfFile.open(binary);
      const text = elf.section(".text")!;
      assert.ok(range!.start >= text.addr && range!.end <= text.addr + text.size, binary);
      assert.equal(data.facts.tlsGOffset, -8);

      data.attach(ebpf, 4242 as Pid);
      const record = ebpf.procDataOf("go", 4242 as Pid);
      assert.ok(record !== undefined);
      const view = new DataView(record.buffer, record.byteOffset, record.byteLength);
      const L = goProcInfoLayout;
      assert.equal(view.getBigInt64(L.tls_g_offset.offset, true), -8n);
      assert.equal(view.getUint16(L.g_labels.offset, true), data.facts.offsets.gLabels);
      assert.equal(
        view.getUint8(L.layout.offset),
        data.facts.version.minor >= 24 ? GoLabelLayout.Slice : GoLabelLayout.Map,
      );
    }
  },
}));

Deno.test("goLoader() passes over a file that is not Go, declaring nothing", () => {
  const ebpf = new MemoryEbpfHandler();
  assert.equal(load("/bin/true", ebpf), null);
  assert.equal(ebpf.interpreterOffsets.size, 0);
});

Deno.test(requiring([programs("go", "gcc")], {
  name: "goLoader() passes over a Go shared library, whose g lies where only the dynamic loader knows",
  async fn() {
    const library = await buildGoWorkload("cgo_chain", { buildmode: "c-shared" }, "-c-shared.so");
    {
      using elf = ElfFile.open(library);
      assert.ok(hasGoBuildInfo(elf) && readGoBuildVersion(elf) !== null, "a Go file all the same");
    }
    const ebpf = new MemoryEbpfHandler();
    assert.equal(load(library, ebpf), null);
    assert.equal(ebpf.interpreterOffsets.size, 0);
  },
}));

Deno.test(requiring([programs("go")], {
  name: "goLoader() claims a position-independent Go executable",
  async fn() {
    const binary = await buildGoWorkload("labels", { ldflags: "-s -w", buildmode: "pie" }, "-pie-stripped");
    const ebpf = new MemoryEbpfHandler();
    assert.ok(load(binary, ebpf) !== null);
    assert.equal(ebpf.interpreterOffsets.get(binary as FileId)?.program, GoUnwindProgram.Labels);
  },
}));
