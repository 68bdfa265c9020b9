import assert from "node:assert/strict";
import type { Profile } from "../profile/profile.ts";
import { encodeOtlpProfiles, FRAME_TYPES, type OtlpAttributes } from "./otlp.ts";
import { decodeRequest, flattenRequest, loadOtelSchema } from "../../tests/otlp_schema.ts";

// A whole-system interval as the profile builder makes it: two processes, a kernel path under a native
// chain, an interpreted frame, an unresolved frame and a frame without mapping.
const START_NS = 1_700_000_000_123_456_000;
const profile: Profile = {
  startTimeNs: START_NS,
  durationNs: 1_000_250_000,
  periodNs: 1e9 / 99,
  mappings: [
    {
      start: 0x400000,
      end: 0x401000,
      fileOffset: 0x1000,
      fileName: "/opt/app/chain",
      buildId: "ab12",
      hasFunctions: true,
    },
    {
      start: 0x81000000,
      end: 0x83000000,
      fileOffset: 0,
      fileName: "[kernel.kallsyms]",
      buildId: "",
      hasFunctions: true,
    },
    {
      start: 0x7f0000000000,
      end: 0x7f0000100000,
      fileOffset: 0,
      fileName: "/usr/lib/libpython3.11.so",
      buildId: "",
      hasFunctions: true,
    },
  ],
  locations: [
    { kind: "native", mapping: 0, address: 0x401100, functionName: "c", sourceFile: "chain.c", line: 21 },
    { kind: "native", mapping: 0, address: 0x401200, functionName: "b", sourceFile: "chain.c", line: 31 },
    { kind: "native", mapping: 0, address: 0x401300, functionName: "a", sourceFile: "chain.c", line: 37 },
    { kind: "native", mapping: 0, address: 0x401400, functionName: "main", sourceFile: "chain.c", line: 45 },
    {
      kind: "kernel",
      mapping: 1,
      address: 0x81234567,
      functionName: "do_syscall_64",
      sourceFile: "",
      line: 0,
    },
    { kind: "python", mapping: -1, address: 7, functionName: "handler", sourceFile: "app.py", line: 12 },
    { kind: "native", mapping: 2, address: 0x7f0000001234, functionName: "", sourceFile: "", line: 0 },
    {
      kind: "native",
      mapping: -1,
      address: 0x1234,
      functionName: "[unknown+0x1234]",
      sourceFile: "",
      line: 0,
    },
  ],
  samples: [
    { locations: [0, 1, 2, 3], count: 90, pid: 100, tid: 100, comm: "chain" },
    { locations: [4, 0, 1, 2, 3], count: 5, pid: 100, tid: 101, comm: "chain-worker" },
    // The same identity as the first sample: merged.
    { locations: [0, 1, 2, 3], count: 3, pid: 100, tid: 100, comm: "chain" },
    { locations: [5, 6], count: 7, pid: 200, tid: 200, comm: "python3" },
    { locations: [7], count: 1, pid: 200, tid: 201, comm: "" },
    { locations: [], count: 2, pid: 300, tid: 300, comm: "kworker/0:1" },
  ],
};

function resourceAttributes(pid: number): OtlpAttributes {
  return [
    ["host.name", "test-host"],
    ["process.pid", pid],
    ["process.executable.name", pid === 100 ? "chain" : "python3"],
    ["host.cpu.load", 0.25],
    ["container.managed", pid === 200],
  ];
}

const scope = { name: "omniprof", version: "9.9.9" };

