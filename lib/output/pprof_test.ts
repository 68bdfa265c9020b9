import assert from "node:assert/strict";
import { gunzipSync } from "node:zlib";
import type { FrameKind, Profile, ProfileLocation, ProfileMapping } from "../profile/profile.ts";
import { encodePprof, encodePprofGzip, frameKindOfMapping, KIND_MAPPING_NAMES } from "./pprof.ts";
import { decodePprof } from "./pprof_reader.ts";
import { runtimeFrameKinds } from "../profile/frame_kinds.ts";
import { decodePprofBySchema } from "../../tests/pprof_schema.ts";

// The profiler's own kinds and each runtime's.
const ALL_KINDS: FrameKind[] = [
  "kernel",
  "native",
  ...runtimeFrameKinds().map(({ name }) => name),
  "unknown",
  "error",
];

function run(cmd: string, args: string[]): string {
  const out = new Deno.Command(cmd, { args, stdout: "piped", stderr: "null" }).outputSync();
  return out.success ? new TextDecoder().decode(out.stdout) : "";
}

/** The executable mappings of this process, with the build IDs of their files. */
function executableMappings(): ProfileMapping[] {
  const mappings: ProfileMapping[] = [];
  const seen = new Set<string>();
  for (const line of Deno.readTextFileSync("/proc/self/maps").split("\n")) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) r-xp ([0-9a-f]+) \S+ \d+\s+(\/\S+)$/.exec(line);
    if (!m || seen.has(m[4]!)) continue;
    seen.add(m[4]!);
    const buildId = /Build ID: ([0-9a-f]+)/.exec(run("readelf", ["-n", m[4]!]))?.[1] ?? "";
    mappings.push({
      start: parseInt(m[1]!, 16),
      end: parseInt(m[2]!, 16),
      fileOffset: parseInt(m[3]!, 16),
      fileName: m[4]!,
      buildId,
      hasFunctions: true,
    });
  }
  return mappings;
}

/** Defined function symbols of an ELF file: [name, address]. */
function functionSymbols(path: string): [string, number][] {
  const symbols: [string, number][] = [];
  for (const line of run("nm", ["-D", "--defined-only", path]).split("\n")) {
    const m = /^([0-9a-f]+) [TtWi] (\S+)$/.exec(line);
    if (m) symbols.push([m[2]!, parseInt(m[1]!, 16)]);
  }
  return symbols;
}

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

/**
 * A profile of this process's real executable mappings and libc's real symbols, plus a frame of every
 * kind, kernel frames with and without a kernel mapping, inlined-looking duplicates and awkward names.
 */
