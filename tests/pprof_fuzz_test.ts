/**
 * Fuzzes the pprof reader (`decodePprof`, the reader of `report` and `diff`): omniprof's own profiles
 * damaged every way (truncated, bit-flipped, cut, repeated, spliced, before or after gzip), messages
 * built field by field with hostile values (ids on the 2^32 and 2^53 edges, string indices past the
 * table, unknown fields and wire types, nested groups, long packed lists, locations of many inlined lines
 * referred to many times), and plain garbage, raw or gzip-wrapped. Each must decode to a consistent
 * profile within the bounds it was decoded with, or be refused with "Cannot decode pprof: ..."; see
 * `lib/testing/fuzz.ts` for what fails the test.
 *
 * @module
 */
import assert from "node:assert/strict";
import { gzipSync } from "node:zlib";
import { encodePprof } from "../lib/output/pprof.ts";
import { decodePprof, PPROF_LIMITS, type PprofLimits } from "../lib/output/pprof_reader.ts";
import { ProtobufWriter, WireType } from "../lib/output/protobuf_writer.ts";
import type { Profile } from "../lib/profile/profile.ts";
import { below, type FuzzCase, garbage, mutate, pick, registerFuzzTest } from "../lib/testing/fuzz.ts";

/** Bounds small enough for the generator to cross them, so the bound checks are fuzzed too. */
const SMALL_LIMITS: PprofLimits = {
  maxBytes: 1 << 20,
  maxSamples: 300,
  maxFramesPerSample: 500,
  maxFrames: 20_000,
  maxLocations: 2000,
  maxFunctions: 500,
  maxMappings: 50,
  maxStrings: 3000,
  maxStringBytes: 256,
  maxLabels: 1000,
  maxSampleTypes: 4,
};

const KINDS = ["native", "kernel", "python", "v8"] as const;

/** A small random profile, as omniprof writes them. */
function randomProfile(random: () => number): Profile {
  const nMappings = below(random, 4);
  const nLocations = 1 + below(random, 40);
  const locations: Profile["locations"] = Array.from({ length: nLocations }, (_, i) => {
    const kind = pick(random, KINDS);
    return {
      kind,
      mapping: kind === "native" && nMappings > 0 ? below(random, nMappings) : -1,
      address: kind === "kernel" ? 0x81000000 + i * 64 : 0x400000 + i * 16,
      functionName: random() < 0.1 ? "" : `fn_${below(random, 1000)}${random() < 0.05 ? ";\n" : ""}`,
      sourceFile: random() < 0.5 ? `src/f${below(random, 9)}.c` : "",
      line: below(random, 500),
    };
  });
  return {
    startTimeNs: 1.7e18,
    durationNs: below(random, 1e9),
    periodNs: pick(random, [0, 1e6, 1e7]),
    mappings: Array.from({ length: nMappings }, (_, m) => ({
      start: 0x400000 * (m + 1),
      end: 0x400000 * (m + 2),
      fileOffset: below(random, 4) * 4096,
      fileName: `/usr/lib/lib${m}.so`,
      buildId: random() < 0.5 ? `b${m}` : "",
      hasFunctions: random() < 0.5,
    })),
    locations,
    samples: Array.from({ length: 1 + below(random, 30) }, (_, s) => ({
      locations: Array.from({ length: 1 + below(random, 20) }, () => below(random, nLocations)),
      count: 1 + below(random, 50),
      pid: below(random, 1 << 22),
      tid: s,
      comm: `comm${below(random, 5)}`,
    })),
  };
}

/** Ids and indices on the edges: 0, small, the 32-bit and 53-bit boundaries, 2^64 - 1. */
function edgyNumber(random: () => number, w: ProtobufWriter): void {
  switch (below(random, 8)) {
    case 0:
      return w.writeVarint(0);
    case 1:
      return w.writeVarint64(0xffffffff, 0xffffffff);
    case 2:
      return w.writeVarint64(below(random, 2 ** 32), 0x200000 + below(random, 4));
    case 3:
      return w.writeVarint64(0xffffffff, below(random, 3));
    case 4:
      return w.writeVarint(2 ** 31 + below(random, 3) - 1);
    default:
      return w.writeVarint(1 + below(random, 12));
  }
}

/** A varint field `field` holding an edgy number. */
function edgyField(random: () => number, w: ProtobufWriter, field: number): void {
  w.writeTag(field, WireType.Varint);
  edgyNumber(random, w);
}

/**
 * A random field that no pprof reader expects: unknown numbers (or, with `known`, numbers the reader
 * knows, probably of the wrong wire type), every wire type, nested groups.
 */