Deno.test(
  "encodeOtlpProfiles() decodes with the published schema into one resource per process",
  () => {
    const request = decodeRequest(encodeOtlpProfiles(profile, { resourceAttributes, scope }));
    assert.equal(request.resource_profiles.length, 3);
    const pids = request.resource_profiles.map((rp) =>
      Number(rp.resource.attributes.find((kv) => kv.key === "process.pid")!.value!.int_value)
    );
    assert.deepEqual(pids, [100, 200, 300]);
    for (const rp of request.resource_profiles) {
      assert.equal(rp.scope_profiles.length, 1);
      const [sp] = rp.scope_profiles;
      assert.equal(sp!.scope.name, "omniprof");
      assert.equal(sp!.scope.version, "9.9.9");
      assert.equal(sp!.profiles.length, 1);
      const p = sp!.profiles[0]!;
      const strings: string[] = request.dictionary.string_table;
      assert.equal(strings[p.sample_type.type_strindex], "samples");
      assert.equal(strings[p.sample_type.unit_strindex], "count");
      assert.equal(strings[p.period_type.type_strindex], "cpu");
      assert.equal(strings[p.period_type.unit_strindex], "nanoseconds");
      assert.equal(Number(p.period), Math.round(1e9 / 99));
      assert.equal(BigInt(p.time_unix_nano), BigInt(START_NS), "time_unix_nano is exact");
      assert.equal(Number(p.duration_nano), 1_000_250_000);
      assert.equal(p.profile_id.length, 16);
      assert.ok(p.profile_id.some((byte: number) => byte !== 0));
    }

    const flat = flattenRequest(request);
    const total = flat.reduce((sum, s) => sum + s.values[0]!, 0);
    assert.equal(total, profile.samples.reduce((sum, s) => sum + s.count, 0), "every sample counts once");
    const main = flat.filter((s) => s.resource["process.pid"] === 100 && s.attributes["thread.id"] === 100);
    assert.equal(main.length, 1, "samples of the same stack and thread are merged");
    assert.deepEqual(main[0]!.frames, ["main", "a", "b", "c"]);
    assert.deepEqual(main[0]!.frameTypes, ["native", "native", "native", "native"]);
    assert.deepEqual(main[0]!.values, [93]);
    assert.equal(main[0]!.attributes["thread.name"], "chain");
    assert.equal(main[0]!.resource["host.name"], "test-host");
    assert.equal(main[0]!.resource["host.cpu.load"], 0.25);
    assert.equal(main[0]!.resource["container.managed"], false);

    const kernel = flat.find((s) => s.attributes["thread.id"] === 101)!;
    assert.deepEqual(kernel.frames, ["main", "a", "b", "c", "do_syscall_64"]);
    assert.deepEqual(kernel.frameTypes, ["native", "native", "native", "native", "kernel"]);
    assert.equal(kernel.attributes["thread.name"], "chain-worker");

    const python = flat.find((s) => s.attributes["thread.id"] === 200)!;
    assert.deepEqual(python.frameTypes, ["native", FRAME_TYPES.python]);
    assert.deepEqual(python.frames, ["", "handler"], "an unsymbolized frame has no line");
    assert.equal(python.resource["container.managed"], true);

    const nameless = flat.find((s) => s.attributes["thread.id"] === 201)!;
    assert.equal(nameless.attributes["thread.name"], undefined, "an empty thread name is left out");

    const empty = flat.find((s) => s.resource["process.pid"] === 300)!;
    assert.deepEqual(empty.frames, [], "a sample without stack refers to the empty stack");
  },
);

Deno.test("encodeOtlpProfiles() starts every dictionary table with its zero value", () => {
  const { dictionary } = decodeRequest(encodeOtlpProfiles(profile, { resourceAttributes, scope }));
  assert.equal(dictionary.string_table[0], "");
  assert.deepEqual(dictionary.mapping_table[0], {
    memory_start: "0",
    memory_limit: "0",
    file_offset: "0",
    filename_strindex: 0,
    attribute_indices: [],
  });
  assert.deepEqual(dictionary.location_table[0], {
    mapping_index: 0,
    address: "0",
    lines: [],
    attribute_indices: [],
  });
  assert.deepEqual(dictionary.function_table[0], {
    name_strindex: 0,
    system_name_strindex: 0,
    filename_strindex: 0,
    start_line: "0",
  });
  assert.deepEqual(dictionary.link_table, [{
    trace_id: new Array(16).fill(0),
    span_id: new Array(8).fill(0),
  }]);
  assert.equal(dictionary.attribute_table[0]!.key_strindex, 0);
  assert.equal(dictionary.attribute_table[0]!.value, null);
  assert.deepEqual(dictionary.stack_table[0], { location_indices: [] });
  // No duplicates in the tables the encoder deduplicates.
  assert.equal(new Set(dictionary.string_table).size, dictionary.string_table.length);
  const stacks = dictionary.stack_table.map((s) => s.location_indices.join(","));
  assert.equal(new Set(stacks).size, stacks.length);
  const functions = dictionary.function_table.map((f) => `${f.name_strindex},${f.filename_strindex}`);
  assert.equal(new Set(functions).size, functions.length);
});

