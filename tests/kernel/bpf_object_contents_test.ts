import assert from "node:assert/strict";
import { bpfObjectContents } from "./bpf_object_contents.ts";

const objectPath = new URL("../../.build/omniprof.bpf.o", import.meta.url).pathname;

/** Global symbols of a section kind as readelf lists them, for comparison. */
async function readelfSymbols(path: string): Promise<{ name: string; type: string; section: string }[]> {
  const sections = new Map<string, string>();
  const headers = new TextDecoder().decode(
    (await new Deno.Command("readelf", { args: ["-SW", path], stdout: "piped" }).output()).stdout,
  );
  for (const line of headers.split("\n")) {
    const match = line.match(/^\s*\[\s*(\d+)\]\s+(\S+)/);
    if (match) sections.set(match[1]!, match[2]!);
  }
  const symbols = new TextDecoder().decode(
    (await new Deno.Command("readelf", { args: ["-sW", path], stdout: "piped" }).output()).stdout,
  );
  return symbols.split("\n").map((line) => line.trim().split(/\s+/))
    .filter((fields) => fields.length >= 8 && fields[4] === "GLOBAL")
    .map((fields) => ({
      name: fields[7]!,
      type: fields[3]!,
      section: sections.get(fields[6]!) ?? fields[6]!,
    }));
}

Deno.test("bpfObjectContents() lists the programs and maps readelf shows in the built object", async () => {
  const bytes = Deno.readFileSync(objectPath);
  const contents = bpfObjectContents(bytes);
  const symbols = await readelfSymbols(objectPath);
  const expectedPrograms = symbols.filter((s) => s.type === "FUNC" && s.section !== ".text")
    .map((s) => ({ name: s.name, section: s.section }));
  assert.deepEqual(contents.programs, expectedPrograms);
  assert.deepEqual(contents.maps, symbols.filter((s) => s.section === ".maps").map((s) => s.name));
  assert.ok(contents.programs.some((p) => p.name === "sample_cpu" && p.section === "perf_event"));
  assert.ok(contents.maps.includes("events"));
});

Deno.test("bpfObjectContents() refuses an ELF that is not BPF", () => {
  assert.throws(() => bpfObjectContents(Deno.readFileSync("/bin/true")), /machine 62 is not BPF/);
});
