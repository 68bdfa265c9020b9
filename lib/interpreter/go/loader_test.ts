import assert from "node:assert/strict";
import type { FileId, Pid } from "../../types.ts";
import { GoLabelLayout, goProcInfoLayout, UnwindProgram } from "../../../support/types.ts";
import { LoaderInfo } from "../interpreter.ts";
import { MemoryEbpfHandler } from "../memory_ebpf_handler.ts";
import { programs, requiring } from "../../testing/requirements.ts";
import { buildGoWorkload } from "../../../tests/helpers.ts";
import { ElfFile } from "../../elf/elf_file.ts";
import { hasGoBuildInfo, readGoBuildVersion } from "./build_info.ts";
import { goLoader } from "./loader.ts";
import type { GoData } from "./data.ts";

/** runtime.goexit's address and size in `binary`'s symbol table, as `go tool nm -size` lists it. */
function goexitSymbol(binary: string): { address: number; size: number } {
  const result = new Deno.Command("go", {
    args: ["tool", "nm", "-size", binary],
    env: { GOTOOLCHAIN: "local" },
  })
    .outputSync();
  assert.ok(result.success, new TextDecoder().decode(result.stderr));
  const line = new TextDecoder().decode(result.stdout).split("\n")
    .find((line) => / T runtime\.goexit(\.abi0)?$/.test(line));
  assert.ok(line !== undefined, `no runtime.goexit in ${binary}`);
  const [address, size] = line.trim().split(/\s+/);
  return { address: parseInt(address!, 16), size: Number(size) };
}

function load(binary: string, ebpf: MemoryEbpfHandler): GoData | null {
  using info = new LoaderInfo({ fileId: binary as FileId, fileName: binary });
  return goLoader(ebpf, info) as GoData | null;
}

Deno.test(requiring([programs("go")], {
  name: "goLoader() claims a stripped Go binary and declares runtime.goexit as the label reader's place",
  async fn() {
    const withSymbols = await buildGoWorkload("labels", {}, "-symbols");
    const stripped = await buildGoWorkload("labels", { ldflags: "-s -w" }, "-stripped");
    const symbol = goexitSymbol(withSymbols);
    for (const binary of [withSymbols, stripped]) {
      const ebpf = new MemoryEbpfHandler();
      const data = load(binary, ebpf);
      assert.ok(data !== null, binary);
      const declared = ebpf.interpreterOffsets.get(binary as FileId);
      assert.equal(declared?.program, UnwindProgram.GoLabels);
      assert.equal(declared.ranges.length, 1);
      const [range] = declared.ranges;
      // .gopclntab ends a function where the next begins, past the padding the symbol's size leaves out.
      assert.equal(range!.start, symbol.address, binary);
      assert.ok(range!.end >= symbol.address + symbol.size && range!.end < symbol.address + 64, binary);
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
    assert.equal(ebpf.interpreterOffsets.get(binary as FileId)?.program, UnwindProgram.GoLabels);
  },
}));