Deno.test(
  "encodeOtlpProfiles() writes mappings with build ids and kernel addresses in full",
  () => {
    const { dictionary } = decodeRequest(encodeOtlpProfiles(profile, { resourceAttributes, scope }));
    const strings: string[] = dictionary.string_table;
    assert.equal(dictionary.mapping_table.length, profile.mappings.length + 1);
    const app = dictionary.mapping_table[1]!;
    assert.equal(strings[app.filename_strindex], "/opt/app/chain");
    assert.equal(app.memory_start, String(0x400000));
    assert.equal(app.memory_limit, String(0x401000));
    assert.equal(app.file_offset, String(0x1000));
    const [buildId] = app.attribute_indices.map((i) => dictionary.attribute_table[i]!);
    assert.equal(strings[buildId!.key_strindex], "process.executable.build_id.gnu");
    assert.equal(buildId!.value!.string_value, "ab12");
    const kernelMapping = dictionary.mapping_table[2]!;
    assert.equal(BigInt(kernelMapping.memory_start), 0xffffffff81000000n);
    const kernelLocation = dictionary.location_table[5]!;
    assert.equal(BigInt(kernelLocation.address), 0xffffffff81234567n);
    assert.equal(kernelLocation.mapping_index, 2);
    const noMapping = dictionary.location_table[6]!;
    assert.equal(noMapping.mapping_index, 0, "a frame without mapping refers to the zero mapping");
    const c = dictionary.location_table[1]!;
    assert.equal(Number(c.lines[0]!.line), 21);
    const fn = dictionary.function_table[c.lines[0]!.function_index]!;
    assert.equal(strings[fn.name_strindex], "c");
    assert.equal(strings[fn.filename_strindex], "chain.c");
  },
);

Deno.test("encodeOtlpProfiles() of an empty profile is a valid request without resources", () => {
  const empty: Profile = { ...profile, mappings: [], locations: [], samples: [] };
  const bytes = encodeOtlpProfiles(empty, { resourceAttributes, scope });
  const { request } = loadOtelSchema();
  assert.equal(request.verify(request.decode(bytes)), null);
  const decoded = decodeRequest(bytes);
  assert.equal(decoded.resource_profiles.length, 0);
  assert.equal(decoded.dictionary.string_table[0], "");
});

Deno.test(
  "encodeOtlpProfiles() writes garbage addresses of a broken stack walk as unknown",
  () => {
    const garbage: Profile = {
      ...profile,
      locations: [
        { kind: "native", mapping: -1, address: 2 ** 64, functionName: "[unknown]", sourceFile: "", line: 0 },
        {
          kind: "native",
          mapping: -1,
          address: 7954874471547430000,
          functionName: "[unknown]",
          sourceFile: "",
          line: 0,
        },
      ],
      samples: [{ locations: [0, 1], count: 1, pid: 1, tid: 1, comm: "x" }],
    };
    const { dictionary } = decodeRequest(encodeOtlpProfiles(garbage, { resourceAttributes, scope }));
    assert.equal(dictionary.location_table[1]!.address, "0");
    assert.equal(
      BigInt(dictionary.location_table[2]!.address),
      BigInt(7954874471547430000),
      "the double, exactly",
    );
  },
);

Deno.test("encodeOtlpProfiles() refuses references to missing locations and mappings", () => {
  assert.throws(
    () =>
      encodeOtlpProfiles({ ...profile, samples: [{ locations: [99], count: 1, pid: 1, tid: 1, comm: "" }] }, {
        resourceAttributes,
        scope,
      }),
    /Cannot encode OTLP profiles: sample 0 refers to location 99 of 8/,
  );
  assert.throws(
    () =>
      encodeOtlpProfiles({
        ...profile,
        locations: [{ kind: "native", mapping: 5, address: 1, functionName: "f", sourceFile: "", line: 0 }],
        samples: [],
      }, { resourceAttributes, scope }),
    /Cannot encode OTLP profiles: location 0 refers to mapping 5 of 3/,
  );
});

