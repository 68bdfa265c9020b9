/**
 * Checks omniprof's pprof output against the published `profile.proto`, decoded by protobufjs: a decoder
 * that shares no code with ours. The schema is read at run time from tests/proto/pprof/profile.proto.
 */

import assert from "node:assert/strict";
import type { Profile } from "../lib/profile/profile.ts";
import { encodePprofGzip, KIND_MAPPING_NAMES } from "../lib/output/pprof.ts";
import { decodePprofBySchema } from "./pprof_schema.ts";

function testProfile(): Profile {
  return {
    startTimeNs: 1_700_000_000_123_456_768,
    durationNs: 10_000_000_000,
    periodNs: 10_101_010,
    mappings: [
      {
        start: 0x5555_5555_0000,
        end: 0x5555_5556_0000,
        fileOffset: 0x1000,
        fileName: "/usr/bin/app",
        buildId: "4c2bd1d2a7ecf1b7b5e53a8ff3cf8b0b1a2c3d4e",
        hasFunctions: true,
      },
      {
        start: 0x7f12_3400_0000,
        end: 0x7f12_3418_0000,
        fileOffset: 0x26000,
        fileName: "/usr/lib/x86_64-linux-gnu/libc.so.6",
        buildId: "93ac61ec5a8eb1396f9fbd350e3169a558528a40",
        hasFunctions: false,
      },
      {
        start: 0x81000000,
        end: 0x83000000,
        fileOffset: 0,
        fileName: "[kernel.kallsyms]",
        buildId: "",
        hasFunctions: true,
      },
    ],
    locations: [
      { kind: "native", mapping: 0, address: 0x1140, functionName: "main", sourceFile: "app.c", line: 12 },
      { kind: "native", mapping: 0, address: 0x1180, functionName: "work", sourceFile: "app.c", line: 30 },
      { kind: "native", mapping: 0, address: 0x1190, functionName: "work", sourceFile: "app.c", line: 31 },
      { kind: "native", mapping: 1, address: 0x9a2b0, functionName: "", sourceFile: "", line: 0 },
      {
        kind: "native",
        mapping: 1,
        address: 0x11d00,
        functionName: "[libc.so.6+0x11d00]",
        sourceFile: "",
        line: 0,
      },
      {
        kind: "kernel",
        mapping: 2,
        address: 0x81c0a0b0,
        functionName: "do_syscall_64",
        sourceFile: "",
        line: 0,
      },
      {
        kind: "kernel",
        mapping: -1,
        address: 0xc0451234,
        functionName: "nf_hook_slow",
        sourceFile: "",
        line: 0,
      },
      {
        kind: "python",
        mapping: -1,
        address: 7,
        functionName: "handler",
        sourceFile: "/srv/app.py",
        line: 88,
      },
      {
        kind: "native",
        mapping: -1,
        address: 0x7ffd_0000_1000,
        functionName: "__vdso_clock_gettime",
        sourceFile: "",
        line: 0,
      },
    ],
    samples: [
      { locations: [5, 4, 1, 0], count: 7, pid: 4242, tid: 4243, comm: "app-worker" },
      { locations: [2, 0], count: 3, pid: 4242, tid: 4242, comm: "app" },
      { locations: [6, 3, 7, 8], count: 1, pid: 0, tid: 0, comm: "" },
      { locations: [1, 1, 0], count: 2 ** 33, pid: 4242, tid: 4242, comm: "app" },
    ],
  };
}