function realisticProfile(): Profile {
  const mappings = executableMappings();
  const libc = mappings.findIndex((m) => /\/libc\.so/.test(m.fileName));
  assert.ok(libc >= 0, "this process maps libc");
  const symbols = functionSymbols(mappings[libc]!.fileName).slice(0, 200);
  assert.ok(symbols.length > 50, "libc has dynamic function symbols");
  const kernelMapping = mappings.length;
  mappings.push({
    start: 0x81000000,
    end: 0x83000000,
    fileOffset: 0,
    fileName: "[kernel.kallsyms]",
    buildId: "0123456789abcdef0123456789abcdef01234567",
    hasFunctions: true,
  });

  const locations: ProfileLocation[] = [];
  for (const [name, address] of symbols) {
    locations.push({ kind: "native", mapping: libc, address, functionName: name, sourceFile: "", line: 0 });
  }
  // The same function at another address and line: one pprof Function, two Locations.
  locations.push({ ...locations[0]!, address: locations[0]!.address + 4, sourceFile: "libc.c", line: 10 });
  locations.push({ ...locations[0]!, address: locations[0]!.address + 8, sourceFile: "libc.c", line: 11 });
  for (let m = 0; m < mappings.length; m++) {
    if (m === libc || m === kernelMapping) continue;
    const base = mappings[m]!.fileName.split("/").pop()!;
    locations.push({
      kind: "native",
      mapping: m,
      address: 0x1234 + m,
      functionName: `[${base}+0x${(0x1234 + m).toString(16)}]`,
      sourceFile: "",
      line: 0,
    });
  }
  locations.push(
    { kind: "native", mapping: libc, address: 0x2000, functionName: "", sourceFile: "", line: 0 },
    {
      kind: "native",
      mapping: -1,
      address: 0x7fff_1234_5678,
      functionName: "jit_stub",
      sourceFile: "",
      line: 0,
    },
    {
      kind: "native",
      mapping: -1,
      address: 0,
      functionName: "ünïcødé::λ<日本>",
      sourceFile: "a;b\nc.cc",
      line: 7,
    },
    {
      kind: "kernel",
      mapping: kernelMapping,
      address: 0x81234567,
      functionName: "do_syscall_64",
      sourceFile: "",
      line: 0,
    },
    {
      kind: "kernel",
      mapping: kernelMapping,
      address: 0x81000010,
      functionName: "",
      sourceFile: "",
      line: 0,
    },
    {
      kind: "kernel",
      mapping: -1,
      address: 0xc0de1234,
      functionName: "nf_hook_slow",
      sourceFile: "",
      line: 0,
    },
  );
  for (const kind of ALL_KINDS) {
    if (kind === "native" || kind === "kernel") continue;
    locations.push(
      {
        kind,
        mapping: -1,
        address: 42,
        functionName: `run_${kind}`,
        sourceFile: `/app/main.${kind}`,
        line: 3,
      },
      { kind, mapping: -1, address: 0, functionName: `helper_${kind}`, sourceFile: "", line: 0 },
    );
  }

  const rand = random(12345);
  const samples: Profile["samples"] = [];
  const comms = ["bash", "", "kworker/0:1", "python3", "ünï"];
  for (let i = 0; i < 300; i++) {
    const depth = 1 + Math.floor(rand() * 40);
    const stack: number[] = [];
    for (let d = 0; d < depth; d++) stack.push(Math.floor(rand() * locations.length));
    const pid = i % 7 === 0 ? 0 : 1 + Math.floor(rand() * 4_000_000);
    samples.push({
      locations: stack,
      count: i === 5 ? 2 ** 40 : 1 + Math.floor(rand() * 100),
      pid,
      tid: pid === 0 ? 0 : pid + (i % 3),
      comm: comms[i % comms.length]!,
    });
  }
  samples.push({ locations: [], count: 3, pid: 1, tid: 1, comm: "empty-stack" });
  return {
    startTimeNs: 1_700_000_000_123_456_768, // above 2^53: an exact double
    durationNs: 5_000_000_123,
    periodNs: 10_101_010,
    mappings,
    locations,
    samples,
  };
}

Deno.test("decodePprof(encodePprof()) gives back a profile of real mappings and symbols", () => {
  const profile = realisticProfile();
  const decoded = decodePprof(encodePprof(profile));
  assert.deepEqual(decoded, profile);
});

Deno.test("encodePprofGzip() writes gzip that decodes to the same profile", async () => {
  const profile = realisticProfile();
  const gz = await encodePprofGzip(profile);
  assert.deepEqual([gz[0], gz[1]], [0x1f, 0x8b]);
  assert.deepEqual(new Uint8Array(gunzipSync(gz)), encodePprof(profile));
  assert.deepEqual(decodePprof(gz), profile);
});

