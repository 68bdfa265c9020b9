import assert from "node:assert/strict";
import { gzipSync } from "node:zlib";
import type { Profile } from "../profile/profile.ts";
import { encodePprof, encodePprofGzip } from "./pprof.ts";
import { decodePprof } from "./pprof_reader.ts";
import { ProtobufWriter } from "./protobuf_writer.ts";
import { deepPprof } from "../testing/deep_pprof.ts";

// Profiles "written by other tools" are built field by field here, the way those tools lay them out:
// inlined frames as several lines per location, unpacked repeated fields, no labels, 64-bit kernel
// addresses, fields in unusual order, strings repeated in the table.

/** Writes pprof messages field by field. */
class PprofBuilder {
  readonly w = new ProtobufWriter();
  readonly strings: string[] = [""];

  s(value: string): number {
    this.strings.push(value); // deliberately not deduplicated, as some writers do
    return this.strings.length - 1;
  }

  valueType(field: number, type: string, unit: string): this {
    const m = this.w.beginLengthDelimited(field);
    this.w.writeVarintField(1, this.s(type));
    this.w.writeVarintField(2, this.s(unit));
    this.w.endLengthDelimited(m);
    return this;
  }

  mapping(
    id: number,
    start: [number, number],
    limit: [number, number],
    fileName: string,
    buildId = "",
  ): this {
    const m = this.w.beginLengthDelimited(3);
    this.w.writeVarintField(1, id);
    this.w.writeTag(2, 0);
    this.w.writeVarint64(start[0], start[1]);
    this.w.writeTag(3, 0);
    this.w.writeVarint64(limit[0], limit[1]);
    this.w.writeVarintField(5, this.s(fileName));
    if (buildId !== "") this.w.writeVarintField(6, this.s(buildId));
    this.w.writeBoolField(7, true);
    this.w.endLengthDelimited(m);
    return this;
  }

  fn(id: number, name: string, file: string, nameField = 2): this {
    const m = this.w.beginLengthDelimited(5);
    this.w.writeVarintField(1, id);
    this.w.writeVarintField(nameField, this.s(name));
    this.w.writeVarintField(4, this.s(file));
    this.w.endLengthDelimited(m);
    return this;
  }

  /** A location; `lines` are [function id, line], innermost first. */
  location(id: number, mappingId: number, address: [number, number], lines: [number, number][]): this {
    const m = this.w.beginLengthDelimited(4);
    this.w.writeVarintField(1, id);
    if (mappingId !== 0) this.w.writeVarintField(2, mappingId);
    this.w.writeTag(3, 0);
    this.w.writeVarint64(address[0], address[1]);
    for (const [fn, line] of lines) {
      const l = this.w.beginLengthDelimited(4);
      this.w.writeVarintField(1, fn);
      this.w.writeInt64Field(2, line);
      this.w.endLengthDelimited(l);
    }
    this.w.endLengthDelimited(m);
    return this;
  }

  /** A sample; `labels` are [key, string value or number]. */
  sample(ids: number[], values: number[], labels: [string, string | number][] = [], packed = false): this {
    const m = this.w.beginLengthDelimited(2);
    if (packed) this.w.writePackedVarints(1, ids);
    else for (const id of ids) this.w.writeVarintField(1, id);
    for (const value of values) this.w.writeInt64Field(2, value);
    for (const [key, value] of labels) {
      const l = this.w.beginLengthDelimited(3);
      this.w.writeVarintField(1, this.s(key));
      if (typeof value === "string") this.w.writeVarintField(2, this.s(value));
      else this.w.writeInt64Field(3, value);
      this.w.endLengthDelimited(l);
    }
    this.w.endLengthDelimited(m);
    return this;
  }

  finish(): Uint8Array {
    for (const value of this.strings) this.w.writeStringField(6, value);
    return this.w.finish();
  }
}

