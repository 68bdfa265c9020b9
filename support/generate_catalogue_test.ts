import assert from "node:assert/strict";
import { BpfObject } from "../lib/bpf/object.ts";
import { bpfObjectBytes } from "./embedded/bpf_object.ts";
import {
  BPF_MAPS,
  BPF_PROGRAMS,
  type BpfMapName,
  type BpfProgramName,
  isBpfMapName,
} from "./bpf_catalogue.ts";
import { generateCatalogue } from "./generate_catalogue.ts";

const mapNames = Object.keys(BPF_MAPS) as BpfMapName[];
const programNames = Object.keys(BPF_PROGRAMS) as BpfProgramName[];

/** libbpf names a data section's map after the object: `55922965.rodata` is the map of `.rodata`. */
function sectionOfDataMap(libbpfName: string): string {
  return libbpfName.replace(/^[^.]+(?=\.)/, "");
}

Deno.test("generateCatalogue() of the built object is the committed support/bpf_catalogue.ts", () => {
  const committed = Deno.readTextFileSync(new URL("./bpf_catalogue.ts", import.meta.url));
  assert.equal(generateCatalogue(bpfObjectBytes), committed, "run `deno task build` and commit the result");
});

Deno.test("BPF_MAPS names every map libbpf finds in the object, with the sizes libbpf reads", () => {
  using object = BpfObject.open(bpfObjectBytes, "omniprof.bpf.o");
  const found = object.mapNames().map(sectionOfDataMap);
  assert.ok(found.length > 30, `libbpf found ${found.length} maps`);
  assert.deepEqual([...found].sort(), [...mapNames].sort());
  for (const name of mapNames) {
    const map = object.map(name);
    const expected = BPF_MAPS[name];
    assert.deepEqual(
      { type: map.type, keySize: map.keySize, valueSize: map.valueSize, maxEntries: map.maxEntries },
      {
        type: expected.type,
        keySize: expected.keySize,
        valueSize: expected.valueSize,
        maxEntries: expected.maxEntries,
      },
      name,
    );
    const inner = map.innerMap();
    if ("inner" in expected) {
      assert.ok(inner, `${name}: libbpf knows no inner map`);
      assert.deepEqual(
        {
          type: inner.type,
          keySize: inner.keySize,
          valueSize: inner.valueSize,
          maxEntries: inner.maxEntries,
          flags: inner.flags,
        },
        expected.inner,
        `${name}'s inner map`,
      );
    } else {
      assert.equal(inner, null, `${name}: libbpf has an inner map the catalogue lacks`);
    }
  }
});

Deno.test("BPF_PROGRAMS names every program libbpf finds in the object, with its section and type", () => {
  using object = BpfObject.open(bpfObjectBytes, "omniprof.bpf.o");
  const found = object.programNames();
  assert.ok(found.length >= 5, `libbpf found ${found.length} programs`);
  assert.deepEqual([...found].sort(), [...programNames].sort());
  for (const name of programNames) {
    const program = object.program(name);
    assert.deepEqual({ section: program.sectionName, type: program.type }, BPF_PROGRAMS[name], name);
  }
});

Deno.test("isBpfMapName() is true for the catalogue's maps only", () => {
  for (const name of mapNames) assert.equal(isBpfMapName(name), true, name);
  for (const name of ["", "pid_filte", "php_procs", "exe_id_to_7_stack_deltas", "toString", "__proto__"]) {
    assert.equal(isBpfMapName(name), false, name);
  }
});