Deno.test("every frame kind survives a round trip, with or without a mapping of its own", () => {
  const mappings: ProfileMapping[] = ALL_KINDS.filter((k) => k !== "native").map((kind) => ({
    start: 0x1000,
    end: 0x2000,
    fileOffset: 0,
    fileName: KIND_MAPPING_NAMES[kind as Exclude<FrameKind, "native">]!,
    buildId: "",
    hasFunctions: true,
  }));
  const locations: ProfileLocation[] = [];
  for (const kind of ALL_KINDS) {
    const own = mappings.findIndex((m) => frameKindOfMapping(m.fileName) === kind);
    locations.push({
      kind,
      mapping: -1,
      address: 0x1100,
      functionName: `f_${kind}`,
      sourceFile: "",
      line: 0,
    });
    if (own >= 0) {
      locations.push({
        kind,
        mapping: own,
        address: 0x1100,
        functionName: `g_${kind}`,
        sourceFile: "",
        line: 0,
      });
    }
  }
  const profile: Profile = {
    startTimeNs: 1,
    durationNs: 2,
    periodNs: 3,
    mappings,
    locations,
    samples: [{ locations: locations.map((_, i) => i), count: 1, pid: 1, tid: 2, comm: "k" }],
  };
  const decoded = decodePprof(encodePprof(profile));
  assert.deepEqual(decoded, profile);
  assert.deepEqual(decoded.locations.map((l) => l.kind), locations.map((l) => l.kind));
});

Deno.test("a frame whose kind contradicts its mapping keeps its kind and loses the mapping", () => {
  const profile: Profile = {
    startTimeNs: 0,
    durationNs: 0,
    periodNs: 1,
    mappings: [
      {
        start: 0x1000,
        end: 0x9000,
        fileOffset: 0,
        fileName: "/usr/lib/libpython3.so",
        buildId: "ab",
        hasFunctions: true,
      },
      {
        start: 0x81000000,
        end: 0x82000000,
        fileOffset: 0,
        fileName: "[kernel.kallsyms]",
        buildId: "",
        hasFunctions: true,
      },
    ],
    locations: [
      { kind: "python", mapping: 0, address: 0x1100, functionName: "run", sourceFile: "x.py", line: 1 },
      { kind: "native", mapping: 1, address: 0x81000100, functionName: "odd", sourceFile: "", line: 0 },
      { kind: "native", mapping: 0, address: 0x1200, functionName: "PyEval", sourceFile: "", line: 0 },
    ],
    samples: [{ locations: [0, 1, 2], count: 1, pid: 1, tid: 1, comm: "python3" }],
  };
  const decoded = decodePprof(encodePprof(profile));
  assert.deepEqual(decoded.mappings, profile.mappings);
  assert.deepEqual(decoded.locations.map((l) => [l.kind, l.mapping]), [["python", -1], ["native", -1], [
    "native",
    0,
  ]]);
});

Deno.test("a profile mapping that looks like a pseudo mapping decodes to a stable form", () => {
  const profile: Profile = {
    startTimeNs: 0,
    durationNs: 0,
    periodNs: 1,
    mappings: [
      { start: 0, end: 0, fileOffset: 0, fileName: "[kernel.kallsyms]", buildId: "", hasFunctions: true },
      { start: 0x1000, end: 0x2000, fileOffset: 0, fileName: "/bin/app", buildId: "", hasFunctions: false },
    ],
    locations: [
      { kind: "kernel", mapping: 0, address: 0x81000000, functionName: "schedule", sourceFile: "", line: 0 },
      { kind: "native", mapping: 1, address: 0x1100, functionName: "", sourceFile: "", line: 0 },
    ],
    samples: [{ locations: [0, 1], count: 2, pid: 5, tid: 6, comm: "app" }],
  };
  const once = decodePprof(encodePprof(profile));
  // The zero-sized kernel mapping carried nothing but the kind: it becomes "no mapping".
  assert.deepEqual(once.mappings, [profile.mappings[1]]);
  assert.deepEqual(once.locations.map((l) => [l.kind, l.mapping]), [["kernel", -1], ["native", 0]]);
  assert.deepEqual(decodePprof(encodePprof(once)), once);
});