Deno.test("decodePprof() expands inlined frames of a Go-style profile and defaults missing labels", () => {
  const b = new PprofBuilder();
  b.valueType(1, "samples", "count").valueType(1, "cpu", "nanoseconds");
  // Samples before the locations they use, unpacked and packed.
  b.sample([1, 2], [5, 50_000_000]).sample([2], [3, 30_000_000], [], true);
  b.location(1, 1, [0x401000, 0], [[2, 50], [1, 10]]).location(2, 1, [0x402000, 0], [[3, 20]]);
  b.fn(1, "main.work", "main.go").fn(2, "runtime.inlined", "runtime.go").fn(3, "main.main", "main.go");
  b.mapping(1, [0x400000, 0], [0x800000, 0], "/usr/bin/server", "f00d");
  b.valueType(11, "cpu", "nanoseconds");
  b.w.writeInt64Field(12, 10_000_000);
  b.w.writeInt64Field(9, 1_600_000_000_000_000_000);
  b.w.writeInt64Field(10, 2_000_000_000);
  const profile = decodePprof(gzipSync(b.finish()));

  const expected: Profile = {
    startTimeNs: 1_600_000_000_000_000_000,
    durationNs: 2_000_000_000,
    periodNs: 10_000_000,
    mappings: [
      {
        start: 0x400000,
        end: 0x800000,
        fileOffset: 0,
        fileName: "/usr/bin/server",
        buildId: "f00d",
        hasFunctions: true,
      },
    ],
    locations: [
      {
        kind: "native",
        mapping: 0,
        address: 0x401000,
        functionName: "runtime.inlined",
        sourceFile: "runtime.go",
        line: 50,
        inlined: true,
      },
      {
        kind: "native",
        mapping: 0,
        address: 0x401000,
        functionName: "main.work",
        sourceFile: "main.go",
        line: 10,
      },
      {
        kind: "native",
        mapping: 0,
        address: 0x402000,
        functionName: "main.main",
        sourceFile: "main.go",
        line: 20,
      },
    ],
    samples: [
      { locations: [0, 1, 2], count: 5, pid: 0, tid: 0, comm: "" },
      { locations: [2], count: 3, pid: 0, tid: 0, comm: "" },
    ],
  };
  assert.deepEqual(profile, expected);
});

Deno.test("decodePprof() reads a perf-style profile: 64-bit kernel addresses, labels, unsymbolized frames", () => {
  const b = new PprofBuilder();
  b.valueType(1, "cycles_sample", "count").valueType(1, "cycles_event", "count");
  b.mapping(1, [0x81000000, 0xffffffff], [0x82000000, 0xffffffff], "[kernel.kallsyms]_text");
  b.mapping(2, [0x1000, 0x7f00], [0x9000, 0x7f00], "/usr/lib/libc.so.6", "93ac");
  b.fn(1, "do_syscall_64", "", 3); // only a system name
  b.location(1, 1, [0x81234567, 0xffffffff], [[1, 0]]);
  b.location(2, 2, [0x1234, 0x7f00], []);
  b.location(3, 0, [0x4321, 0], []);
  b.sample([1, 2, 3], [7, 7000], [["pid", 100], ["tid", 101], ["comm", "proc"], ["thread_comm", "worker-1"]]);
  b.sample([3], [2, 2000], [["pid", "200"], ["thread_name", "named"], ["cpu", 3]]);
  b.sample([3], [0, 0], [["pid", 300]]); // a zero count is no sample
  const profile = decodePprof(b.finish());

  assert.deepEqual(profile.mappings.map((m) => [m.fileName, m.start, m.end]), [
    ["[kernel.kallsyms]_text", 0x81000000, 0x82000000],
    ["/usr/lib/libc.so.6", 0x7f00_0000_1000, 0x7f00_0000_9000],
  ]);
  assert.deepEqual(profile.locations, [
    {
      kind: "kernel",
      mapping: 0,
      address: 0x81234567,
      functionName: "do_syscall_64",
      sourceFile: "",
      line: 0,
    },
    { kind: "native", mapping: 1, address: 0x7f00_0000_1234, functionName: "", sourceFile: "", line: 0 },
    { kind: "native", mapping: -1, address: 0x4321, functionName: "", sourceFile: "", line: 0 },
  ]);
  assert.deepEqual(profile.samples, [
    { locations: [0, 1, 2], count: 7, pid: 100, tid: 101, comm: "worker-1" },
    { locations: [2], count: 2, pid: 200, tid: 0, comm: "named" },
  ]);
  assert.equal(profile.periodNs, 0, "no period_type");
});

