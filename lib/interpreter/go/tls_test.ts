import assert from "node:assert/strict";
import { ElfFile } from "../../elf/elf_file.ts";
import { programs, requiring } from "../../testing/requirements.ts";
import { buildGoWorkload } from "../../../tests/helpers.ts";
import { goTlsOffset } from "./tls.ts";

Deno.test(requiring([programs("go")], {
  name: "goTlsOffset() of a Go binary linked by Go is fs:-8, stripped or not",
  async fn() {
    for (const ldflags of ["-s -w", ""]) {
      const binary = await buildGoWorkload("labels", { ldflags }, ldflags === "" ? "-symbols" : "-stripped");
      using elf = ElfFile.open(binary);
      assert.equal(goTlsOffset(elf), -8, binary);
    }
  },
}));

Deno.test(requiring([programs("go", "gcc")], {
  name: "goTlsOffset() of a cgo binary is where runtime.tlsg lies in its TLS block, stripped or not",
  async fn() {
    for (const ldflags of ["-s -w", ""]) {
      const binary = await buildGoWorkload(
        "cgo_chain",
        { ldflags },
        ldflags === "" ? "-symbols" : "-stripped",
      );
      using elf = ElfFile.open(binary);
      // The C code has no thread-local variables: the block is runtime.tlsg's 8 bytes, ending at fs.
      const tls = elf.programHeaders.find((header) => header.type === 7);
      assert.equal(tls?.memsz, 8, binary);
      assert.equal(goTlsOffset(elf), -8, binary);
    }
  },
}));