Deno.test("decodePprof(encodePprof()) holds for random profiles", () => {
  const rand = random(777);
  for (let round = 0; round < 40; round++) {
    const mappings: ProfileMapping[] = [];
    const nMappings = Math.floor(rand() * 5);
    for (let m = 0; m < nMappings; m++) {
      const start = Math.floor(rand() * 2 ** 46);
      mappings.push({
        start,
        end: start + Math.floor(rand() * 2 ** 30),
        fileOffset: Math.floor(rand() * 2 ** 20) * 4096,
        fileName: `/lib/lib${m}.so`,
        buildId: rand() < 0.5 ? "" : Math.floor(rand() * 2 ** 48).toString(16),
        hasFunctions: rand() < 0.5,
      });
    }
    const locations: ProfileLocation[] = [];
    const nLocations = 1 + Math.floor(rand() * 50);
    for (let i = 0; i < nLocations; i++) {
      const kind = ALL_KINDS[Math.floor(rand() * ALL_KINDS.length)]!;
      const mapping = kind === "native" && nMappings > 0 && rand() < 0.8
        ? Math.floor(rand() * nMappings)
        : -1;
      const address = kind === "kernel" ? Math.floor(rand() * 2 ** 32) : Math.floor(rand() * 2 ** 47);
      const named = rand() < 0.9;
      locations.push({
        kind,
        mapping,
        address,
        functionName: named ? `fn${Math.floor(rand() * 20)}` : "",
        sourceFile: named && rand() < 0.5 ? `src${Math.floor(rand() * 3)}.c` : "",
        line: named && rand() < 0.5 ? Math.floor(rand() * 5000) : 0,
      });
    }
    const samples: Profile["samples"] = [];
    const nSamples = Math.floor(rand() * 30);
    for (let s = 0; s < nSamples; s++) {
      const stack: number[] = [];
      const depth = Math.floor(rand() * 20);
      for (let d = 0; d < depth; d++) stack.push(Math.floor(rand() * nLocations));
      samples.push({
        locations: stack,
        count: 1 + Math.floor(rand() * 1000),
        pid: Math.floor(rand() * 100),
        tid: Math.floor(rand() * 100),
        comm: rand() < 0.2 ? "" : `t${Math.floor(rand() * 4)}`,
      });
    }
    const profile: Profile = {
      startTimeNs: Math.floor(rand() * 2 ** 60),
      durationNs: Math.floor(rand() * 2 ** 40),
      periodNs: 1 + Math.floor(rand() * 2 ** 30),
      mappings,
      locations,
      samples,
    };
    assert.deepEqual(decodePprof(encodePprof(profile)), profile, `round ${round}`);
  }
});

Deno.test("encodePprof() rejects references to missing mappings and locations", () => {
  const base: Profile = {
    startTimeNs: 0,
    durationNs: 0,
    periodNs: 1,
    mappings: [],
    locations: [],
    samples: [],
  };
  const location: ProfileLocation = {
    kind: "native",
    mapping: 0,
    address: 1,
    functionName: "f",
    sourceFile: "",
    line: 0,
  };
  assert.throws(
    () => encodePprof({ ...base, locations: [location] }),
    /Cannot encode pprof: location 0 refers to mapping 0 of 0/,
  );
  assert.throws(
    () => encodePprof({ ...base, samples: [{ locations: [3], count: 1, pid: 1, tid: 1, comm: "" }] }),
    /Cannot encode pprof: sample 0 refers to location 3 of 0/,
  );
});