Deno.test("decodePprof() takes the samples/count value, else the first count, else the first value", () => {
  const cases: [string, [string, string][], number][] = [
    ["samples/count second", [["cpu", "nanoseconds"], ["samples", "count"]], 1],
    ["a count", [["alloc_space", "bytes"], ["alloc_objects", "count"]], 1],
    ["no count", [["alloc_space", "bytes"], ["inuse_space", "bytes"]], 0],
    ["no sample types", [], 0],
  ];
  for (const [name, types, index] of cases) {
    const b = new PprofBuilder();
    for (const [type, unit] of types) b.valueType(1, type, unit);
    b.location(1, 0, [0x10, 0], []);
    const values = [11, 22];
    b.sample([1], values);
    assert.equal(decodePprof(b.finish()).samples[0]!.count, values[index], name);
  }
});

Deno.test("decodePprof() keeps location ids above 2^53 apart", () => {
  const b = new PprofBuilder();
  b.fn(1, "a", "").fn(2, "b", "");
  // Ids 2^60 and 2^60 + 1 are the same double.
  const m = b.w.beginLengthDelimited(4);
  b.w.writeTag(1, 0);
  b.w.writeVarint64(0, 0x10000000);
  const l1 = b.w.beginLengthDelimited(4);
  b.w.writeVarintField(1, 1);
  b.w.endLengthDelimited(l1);
  b.w.endLengthDelimited(m);
  const m2 = b.w.beginLengthDelimited(4);
  b.w.writeTag(1, 0);
  b.w.writeVarint64(1, 0x10000000);
  const l2 = b.w.beginLengthDelimited(4);
  b.w.writeVarintField(1, 2);
  b.w.endLengthDelimited(l2);
  b.w.endLengthDelimited(m2);
  const s = b.w.beginLengthDelimited(2);
  b.w.writeTag(1, 0);
  b.w.writeVarint64(1, 0x10000000);
  b.w.writeTag(1, 0);
  b.w.writeVarint64(0, 0x10000000);
  b.w.writeInt64Field(2, 1);
  b.w.endLengthDelimited(s);
  const profile = decodePprof(b.finish());
  assert.deepEqual(profile.samples[0]!.locations.map((i) => profile.locations[i]!.functionName), ["b", "a"]);
});

Deno.test("decodePprof() rejects inconsistent profiles with RangeError", () => {
  const cases: [RegExp, () => Uint8Array][] = [
    [/sample 0 refers to a location id no location has/, () => new PprofBuilder().sample([9], [1]).finish()],
    [
      /two locations share an id/,
      () => new PprofBuilder().location(1, 0, [1, 0], []).location(1, 0, [2, 0], []).finish(),
    ],
    [
      /location 0 refers to a mapping id no mapping has/,
      () => new PprofBuilder().location(1, 4, [1, 0], []).finish(),
    ],
    [
      /location 0 refers to a function id no function has/,
      () => new PprofBuilder().location(1, 0, [1, 0], [[3, 1]]).finish(),
    ],
    [
      /sample 0 has 1 values, the profile has 2 sample types/,
      () =>
        new PprofBuilder().valueType(1, "a", "b").valueType(1, "samples", "count").location(1, 0, [1, 0], [])
          .sample([1], [1]).finish(),
    ],
    [/mapping 0 refers to string 99/, () => {
      const b = new PprofBuilder();
      const m = b.w.beginLengthDelimited(3);
      b.w.writeVarintField(1, 1);
      b.w.writeVarintField(5, 99);
      b.w.endLengthDelimited(m);
      return b.finish();
    }],
    [/field sample \(2\) .* has wire type 0, expected 2/, () => {
      const w = new ProtobufWriter();
      w.writeVarintField(2, 1);
      return w.finish();
    }],
    [/string_table\[0\] is not empty/, () => {
      const w = new ProtobufWriter();
      w.writeStringField(6, "x");
      return w.finish();
    }],
    [/location 0 has no id/, () => {
      const w = new ProtobufWriter();
      w.endLengthDelimited(w.beginLengthDelimited(4));
      return w.finish();
    }],
  ];
  for (const [expected, build] of cases) {
    assert.throws(() => decodePprof(build()), (e: unknown) => {
      assert.ok(e instanceof RangeError, String(expected));
      assert.match(e.message, /^Cannot decode pprof: /);
      assert.match(e.message, expected);
      return true;
    });
  }
});