function strayField(random: () => number, w: ProtobufWriter, known = false, depth = 0): void {
  const field = known ? 1 + below(random, 12) : 13 + below(random, 20);
  switch (below(random, 5)) {
    case 0:
      return edgyField(random, w, field);
    case 1:
      w.writeTag(field, WireType.Fixed64);
      for (let i = 0; i < 8; i++) w.writeVarint(below(random, 128));
      return;
    case 2:
      return w.writeBytesField(field, garbage(random, 16));
    case 3:
      w.writeTag(field, WireType.Fixed32);
      for (let i = 0; i < 4; i++) w.writeVarint(below(random, 128));
      return;
    default:
      w.writeTag(field, WireType.StartGroup);
      if (depth < 70 && random() < 0.9) strayField(random, w, known, depth + 1);
      if (random() < 0.95) w.writeTag(field, WireType.EndGroup);
  }
}

/**
 * A pprof message built field by field: a consistent core (every id declared once, every index in the
 * table), with hostile values mixed in at random (edgy and dangling ids, duplicate declarations, long
 * packed lists, many inlined lines, unknown fields and groups, sample values that do not match the sample
 * types), the messages in random order.
 */
function craftedPprof(random: () => number): Uint8Array {
  // Half the messages are clean, so that the reader's later stages see well-formed input too.
  const rate = random() < 0.5 ? 0 : 0.03;
  const hostile = () => random() < rate;
  const id = (n: number, w: ProtobufWriter, field: number) => {
    if (hostile()) edgyField(random, w, field);
    else w.writeVarintField(field, 1 + below(random, n));
  };
  const strings = [
    "",
    "samples",
    "count",
    "nanoseconds",
    "pid",
    "tid",
    "comm",
    "thread_comm",
    "main",
    "lib.so",
  ];
  const nStrings = hostile() ? below(random, strings.length) : strings.length;
  const str = (w: ProtobufWriter, field: number) => {
    if (hostile()) edgyField(random, w, field);
    else w.writeVarintField(field, below(random, nStrings));
  };
  const nTypes = below(random, 4);
  const messages: ((w: ProtobufWriter) => void)[] = [];
  for (let t = 0; t < nTypes; t++) {
    messages.push((w) => {
      const m = w.beginLengthDelimited(1);
      str(w, 1);
      str(w, 2);
      w.endLengthDelimited(m);
    });
  }
  for (let n = 1 + below(random, 12); n > 0; n--) {
    messages.push((w) => {
      const m = w.beginLengthDelimited(2);
      const length = below(random, hostile() ? 3000 : 24);
      const frames = Array.from({ length }, () => 1 + below(random, 8));
      if (random() < 0.5) w.writePackedVarints(1, frames);
      else for (const frame of frames) w.writeVarintField(1, frame);
      if (hostile()) id(8, w, 1);
      const values = hostile() ? below(random, 6) : Math.max(1, nTypes);
      for (let v = 0; v < values; v++) w.writeInt64Field(2, below(random, 20) - 2);
      for (let l = below(random, 4); l > 0; l--) {
        const label = w.beginLengthDelimited(3);
        str(w, 1);
        if (random() < 0.5) str(w, 2);
        else w.writeInt64Field(3, below(random, 1 << 20));
        w.endLengthDelimited(label);
      }
      if (random() < 0.1) strayField(random, w, hostile());
      w.endLengthDelimited(m);
    });
  }
  for (let mapping = 1; mapping <= 4; mapping++) {
    if (hostile()) continue;
    messages.push((w) => {
      const m = w.beginLengthDelimited(3);
      if (!hostile()) w.writeVarintField(1, hostile() ? 1 : mapping);
      for (const field of [2, 3, 4]) {
        if (hostile()) edgyField(random, w, field);
        else w.writeVarintField(field, below(random, 1 << 30));
      }
      str(w, 5);
      if (random() < 0.3) str(w, 6);
      w.endLengthDelimited(m);
    });
  }
  for (let location = 1; location <= 8; location++) {
    if (hostile()) continue;
    messages.push((w) => {
      const m = w.beginLengthDelimited(4);
      if (!hostile()) w.writeVarintField(1, hostile() ? 1 : location);
      if (random() < 0.7) id(4, w, 2);
      if (hostile()) edgyField(random, w, 3);
      else w.writeVarintField(3, below(random, 1 << 30));
      for (let l = below(random, hostile() ? 400 : 4); l > 0; l--) {
        const line = w.beginLengthDelimited(4);
        id(5, w, 1);
        w.writeInt64Field(2, below(random, 1000) - 10);
        w.endLengthDelimited(line);
      }
      w.endLengthDelimited(m);
    });
  }
  for (let fn = 1; fn <= 5; fn++) {
    if (hostile()) continue;
    messages.push((w) => {
      const m = w.beginLengthDelimited(5);
      if (!hostile()) w.writeVarintField(1, hostile() ? 1 : fn);
      for (const field of [2, 3, 4]) if (random() < 0.7) str(w, field);
      w.endLengthDelimited(m);
    });
  }
  messages.push((w) => {
    for (const field of [9, 10, 12]) {
      if (hostile()) edgyField(random, w, field);
      else w.writeVarintField(field, below(random, 1e9));
    }
    const m = w.beginLengthDelimited(11);
    str(w, 2);
    w.endLengthDelimited(m);
  });
  for (let n = below(random, 3); n > 0; n--) messages.push((w) => strayField(random, w, hostile()));
  messages.push((w) => {
    const table = strings.slice(0, nStrings);
    if (hostile()) table[0] = "not empty";
    if (hostile()) table.push("x".repeat(300));
    for (const text of table) w.writeStringField(6, text);
  });
  // Shuffled: references may come before what they refer to.
  for (let i = messages.length - 1; i > 0; i--) {
    const j = below(random, i + 1);
    [messages[i], messages[j]] = [messages[j]!, messages[i]!];
  }
  const w = new ProtobufWriter();
  for (const message of messages) message(w);
  return w.finish();
}