Deno.test("encodeOtlpProfiles() writes a sample's labels as attributes, and keeps samples with other labels apart", () => {
  const chain = [0, 1, 2, 3];
  const alpha = [{ key: "worker", value: "alpha" }, { key: "phase", value: "spin" }];
  const labelled: Profile = {
    ...profile,
    samples: [
      { locations: chain, count: 4, pid: 100, tid: 100, comm: "chain", labels: alpha },
      {
        locations: chain,
        count: 2,
        pid: 100,
        tid: 100,
        comm: "chain",
        labels: [{ key: "worker", value: "beta" }],
      },
      { locations: chain, count: 1, pid: 100, tid: 100, comm: "chain", labels: alpha },
      // A label named as a thread attribute is left out: keys are unique in an attribute list.
      {
        locations: chain,
        count: 3,
        pid: 100,
        tid: 100,
        comm: "chain",
        labels: [{ key: "thread.id", value: "7" }],
      },
    ],
  };
  const flat = flattenRequest(decodeRequest(encodeOtlpProfiles(labelled, { resourceAttributes, scope })));
  const summary = flat.map((
    s,
  ) => [s.attributes["worker"], s.attributes["phase"], s.attributes["thread.id"], s.values[0]]);
  assert.deepEqual(summary, [["alpha", "spin", 100, 5], ["beta", undefined, 100, 2], [
    undefined,
    undefined,
    100,
    3,
  ]]);
});

Deno.test("encodeOtlpProfiles() of an off-CPU profile writes an off_cpu/nanoseconds Profile beside the CPU one", () => {
  const offCpu: Profile = {
    ...profile,
    offCpu: true,
    samples: [
      { locations: [0, 1, 2, 3], count: 4, pid: 100, tid: 100, comm: "chain" },
      { locations: [4, 0, 1, 2, 3], count: 0, offCpuNs: 1_500_000, pid: 100, tid: 101, comm: "chain-worker" },
      // The same identity: merged, its time added.
      { locations: [4, 0, 1, 2, 3], count: 0, offCpuNs: 500_000, pid: 100, tid: 101, comm: "chain-worker" },
      // The same stack and thread as the first, switched out: in the off-CPU profile only.
      { locations: [0, 1, 2, 3], count: 0, offCpuNs: 7_000, pid: 100, tid: 100, comm: "chain" },
      { locations: [5, 6], count: 2, pid: 200, tid: 200, comm: "python3" },
    ],
  };
  const bytes = encodeOtlpProfiles(offCpu, { resourceAttributes, scope });
  const { request: requestType } = loadOtelSchema();
  assert.equal(requestType.verify(requestType.decode(bytes)), null);
  const request = decodeRequest(bytes);
  const strings: string[] = request.dictionary.string_table;
  for (const rp of request.resource_profiles) {
    const [cpu, off] = rp.scope_profiles[0]!.profiles;
    assert.equal(
      rp.scope_profiles[0]!.profiles.length,
      2,
      "both profiles, even for a process never switched out",
    );
    assert.equal(
      `${strings[cpu!.sample_type.type_strindex]}/${strings[cpu!.sample_type.unit_strindex]}`,
      "samples/count",
    );
    assert.equal(
      `${strings[off!.sample_type.type_strindex]}/${strings[off!.sample_type.unit_strindex]}`,
      "off_cpu/nanoseconds",
    );
    assert.equal(Number(cpu!.period), Math.round(1e9 / 99));
    assert.equal(Number(off!.period), 0, "switches are not sampled: no period");
    assert.equal(off!.period_type, null, "nor a period type");
    assert.equal(BigInt(off!.time_unix_nano), BigInt(START_NS));
    assert.equal(Number(off!.duration_nano), 1_000_250_000);
    assert.notDeepEqual(off!.profile_id, cpu!.profile_id, "each profile has an id of its own");
  }
  const flat = flattenRequest(request).map((s) =>
    `${s.resource["process.pid"]}/${s.attributes["thread.id"]} ${s.sampleType} ${
      s.frames.join(";")
    } ${s.values}`
  );
  assert.deepEqual(flat, [
    "100/100 samples/count main;a;b;c 4",
    "100/100 off_cpu/nanoseconds main;a;b;c 7000",
    "100/101 off_cpu/nanoseconds main;a;b;c;do_syscall_64 2000000",
    "200/200 samples/count ;handler 2",
  ]);
});