/** Asserts that `fn` throws the reader's own error, its message matching `expected`. */
function assertDecodeError(fn: () => unknown, expected: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof RangeError, `${expected}: ${e}`);
    assert.match(e.message, /^Cannot decode pprof: /);
    assert.match(e.message, expected);
    return true;
  });
}

Deno.test("decodePprof() bounds frames per sample and in all, raw and after inline expansion", () => {
  // 1,000 frames of a location without lines: as many frames as references.
  const flat = new PprofBuilder().location(1, 0, [1, 0], []).sample(Array(1000).fill(1), [1], [], true)
    .finish();
  assert.equal(decodePprof(flat, { maxFramesPerSample: 1000 }).samples[0]!.locations.length, 1000);
  assertDecodeError(
    () => decodePprof(flat, { maxFramesPerSample: 999 }),
    /sample 0 has more than 999 frames/,
  );
  assertDecodeError(() => decodePprof(flat, { maxFrames: 999 }), /samples have more than 999 frames/);

  // A location of 1,000 inlined lines referred to 1,000 times: 1,000,000 frames from a few kilobytes.
  const b = new PprofBuilder().fn(1, "f", "");
  const lines: [number, number][] = Array.from({ length: 1000 }, (_, i) => [1, i]);
  b.location(1, 0, [1, 0], lines);
  b.sample(Array(1000).fill(1), [1], [], true);
  const inlined = b.finish();
  assertDecodeError(() => decodePprof(inlined), /sample 0 expands to more than 65536 frames/);
  assertDecodeError(
    () => decodePprof(inlined, { maxFrames: 100_000, maxFramesPerSample: 1_000_000 }),
    /samples expand to more than 100000 frames/,
  );
  const wide = decodePprof(inlined, { maxFramesPerSample: 1_000_000 });
  assert.equal(wide.samples[0]!.locations.length, 1_000_000);

  // Two samples of 600 frames: each within 1,000, together not within 1,100.
  const two = new PprofBuilder().location(1, 0, [1, 0], []).sample(Array(600).fill(1), [1], [], true)
    .sample(Array(600).fill(1), [1], [], true).finish();
  assert.equal(decodePprof(two, { maxFramesPerSample: 1000, maxFrames: 1200 }).samples.length, 2);
  assertDecodeError(
    () => decodePprof(two, { maxFramesPerSample: 1000, maxFrames: 1100 }),
    /samples have more than 1100 frames/,
  );
});

Deno.test("decodePprof() stops at the first frame past the bound, not after the whole sample", () => {
  // Sixty million frames once took 1.8 GB and ten seconds; with the bound it ends at frame 65,537.
  const bytes = deepPprof(60_000_000);
  const started = performance.now();
  assertDecodeError(() => decodePprof(bytes), /sample 0 has more than 65536 frames/);
  const ms = performance.now() - started;
  console.log(`60,000,000-frame sample refused in ${ms.toFixed(0)} ms`);
});