Deno.test("encodePprof() writes a run of inlined calls as one location with a line per call, innermost first", () => {
  const mapping: ProfileMapping = {
    start: 0,
    end: 0x800000000000,
    fileOffset: 0,
    fileName: "/srv/app",
    buildId: "",
    hasFunctions: true,
  };
  const at = (address: number, functionName: string, line: number, inlined = false): ProfileLocation => ({
    kind: "native",
    mapping: 0,
    address,
    functionName,
    sourceFile: "/src/main.go",
    line,
    ...(inlined ? { inlined: true } : {}),
  });
  const profile: Profile = {
    startTimeNs: 0,
    durationNs: 1e9,
    periodNs: 10_000_000,
    mappings: [mapping],
    locations: [
      at(0x401010, "main.c", 30),
      at(0x401105, "main.b", 42, true),
      at(0x401105, "main.a", 48),
      at(0x401205, "main.main", 57),
    ],
    samples: [
      { locations: [0, 1, 2, 3], count: 7, pid: 1, tid: 1, comm: "app" },
      { locations: [1, 2, 3], count: 2, pid: 1, tid: 1, comm: "app" },
    ],
  };
  const bytes = encodePprof(profile);
  // Read back, the location table differs (a run is one location), the stacks do not.
  const stacksOf = (p: Profile) =>
    p.samples.map((sample) =>
      sample.locations.map((i) => {
        const l = p.locations[i]!;
        return `${l.functionName}:${l.line}@${l.address.toString(16)}${l.inlined ? " (inline)" : ""}`;
      })
    );
  assert.deepEqual(stacksOf(decodePprof(bytes)), stacksOf(profile));

  // As the published schema reads it: b and a are one location of two lines, and b is never alone.
  const pb = decodePprofBySchema(bytes);
  const names = new Map(pb.function.map((f) => [f.id, pb.stringTable[Number(f.name)]]));
  const lines = new Map(
    pb.location.map((l) => [l.id, l.line.map((line) => `${names.get(line.functionId)}:${line.line}`)]),
  );
  const stacks = pb.sample.map((sample) => sample.locationId.map((id) => lines.get(id)));
  assert.deepEqual(stacks, [
    [["main.c:30"], ["main.b:42", "main.a:48"], ["main.main:57"]],
    [["main.b:42", "main.a:48"], ["main.main:57"]],
  ]);
  assert.equal(pb.location.length, 4, "main.c, main.a, main.main, and the run: main.b is never alone");
  const inlinedAt = pb.location.find((l) => l.line.length === 2)!;
  assert.equal(Number(inlinedAt.address), 0x401105);
  assert.equal(inlinedAt.mappingId, "1");
});

Deno.test("a sample's labels are string labels of the published schema, after pid, tid and comm, and read back", () => {
  const profile: Profile = {
    startTimeNs: 0,
    durationNs: 1e9,
    periodNs: 1e7,
    mappings: [],
    locations: [{
      kind: "native",
      mapping: -1,
      address: 0x1000,
      functionName: "main.c",
      sourceFile: "",
      line: 0,
    }],
    samples: [
      {
        locations: [0],
        count: 2,
        pid: 7,
        tid: 8,
        comm: "labels",
        labels: [{ key: "worker", value: "alpha" }],
      },
      {
        locations: [0],
        count: 1,
        pid: 7,
        tid: 8,
        comm: "labels",
        labels: [{ key: "worker", value: "beta" }],
      },
      { locations: [0], count: 1, pid: 7, tid: 8, comm: "labels" },
    ],
  };
  const shadowing: Profile = {
    ...profile,
    samples: [{
      ...profile.samples[0]!,
      labels: [{ key: "comm", value: "other" }, { key: "pid", value: "1" }],
    }],
  };
  const decoded = decodePprofBySchema(encodePprof(profile));
  const strings = decoded.stringTable;
  const labels = decoded.sample.map((sample) =>
    sample.label.map((label) =>
      Number(label.str) === 0
        ? `${strings[Number(label.key)]}#${label.num}`
        : `${strings[Number(label.key)]}=${strings[Number(label.str)]}`
    )
  );
  assert.deepEqual(labels, [
    ["pid#7", "tid#8", "comm=labels", "worker=alpha"],
    ["pid#7", "tid#8", "comm=labels", "worker=beta"],
    ["pid#7", "tid#8", "comm=labels"],
  ]);
  // And omniprof's reader gives them back.
  assert.deepEqual(decodePprof(encodePprof(profile)).samples, profile.samples);
  // A label named as the profiler's own is left out.
  const [only] = decodePprofBySchema(encodePprof(shadowing)).sample;
  assert.equal(only!.label.length, 3);
});

/** Two threads of one process: one computing (CPU samples), one also blocked in read (an off-CPU sample). */
function offCpuProfile(): Profile {
  return {
    startTimeNs: 0,
    durationNs: 1e9,
    periodNs: 1e7,
    offCpu: true,
    mappings: [],
    locations: [
      { kind: "native", mapping: -1, address: 0x1000, functionName: "compute", sourceFile: "", line: 0 },
      { kind: "native", mapping: -1, address: 0x2000, functionName: "read", sourceFile: "", line: 0 },
    ],
    samples: [
      { locations: [0], count: 3, pid: 7, tid: 7, comm: "app" },
      { locations: [1], count: 0, offCpuNs: 250_000_000, pid: 7, tid: 8, comm: "reader" },
      { locations: [1], count: 1, pid: 7, tid: 8, comm: "reader" },
    ],
  };
}