Deno.test("encodeOtlpProfiles() without off-CPU time writes one Profile a scope", () => {
  const request = decodeRequest(
    encodeOtlpProfiles({ ...profile, offCpu: false }, { resourceAttributes, scope }),
  );
  assert.deepEqual(request.resource_profiles.map((rp) => rp.scope_profiles[0]!.profiles.length), [1, 1, 1]);
  assert.ok(!request.dictionary.string_table.includes("off_cpu"));
});

Deno.test("encodeOtlpProfiles() of a probe-event profile writes one events/count Profile per event, named by an attribute", () => {
  const events: Profile = {
    ...profile,
    periodNs: 0,
    events: ["uprobe:/usr/bin/chain:c", "tracepoint:syscalls:sys_enter_read"],
    samples: [
      { locations: [0, 1, 2, 3], count: 4, event: 0, pid: 100, tid: 100, comm: "chain" },
      // The same stack and thread, another event: a sample of the other Profile.
      { locations: [0, 1, 2, 3], count: 6, event: 1, pid: 100, tid: 100, comm: "chain" },
      // The same identity as the first: merged, its hits added; its own `event` label is left out.
      {
        locations: [0, 1, 2, 3],
        count: 1,
        event: 0,
        pid: 100,
        tid: 100,
        comm: "chain",
        labels: [{ key: "event", value: "x" }],
      },
      { locations: [5, 6], count: 2, event: 9, pid: 200, tid: 200, comm: "python3" }, // no such event
    ],
  };
  const bytes = encodeOtlpProfiles(events, { resourceAttributes, scope });
  const { request: requestType } = loadOtelSchema();
  assert.equal(requestType.verify(requestType.decode(bytes)), null);
  const request = decodeRequest(bytes);
  const strings: string[] = request.dictionary.string_table;
  const attributeText = (index: number) => {
    const entry = request.dictionary.attribute_table[index]!;
    return `${strings[entry.key_strindex]}=${entry.value?.string_value}`;
  };
  const typeText = (t: { type_strindex: number; unit_strindex: number }) =>
    `${strings[t.type_strindex]}/${strings[t.unit_strindex]}`;
  for (const rp of request.resource_profiles) {
    const profiles = rp.scope_profiles[0]!.profiles;
    // Every event for every process, even never hit there; the stray sample's event comes last.
    assert.deepEqual(profiles.map((p) => p.attribute_indices.map(attributeText)), [
      ["event=uprobe:/usr/bin/chain:c"],
      ["event=tracepoint:syscalls:sys_enter_read"],
      ["event=[unknown event]"],
    ]);
    for (const p of profiles) {
      assert.equal(typeText(p.sample_type), "events/count");
      assert.equal(typeText(p.period_type), "events/count");
      assert.equal(Number(p.period), 1);
    }
  }
  const flat = flattenRequest(request).map((s) =>
    `${s.resource["process.pid"]}/${s.attributes["thread.id"]} ${s.sampleType} ${s.attributes["event"]} ${
      s.frames.join(";")
    } ${s.values}`
  );
  assert.deepEqual(flat, [
    "100/100 events/count uprobe:/usr/bin/chain:c main;a;b;c 5",
    "100/100 events/count tracepoint:syscalls:sys_enter_read main;a;b;c 6",
    "200/200 events/count [unknown event] ;handler 2",
  ]);
  assert.ok(!strings.includes("x"), "the sample's own event label is not written");
});