Deno.test("decodePprof() bounds samples, locations, functions, mappings, strings, labels and values", () => {
  const samples = new PprofBuilder().location(1, 0, [1, 0], []);
  for (let i = 0; i < 5; i++) samples.sample([1], [1]);
  const fiveSamples = samples.finish();
  assert.equal(decodePprof(fiveSamples, { maxSamples: 5 }).samples.length, 5);
  assertDecodeError(() => decodePprof(fiveSamples, { maxSamples: 4 }), /more than 4 samples/);

  // Three locations, the last with three inlined lines: five locations once expanded.
  const located = new PprofBuilder().fn(1, "f", "").location(1, 0, [1, 0], []).location(2, 0, [2, 0], [[
    1,
    1,
  ]])
    .location(3, 0, [3, 0], [[1, 1], [1, 2], [1, 3]]).finish();
  assert.equal(decodePprof(located, { maxLocations: 5 }).locations.length, 5);
  assertDecodeError(() => decodePprof(located, { maxLocations: 4 }), /more than 4 locations/);

  // References to ids no message declares are refused as soon as they outnumber the bound.
  const dangling = new PprofBuilder().sample([1, 2, 3, 4, 5, 6], [1]).finish();
  assertDecodeError(() => decodePprof(dangling, { maxLocations: 5 }), /more than 5 distinct location ids/);
  assertDecodeError(() => decodePprof(dangling), /sample 0 refers to a location id no location has/);

  const functions = new PprofBuilder().fn(1, "a", "").fn(2, "b", "").fn(3, "c", "").finish();
  assert.doesNotThrow(() => decodePprof(functions, { maxFunctions: 3 }));
  assertDecodeError(() => decodePprof(functions, { maxFunctions: 2 }), /more than 2 functions/);

  const mappings = new PprofBuilder().mapping(1, [0x1000, 0], [0x2000, 0], "/a")
    .mapping(2, [0x3000, 0], [0x4000, 0], "/b").finish();
  assert.equal(decodePprof(mappings, { maxMappings: 2 }).mappings.length, 2);
  assertDecodeError(() => decodePprof(mappings, { maxMappings: 1 }), /more than 1 mappings/);

  // The builder's table: "", then each function's name and (empty) file name, not deduplicated.
  assert.doesNotThrow(() => decodePprof(functions, { maxStrings: 7 }));
  assertDecodeError(() => decodePprof(functions, { maxStrings: 6 }), /more than 6 strings/);
  const longName = new PprofBuilder().fn(1, "x".repeat(100), "").finish();
  assert.doesNotThrow(() => decodePprof(longName, { maxStringBytes: 100 }));
  assertDecodeError(
    () => decodePprof(longName, { maxStringBytes: 99 }),
    /string of 100 bytes .* more than 99/,
  );

  const labelled = new PprofBuilder().location(1, 0, [1, 0], []).sample([1], [1], [["pid", 1], ["tid", 2]])
    .sample([1], [1], [["pid", 3]]).finish();
  assert.doesNotThrow(() => decodePprof(labelled, { maxLabels: 3 }));
  assertDecodeError(() => decodePprof(labelled, { maxLabels: 2 }), /more than 2 labels/);

  const typed = new PprofBuilder().valueType(1, "samples", "count").valueType(1, "cpu", "nanoseconds")
    .location(1, 0, [1, 0], []).sample([1], [1, 10]).finish();
  assert.doesNotThrow(() => decodePprof(typed, { maxSampleTypes: 2 }));
  assertDecodeError(() => decodePprof(typed, { maxSampleTypes: 1 }), /more than 1 sample types/);
  const manyValues = new PprofBuilder().location(1, 0, [1, 0], []).sample([1], [1, 2, 3]).finish();
  assertDecodeError(
    () => decodePprof(manyValues, { maxSampleTypes: 2 }),
    /sample 0 has more than 2 values \(one per sample type\)/,
  );
});

Deno.test("decodePprof() bounds the message size, compressed or not, and refuses corrupt gzip", () => {
  const bytes = new PprofBuilder().fn(1, "f", "").finish();
  assert.doesNotThrow(() => decodePprof(bytes, { maxBytes: bytes.length }));
  assertDecodeError(
    () => decodePprof(bytes, { maxBytes: bytes.length - 1 }),
    new RegExp(`${bytes.length} bytes, more than ${bytes.length - 1}`),
  );
  const bomb = gzipSync(new Uint8Array(4 << 20));
  assertDecodeError(
    () => decodePprof(bomb, { maxBytes: 1 << 20 }),
    /decompresses to more than 1048576 bytes/,
  );
  assertDecodeError(() => decodePprof(gzipSync(bytes).slice(0, 20)), /corrupt gzip data/);
});

