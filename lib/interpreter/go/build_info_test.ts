import assert from "node:assert/strict";
import { ElfFile } from "../../elf/elf_file.ts";
import { programs, requiring } from "../../testing/requirements.ts";
import { buildGoWorkload } from "../../../tests/helpers.ts";
import { hasGoBuildInfo, parseGoVersion, readGoBuildVersion } from "./build_info.ts";

Deno.test("parseGoVersion() reads releases, candidates and development builds", () => {
  assert.deepEqual(parseGoVersion("go1.19.8"), { major: 1, minor: 19, text: "go1.19.8" });
  assert.deepEqual(parseGoVersion("go1.24rc1"), { major: 1, minor: 24, text: "go1.24rc1" });
  assert.equal(parseGoVersion("devel go1.25-abcdef Tue Jan 1")?.minor, 25);
  assert.equal(parseGoVersion("gogo"), null);
  assert.equal(parseGoVersion(""), null);
});

/** What `go version FILE` says `file` was built with ("FILE: go1.19.8"). */
function goVersionOf(file: string): string {
  const result = new Deno.Command("go", { args: ["version", file], env: { GOTOOLCHAIN: "local" } })
    .outputSync();
  assert.ok(result.success, new TextDecoder().decode(result.stderr));
  return new TextDecoder().decode(result.stdout).trim().split(": ").at(-1)!;
}

Deno.test(requiring([programs("go")], {
  name: "readGoBuildVersion() of a stripped Go binary is what go version FILE reads",
  async fn() {
    const binary = await buildGoWorkload("labels", { ldflags: "-s -w" }, "-stripped");
    using elf = ElfFile.open(binary);
    assert.ok(hasGoBuildInfo(elf));
    const version = readGoBuildVersion(elf);
    assert.equal(version?.text, goVersionOf(binary));
    assert.equal(version?.major, 1);
  },
}));

Deno.test("readGoBuildVersion() of a file that is not Go is null", () => {
  using elf = ElfFile.open("/bin/true");
  assert.equal(hasGoBuildInfo(elf), false);
  assert.equal(readGoBuildVersion(elf), null);
});