/** One location of `lines` inlined lines, referred to `refs` times by one sample: lines × refs frames. */
function inlineBomb(random: () => number): Uint8Array {
  const w = new ProtobufWriter();
  const fn = w.beginLengthDelimited(5);
  w.writeVarintField(1, 1);
  w.endLengthDelimited(fn);
  const location = w.beginLengthDelimited(4);
  w.writeVarintField(1, 1);
  for (let lines = 1 + below(random, 2000); lines > 0; lines--) {
    const line = w.beginLengthDelimited(4);
    w.writeVarintField(1, 1);
    w.endLengthDelimited(line);
  }
  w.endLengthDelimited(location);
  const sample = w.beginLengthDelimited(2);
  w.writePackedVarints(1, Array(1 + below(random, 2000)).fill(1));
  w.writeInt64Field(2, 1);
  w.endLengthDelimited(sample);
  w.writeStringField(6, "");
  return w.finish();
}

/** Checks a decoded profile: every index in range, every count positive, every bound kept. */
function checkProfile(profile: Profile, limits: PprofLimits): void {
  assert.ok(profile.mappings.length <= limits.maxMappings);
  assert.ok(profile.locations.length <= limits.maxLocations);
  assert.ok(profile.samples.length <= limits.maxSamples);
  for (const location of profile.locations) {
    assert.ok(Number.isInteger(location.mapping) && location.mapping >= -1);
    assert.ok(location.mapping < profile.mappings.length);
    assert.ok(location.functionName.length <= limits.maxStringBytes);
    assert.ok(Number.isFinite(location.address));
  }
  let frames = 0;
  for (const sample of profile.samples) {
    assert.ok(sample.count > 0);
    assert.ok(sample.locations.length <= limits.maxFramesPerSample);
    frames += sample.locations.length;
    for (const index of sample.locations) {
      assert.ok(Number.isInteger(index) && index >= 0 && index < profile.locations.length);
    }
  }
  assert.ok(frames <= limits.maxFrames);
}

registerFuzzTest(import.meta.url, {
  name: "decodePprof() on damaged, crafted and garbage input: a consistent profile within its bounds, " +
    "or Cannot decode pprof",
  cases: 4000,
  seed: 0x9b0f,
  makeCase(random): FuzzCase {
    const limits = random() < 0.5 ? SMALL_LIMITS : PPROF_LIMITS;
    let kind: string;
    let bytes: Uint8Array;
    switch (below(random, 8)) {
      case 0:
      case 1: {
        const damaged = mutate(random, encodePprof(randomProfile(random)));
        kind = `ours ${damaged.how}`;
        bytes = random() < 0.3 ? gzipSync(damaged.bytes) : damaged.bytes;
        break;
      }
      case 2: {
        const damaged = mutate(random, gzipSync(encodePprof(randomProfile(random))));
        kind = `ours gzipped, then ${damaged.how}`;
        bytes = damaged.bytes;
        break;
      }
      case 3:
      case 4:
        kind = "crafted";
        bytes = craftedPprof(random);
        if (random() < 0.3) bytes = mutate(random, bytes).bytes;
        break;
      case 5:
        kind = "inline bomb";
        bytes = inlineBomb(random);
        break;
      case 6:
        kind = "garbage";
        bytes = garbage(random, 512);
        break;
      default:
        kind = "gzip of garbage";
        bytes = random() < 0.5
          ? gzipSync(garbage(random, 512))
          : Uint8Array.of(0x1f, 0x8b, ...garbage(random, 64));
    }
    return { kind, run: () => checkProfile(decodePprof(bytes, limits), limits) };
  },
  isOwnError: (error) => error instanceof RangeError && error.message.startsWith("Cannot decode pprof: "),
});