/** A deterministic pseudo-random generator (xorshift32), so failures reproduce. */
function random(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 4294967296;
  };
}

function fuzzProfile(): Profile {
  const rand = random(99);
  const kinds = ["native", "kernel", "python", "v8"] as const;
  const locations: Profile["locations"] = [];
  for (let i = 0; i < 60; i++) {
    const kind = kinds[i % kinds.length]!;
    locations.push({
      kind,
      mapping: kind === "native" ? i % 3 : -1,
      address: kind === "kernel" ? 0x81000000 + i * 64 : 0x400000 + i * 16,
      functionName: i % 11 === 0 ? "" : `function_${i}`,
      sourceFile: i % 2 ? `file${i % 5}.c` : "",
      line: i % 4 === 0 ? 0 : i * 3,
    });
  }
  const samples: Profile["samples"] = [];
  for (let s = 0; s < 80; s++) {
    const stack = Array.from({ length: 1 + Math.floor(rand() * 12) }, () => Math.floor(rand() * 60));
    samples.push({
      locations: stack,
      count: 1 + Math.floor(rand() * 9),
      pid: s,
      tid: s + 1,
      comm: `c${s % 4}`,
    });
  }
  return {
    startTimeNs: 1_700_000_000_000_000_000,
    durationNs: 1e9,
    periodNs: 1e7,
    mappings: [0, 1, 2].map((m) => ({
      start: 0x400000 * (m + 1),
      end: 0x400000 * (m + 2),
      fileOffset: 0,
      fileName: `/lib/l${m}.so`,
      buildId: `b${m}`,
      hasFunctions: true,
    })),
    locations,
    samples,
  };
}

/** Checks that `profile` is internally consistent: every index refers to an existing entry. */
function assertConsistent(profile: Profile): void {
  for (const location of profile.locations) {
    assert.ok(location.mapping >= -1 && location.mapping < profile.mappings.length);
  }
  for (const sample of profile.samples) {
    assert.ok(sample.count > 0);
    for (const index of sample.locations) assert.ok(index >= 0 && index < profile.locations.length);
  }
}

Deno.test("decodePprof() turns truncated and bit-flipped input into a Profile or a RangeError", async () => {
  const profile = fuzzProfile();
  const inputs = [encodePprof(profile), await encodePprofGzip(profile)];
  const rand = random(4242);
  let decoded = 0;
  let rejected = 0;
  const started = performance.now();
  for (let round = 0; round < 6000; round++) {
    const original = inputs[round % 2]!;
    let mutated: Uint8Array;
    const choice = Math.floor(rand() * 3);
    if (choice === 0) {
      mutated = original.slice(0, Math.floor(rand() * original.length));
    } else {
      mutated = original.slice();
      const flips = 1 + Math.floor(rand() * 4);
      for (let f = 0; f < flips; f++) {
        const at = Math.floor(rand() * mutated.length);
        if (choice === 1) mutated[at] = mutated[at]! ^ (1 << Math.floor(rand() * 8));
        else mutated[at] = Math.floor(rand() * 256);
      }
    }
    try {
      assertConsistent(decodePprof(mutated));
      decoded++;
    } catch (e) {
      if (!(e instanceof RangeError)) throw new Error(`round ${round}: ${e}`, { cause: e });
      assert.match(e.message, /^Cannot decode pprof: /);
      rejected++;
    }
  }
  const ms = performance.now() - started;
  console.log(`fuzz: ${decoded} decoded, ${rejected} rejected in ${ms.toFixed(0)} ms`);
  assert.ok(decoded > 0 && rejected > 0, "mutations exercise both outcomes");
});