Deno.test("an off-CPU profile has an off_cpu/nanoseconds sample type: [count, cpu, 0] and [0, 0, off-CPU ns]", () => {
  const decoded = decodePprofBySchema(encodePprof(offCpuProfile()));
  const strings = decoded.stringTable;
  assert.deepEqual(
    decoded.sampleType.map((t) => `${strings[Number(t.type)]}/${strings[Number(t.unit)]}`),
    ["samples/count", "cpu/nanoseconds", "off_cpu/nanoseconds"],
  );
  assert.deepEqual(decoded.sample.map((s) => s.value.map(Number)), [
    [3, 30_000_000, 0],
    [0, 0, 250_000_000],
    [1, 10_000_000, 0],
  ]);
  assert.equal(`${strings[Number(decoded.periodType.type)]}/${Number(decoded.period)}`, "cpu/10000000");
});

Deno.test("an off-CPU profile reads back with its flag and off-CPU samples, even without any", () => {
  const profile = offCpuProfile();
  assert.deepEqual(decodePprof(encodePprof(profile)), profile);
  const noneSwitchedOut: Profile = { ...profile, samples: [profile.samples[0]!] };
  assert.deepEqual(decodePprof(encodePprof(noneSwitchedOut)), noneSwitchedOut);
  assert.equal(decodePprofBySchema(encodePprof(noneSwitchedOut)).sampleType.length, 3);
});

Deno.test("a profile without off-CPU time keeps two sample types and two values a sample", () => {
  const { offCpu: _, ...profile } = offCpuProfile();
  const cpuOnly: Profile = { ...profile, samples: [profile.samples[0]!, profile.samples[2]!] };
  const decoded = decodePprofBySchema(encodePprof(cpuOnly));
  assert.equal(decoded.sampleType.length, 2);
  assert.deepEqual(decoded.sample.map((s) => s.value.map(Number)), [[3, 30_000_000], [1, 10_000_000]]);
  assert.ok(!decoded.stringTable.includes("off_cpu"));
  assert.equal("offCpu" in decodePprof(encodePprof(cpuOnly)), false);
  // And `offCpu: false` writes the same bytes as no flag.
  assert.deepEqual(encodePprof({ ...cpuOnly, offCpu: false }), encodePprof(cpuOnly));
});

/** Hits of two probes in one process, one of them on two stacks, and a third event never hit. */
function eventsProfile(): Profile {
  return {
    startTimeNs: 0,
    durationNs: 1e9,
    periodNs: 0,
    events: ["uprobe:/usr/bin/app:handle", "tracepoint:syscalls:sys_enter_getpgid", "kprobe:do_sys_openat2"],
    mappings: [],
    locations: [
      { kind: "native", mapping: -1, address: 0x1000, functionName: "handle", sourceFile: "", line: 0 },
      {
        kind: "kernel",
        mapping: -1,
        address: 0x2000,
        functionName: "__x64_sys_getpgid",
        sourceFile: "",
        line: 0,
      },
      { kind: "native", mapping: -1, address: 0x3000, functionName: "main", sourceFile: "", line: 0 },
    ],
    samples: [
      { locations: [0, 2], count: 5, event: 0, pid: 7, tid: 7, comm: "app" },
      {
        locations: [1, 2],
        count: 2,
        event: 1,
        pid: 7,
        tid: 7,
        comm: "app",
        labels: [{ key: "k", value: "v" }],
      },
      { locations: [0, 2], count: 1, event: 1, pid: 7, tid: 8, comm: "worker" },
    ],
  };
}