Deno.test({
  name: "encodePprofGzip() output decodes with protobufjs from the published schema, every field as written",
  async fn() {
    const profile = testProfile();
    const pb = decodePprofBySchema(await encodePprofGzip(profile));

    // String table: "" first, every string once.
    const strings = pb.stringTable;
    assert.equal(strings[0], "");
    assert.equal(new Set(strings).size, strings.length, "strings are deduplicated");
    const s = (index: string): string => {
      const value = strings[Number(index)];
      assert.ok(value !== undefined, `string index ${index} in range`);
      return value;
    };

    // Sample types, period and times.
    assert.deepEqual(pb.sampleType.map((t) => [s(t.type), s(t.unit)]), [["samples", "count"], [
      "cpu",
      "nanoseconds",
    ]]);
    assert.deepEqual([s(pb.periodType.type), s(pb.periodType.unit)], ["cpu", "nanoseconds"]);
    assert.equal(pb.period, String(profile.periodNs));
    assert.equal(pb.timeNanos, BigInt(profile.startTimeNs).toString());
    assert.equal(pb.durationNanos, String(profile.durationNs));

    // Mappings: the profile's first, ids from 1, then one pseudo mapping per kind without a mapping.
    const high = (value: number, kernel: boolean): string =>
      (kernel && value > 0 ? (0xffffffffn << 32n) | BigInt(value) : BigInt(value)).toString();
    assert.deepEqual(pb.mapping.map((m) => m.id), pb.mapping.map((_, i) => String(i + 1)));
    profile.mappings.forEach((m, i) => {
      const got = pb.mapping[i]!;
      const kernel = m.fileName === "[kernel.kallsyms]";
      assert.equal(got.memoryStart, high(m.start, kernel), `mapping ${i} start`);
      assert.equal(got.memoryLimit, high(m.end, kernel), `mapping ${i} limit`);
      assert.equal(got.fileOffset, String(m.fileOffset));
      assert.equal(s(got.filename), m.fileName);
      assert.equal(s(got.buildId), m.buildId);
      assert.equal(got.hasFunctions, m.hasFunctions);
    });
    const pseudo = pb.mapping.slice(profile.mappings.length);
    assert.deepEqual(
      pseudo.map((m) => s(m.filename)).sort(),
      [KIND_MAPPING_NAMES.kernel, KIND_MAPPING_NAMES.python].sort(),
    );
    for (const m of pseudo) {
      assert.deepEqual([m.memoryStart, m.memoryLimit, m.fileOffset, s(m.buildId)], ["0", "0", "0", ""]);
      assert.equal(m.hasFunctions, true);
    }
    const mappingById = new Map(pb.mapping.map((m) => [m.id, m]));

    // Functions: ids from 1, one per (name, file), system name = name.
    assert.deepEqual(pb.function.map((f) => f.id), pb.function.map((_, i) => String(i + 1)));
    const functionKeys = pb.function.map((f) => `${s(f.name)}\0${s(f.filename)}`);
    assert.equal(new Set(functionKeys).size, functionKeys.length, "functions are deduplicated");
    const symbolized = profile.locations.filter((l) =>
      l.functionName !== "" || l.sourceFile !== "" || l.line !== 0
    );
    const distinct = new Set(symbolized.map((l) => `${l.functionName}\0${l.sourceFile}`));
    assert.ok(distinct.size < symbolized.length, "the profile repeats a function (work@app.c)");
    assert.equal(pb.function.length, distinct.size);
    for (const f of pb.function) assert.equal(f.systemName, f.name);
    const functionById = new Map(pb.function.map((f) => [f.id, f]));

    // Locations: ids from 1 in profile order, mapping, address, one line.
    assert.equal(pb.location.length, profile.locations.length);
    profile.locations.forEach((l, i) => {
      const got = pb.location[i]!;
      assert.equal(got.id, String(i + 1));
      if (l.mapping >= 0) {
        assert.equal(got.mappingId, String(l.mapping + 1), `location ${i} mapping`);
      } else if (l.kind === "native") {
        assert.equal(got.mappingId, "0", `location ${i} has no mapping`);
      } else {
        const m = mappingById.get(got.mappingId);
        assert.ok(m, `location ${i} points to a pseudo mapping`);
        assert.equal(s(m.filename), KIND_MAPPING_NAMES[l.kind as keyof typeof KIND_MAPPING_NAMES]);
      }
      assert.equal(got.address, high(l.address, l.kind === "kernel"), `location ${i} address`);
      if (l.functionName === "" && l.sourceFile === "" && l.line === 0) {
        assert.deepEqual(got.line, [], `location ${i} is unsymbolized`);
        return;
      }
      assert.equal(got.line.length, 1);
      const f = functionById.get(got.line[0]!.functionId);
      assert.ok(f, `location ${i} function exists`);
      assert.equal(s(f.name), l.functionName);
      assert.equal(s(f.filename), l.sourceFile);
      assert.equal(got.line[0]!.line, String(l.line));
    });

    // Samples: leaf-first location ids, [count, count * period], pid/tid numbers and comm string.
    assert.equal(pb.sample.length, profile.samples.length);
    profile.samples.forEach((sample, i) => {
      const got = pb.sample[i]!;
      assert.deepEqual(got.locationId, sample.locations.map((l) => String(l + 1)));
      assert.deepEqual(got.value, [
        String(sample.count),
        (BigInt(sample.count) * BigInt(profile.periodNs)).toString(),
      ]);
      const labels = new Map(got.label.map((l) => [s(l.key), l]));
      assert.equal(labels.size, got.label.length, "one label per key");
      assert.equal(labels.get("pid")?.num, String(sample.pid));
      assert.equal(labels.get("pid")?.str, "0", "pid is numeric");
      assert.equal(labels.get("tid")?.num, String(sample.tid));
      if (sample.comm === "") assert.equal(labels.has("comm"), false);
      else assert.equal(s(labels.get("comm")!.str), sample.comm);
    });
  },
});