Deno.test("decodePprof() reads off_cpu/nanoseconds as off-CPU time, never as a count", () => {
  const b = new PprofBuilder();
  b.valueType(1, "samples", "count").valueType(1, "cpu", "nanoseconds").valueType(
    1,
    "off_cpu",
    "nanoseconds",
  );
  b.location(1, 0, [0x10, 0], []);
  b.sample([1], [2, 20, 0], [["tid", 5]]);
  b.sample([1], [0, 0, 700], [["tid", 6]]);
  b.sample([1], [1, 10, 300], [["tid", 7], ["worker", "w"]]); // both: one sample of each kind
  b.sample([1], [0, 0, 0], [["tid", 8]]); // neither: dropped
  const profile = decodePprof(b.finish());
  assert.equal(profile.offCpu, true);
  assert.deepEqual(profile.samples.map((s) => [s.tid, s.count, s.offCpuNs, s.labels?.[0]?.value]), [
    [5, 2, undefined, undefined],
    [6, 0, 700, undefined],
    [7, 1, undefined, "w"],
    [7, 0, 300, "w"],
  ]);

  // A file of off-CPU time alone (another tool's) has off-CPU samples only.
  const alone = new PprofBuilder();
  alone.valueType(1, "off_cpu", "nanoseconds");
  alone.location(1, 0, [0x10, 0], []);
  alone.sample([1], [900]);
  const offOnly = decodePprof(alone.finish());
  assert.equal(offOnly.offCpu, true);
  assert.deepEqual(offOnly.samples.map((s) => [s.count, s.offCpuNs]), [[0, 900]]);

  // A sample without the off-CPU value of its profile is malformed.
  const short = new PprofBuilder();
  short.valueType(1, "samples", "count").valueType(1, "off_cpu", "nanoseconds");
  short.location(1, 0, [0x10, 0], []);
  short.sample([1], [4]);
  assert.throws(() => decodePprof(short.finish()), /sample 0 has 1 values, the profile has 2 sample types/);
});

Deno.test("decodePprof() reads events/count as a profile of events, named by comments and `event` labels", () => {
  const b = new PprofBuilder();
  b.valueType(1, "events", "count").valueType(11, "events", "count");
  b.location(1, 0, [0x10, 0], []);
  b.sample([1], [3], [["tid", 5], ["event", "kprobe:b"]]);
  b.sample([1], [2], [["tid", 6], ["event", "kprobe:c"], ["worker", "w"]]); // not in the comments: added
  b.sample([1], [4], [["tid", 7]]); // no event label: no event
  b.sample([1], [0], [["tid", 8], ["event", "kprobe:d"]]); // no hits: dropped, and its event not added
  b.w.writeInt64Field(13, b.s("event=kprobe:a"));
  b.w.writeInt64Field(13, b.s("recorded on host x")); // another comment: ignored
  b.w.writeInt64Field(13, b.s("event=kprobe:b"));
  const profile = decodePprof(b.finish());
  assert.deepEqual(profile.events, ["kprobe:a", "kprobe:b", "kprobe:c"]);
  assert.equal(profile.periodNs, 0);
  assert.equal("offCpu" in profile, false);
  assert.deepEqual(profile.samples.map((s) => [s.tid, s.count, s.event, s.labels]), [
    [5, 3, 1, undefined],
    [6, 2, 2, [{ key: "worker", value: "w" }]],
    [7, 4, undefined, undefined],
  ]);
});

Deno.test("decodePprof() keeps `event` a label of its own in a file that is not of events", () => {
  const b = new PprofBuilder();
  b.valueType(1, "samples", "count");
  b.location(1, 0, [0x10, 0], []);
  b.sample([1], [3], [["event", "GC"]]);
  b.w.writeInt64Field(13, b.s("event=kprobe:a"));
  const profile = decodePprof(b.finish());
  assert.equal("events" in profile, false);
  assert.deepEqual(profile.samples[0]?.labels, [{ key: "event", value: "GC" }]);
  assert.equal(profile.samples[0]?.event, undefined);
});
