import assert from "node:assert/strict";
import { GoLabelLayout } from "../../../support/types.ts";
import { ElfFile } from "../../elf/elf_file.ts";
import { programs, requiring } from "../../testing/requirements.ts";
import { buildGoWorkload } from "../../../tests/helpers.ts";
import { readGoBuildVersion } from "./build_info.ts";
import { goLabelOffsets, MAX_GO_MINOR, MIN_GO_MINOR } from "./offsets.ts";

const release = (minor: number) => ({ major: 1, minor, text: `go1.${minor}` });

Deno.test("goLabelOffsets() knows every release from MIN_GO_MINOR to MAX_GO_MINOR, and no other", () => {
  for (let minor = MIN_GO_MINOR; minor <= MAX_GO_MINOR; minor++) {
    const offsets = goLabelOffsets(release(minor));
    assert.ok(offsets !== null, `go1.${minor}`);
    // g.labels lies past g.m and within the g of every release (under 512 bytes).
    assert.ok(offsets.gLabels > offsets.gM && offsets.gLabels < 512, `go1.${minor}`);
  }
  assert.equal(goLabelOffsets(release(MIN_GO_MINOR - 1)), null);
  assert.equal(goLabelOffsets(release(MAX_GO_MINOR + 1)), null);
  assert.equal(goLabelOffsets({ major: 2, minor: 19, text: "go2.19" }), null);
});

Deno.test("goLabelOffsets() gives go1.24 the slice of labels, earlier releases the map", () => {
  assert.equal(goLabelOffsets(release(23))?.layout, GoLabelLayout.Map);
  assert.equal(goLabelOffsets(release(24))?.layout, GoLabelLayout.Slice);
  assert.deepEqual(goLabelOffsets(release(19)), {
    gM: 48,
    mCurg: 192,
    gLabels: 360,
    layout: GoLabelLayout.Map,
  });
  assert.deepEqual(goLabelOffsets(release(24)), {
    gM: 48,
    mCurg: 192,
    gLabels: 352,
    layout: GoLabelLayout.Slice,
  });
});

/**
 * The byte offset of each member of struct `name` in the DWARF of `binary`, as binutils' readelf prints
 * the debug information.
 */
function dwarfMembers(binary: string, name: string): Map<string, number> {
  const result = new Deno.Command("readelf", { args: ["--debug-dump=info", binary], stderr: "null" })
    .outputSync();
  assert.ok(result.success, `readelf --debug-dump=info ${binary}`);
  const lines = new TextDecoder().decode(result.stdout).split("\n");
  const start = lines.findIndex((line, i) =>
    /DW_TAG_structure_type/.test(lines[i - 1] ?? "") && line.trim().endsWith(`DW_AT_name        : ${name}`)
  );
  assert.ok(start > 0, `no struct ${name} in the DWARF of ${binary}`);
  const members = new Map<string, number>();
  let member: string | null = null;
  for (const line of lines.slice(start + 1)) {
    if (/DW_TAG_structure_type/.test(line)) break;
    const named = /DW_AT_name\s*: (\S+)$/.exec(line);
    if (named) member = named[1]!;
    const location = /DW_AT_data_member_location\s*: (\d+)$/.exec(line);
    if (location && member !== null) members.set(member, Number(location[1]));
  }
  return members;
}

Deno.test(requiring([programs("go", "readelf")], {
  name: "goLabelOffsets() of the installed Go is where its DWARF puts g.m, m.curg and g.labels",
  async fn() {
    const binary = await buildGoWorkload("labels", {}, "-symbols");
    using elf = ElfFile.open(binary);
    const version = readGoBuildVersion(elf);
    assert.ok(version !== null);
    const offsets = goLabelOffsets(version);
    assert.ok(offsets !== null, `${version.text} has no offsets`);
    const g = dwarfMembers(binary, "runtime.g");
    const m = dwarfMembers(binary, "runtime.m");
    assert.deepEqual(
      [offsets.gM, offsets.mCurg, offsets.gLabels],
      [g.get("m"), m.get("curg"), g.get("labels")],
      version.text,
    );
  },
}));