Deno.test("an events profile has one events/count value a sample, its count, and an `event` label", () => {
  const decoded = decodePprofBySchema(encodePprof(eventsProfile()));
  const strings = decoded.stringTable;
  const name = (t: { type: string; unit: string }) => `${strings[Number(t.type)]}/${strings[Number(t.unit)]}`;
  assert.deepEqual(decoded.sampleType.map(name), ["events/count"]);
  assert.equal(name(decoded.periodType), "events/count");
  assert.equal(decoded.period, "1");
  assert.deepEqual(decoded.sample.map((s) => s.value.map(Number)), [[5], [2], [1]]);
  assert.deepEqual(
    decoded.sample.map((s) =>
      s.label.filter((l) => l.str !== "0").map((l) => `${strings[Number(l.key)]}=${strings[Number(l.str)]}`)
    ),
    [
      ["comm=app", "event=uprobe:/usr/bin/app:handle"],
      ["comm=app", "event=tracepoint:syscalls:sys_enter_getpgid", "k=v"],
      ["comm=worker", "event=tracepoint:syscalls:sys_enter_getpgid"],
    ],
  );
  // The events recorded, hit or not, in order, as pprof -comments shows them.
  const { comment } = decoded as typeof decoded & { comment: string[] };
  assert.deepEqual(comment.map((c) => strings[Number(c)]), [
    "event=uprobe:/usr/bin/app:handle",
    "event=tracepoint:syscalls:sys_enter_getpgid",
    "event=kprobe:do_sys_openat2",
  ]);
  for (const unused of ["samples", "cpu", "nanoseconds", "off_cpu"]) {
    assert.ok(!strings.includes(unused), unused);
  }
});

Deno.test("an events profile reads back with its events, never-hit ones too, and each sample's event", () => {
  const profile = eventsProfile();
  assert.deepEqual(decodePprof(encodePprof(profile)), profile);
  // Off-CPU time has no place in it: neither flag nor value is written.
  const flagged: Profile = { ...profile, offCpu: true };
  assert.deepEqual(decodePprof(encodePprof(flagged)), profile);
  // A sample's own `event` label would read as the event: it is left out.
  const labelled: Profile = {
    ...profile,
    samples: [{ ...profile.samples[0]!, labels: [{ key: "event", value: "mine" }] }],
  };
  assert.deepEqual(decodePprof(encodePprof(labelled)).samples[0], profile.samples[0]);
});

Deno.test("CPU and off-CPU profiles are written byte for byte as before events profiles existed", async () => {
  // The SHA-256 of these two profiles' encodings before events profiles were written: a CPU profile,
  // with a sample's own `event` label (a label like any other there), and the same with off-CPU time.
  const { events: _, ...rest } = eventsProfile();
  const cpu: Profile = {
    ...rest,
    periodNs: 1e7,
    samples: [
      { locations: [0, 2], count: 5, pid: 7, tid: 7, comm: "app" },
      { locations: [1, 2], count: 2, pid: 7, tid: 7, comm: "app", labels: [{ key: "event", value: "v" }] },
      { locations: [0, 2], count: 1, pid: 7, tid: 8, comm: "worker" },
    ],
  };
  const offCpu: Profile = {
    ...cpu,
    offCpu: true,
    samples: [...cpu.samples, {
      locations: [1],
      count: 0,
      offCpuNs: 250_000_000,
      pid: 7,
      tid: 8,
      comm: "worker",
    }],
  };
  const sha256 = async (bytes: Uint8Array) =>
    [...new Uint8Array(await crypto.subtle.digest("SHA-256", new Uint8Array(bytes)))].map((b) =>
      b.toString(16).padStart(2, "0")
    )
      .join("");
  assert.equal(
    await sha256(encodePprof(cpu)),
    "a8298233b337bab3b9309e66672eda5ea5f2c75bd0171d91bfc3ca4c67fbd552",
  );
  assert.equal(
    await sha256(encodePprof(offCpu)),
    "8efd729134d92722f04d1a06426d5a61031b403abec22cbaadb0ed48e4db5ed1",
  );
  assert.equal("events" in decodePprof(encodePprof(cpu)), false);
});
