/**
 * Encodes a {@linkcode Profile} as an OpenTelemetry profiles export request: the
 * `ExportProfilesServiceRequest` of the OTLP profiles signal (`v1development`), the message both OTLP/HTTP
 * and OTLP/gRPC carry.
 *
 * What the output contains:
 * - One `ResourceProfiles` per process: the process is the OpenTelemetry resource that produced its samples,
 *   so `process.pid`, `process.executable.*` and `container.id` are resource attributes, as the semantic
 *   conventions define them, and every backend can filter and group by them without knowing profiles.
 *   Each holds one `ScopeProfiles` (the profiler as instrumentation scope) with one `Profile`.
 * - One `ProfilesDictionary` shared by all of them: strings, mappings, locations, functions, stacks and
 *   attributes are written once per request. Every table starts with its zero value, as the schema requires
 *   (the link table's zero entry has all-zero ids of the full 16 and 8 bytes, as it recommends).
 * - Each `Profile` has `sample_type` samples/count, `period_type` cpu/nanoseconds and `period` the sampling
 *   period in ns (what the OpenTelemetry eBPF profiler writes); a sample's single value is its count.
 * - A profile recorded with off-CPU time (`Profile.offCpu`, or any sample with `offCpuNs`) gives each `ScopeProfiles` a second `Profile`
 *   after that one, of `sample_type` off_cpu/nanoseconds (the schema's own example for off-CPU time), whose
 *   samples' single value is the ns their thread spent switched out with that stack; it has no period, as
 *   switches are not sampled. A `Profile` holds values of one type only, so a second kind of value takes a
 *   second `Profile`, as the OpenTelemetry eBPF profiler writes its off-CPU samples (it names the type
 *   `events`, which says less). Both profiles are written for every process, even empty, so that a
 *   receiver can tell "never switched out" from "not recorded". Without off-CPU time the request is as
 *   before.
 * - A profile of probe events (`Profile.events`, `record -e`) gives each `ScopeProfiles` one `Profile` per
 *   event instead, in the order of `events`, each of `sample_type` events/count whose samples' single
 *   value is their hits, `period_type` events/count and `period` 1 (every hit is recorded). The type is
 *   `events/count`, not the event's name: backends key a profile's kind on its sample type (Grafana
 *   Pyroscope joins type and unit with `:` into a profile type id), so a name such as
 *   `uprobe:/usr/bin/app:handle` would make a malformed type and a new kind per probe, where a fixed
 *   type of unit `count` reads as a count anywhere. The event goes in an attribute `event` instead (the
 *   pprof label's name, so a conversion to pprof keeps `-tagfocus event=`): on the `Profile`, which
 *   says which event an empty one is for, and on each of its samples, where backends that only keep
 *   sample attributes as labels still tell the events apart. One `Profile` per event, like off-CPU
 *   time's own, since a sample of one event means nothing summed with another's; each is written for
 *   every process, even empty, for the same reason as off-CPU time's.
 *   Samples carry `thread.id` and `thread.name` as attributes, and each of their labels (Go's pprof
 *   labels) as a string attribute named by its key (a key that is one of the thread attributes' is left
 *   out, as keys are unique in a list); their identity is (stack, thread, labels).
 * - Locations carry `profile.frame.type` (see {@linkcode FRAME_TYPES}); mappings carry
 *   `process.executable.build_id.gnu` when the file has a GNU build ID. Kernel addresses get their high
 *   half back (see `KernelAddress`).
 *
 * @example
 * ```ts
 * import { encodeOtlpProfiles } from "./otlp.ts";
 * import type { Profile } from "../profile/profile.ts";
 * declare const profile: Profile;
 * const body = encodeOtlpProfiles(profile, {
 *   resourceAttributes: (pid) => [["host.name", "web-1"], ["process.pid", pid]],
 *   scope: { name: "omniprof", version: "0.1.0" },
 * });
 * // POST body (gzip) to http://collector:4318/v1development/profiles as application/x-protobuf
 * ```
 *
 * @module
 */

import type { FrameKind, Profile } from "../profile/profile.ts";
import { runtimeFrameKinds } from "../profile/frame_kinds.ts";
import { frameKindOfMapping } from "./pprof.ts";
import { hasOffCpuTime, sampleOffCpuNs } from "../profile/wall_time.ts";
import { sampleEventIndex, UNKNOWN_EVENT } from "../profile/events.ts";
import { ProtobufWriter, WireType } from "./protobuf_writer.ts";

/** An attribute value: a string, a boolean, an integer (`int_value`) or another number (`double_value`). */
export type OtlpValue = string | boolean | number;

/** Attributes as key/value pairs; keys must be unique within one list. */
export type OtlpAttributes = ReadonlyArray<readonly [key: string, value: OtlpValue]>;

/** The key of the attribute that names the probe event of a `Profile` and its samples. */
export const EVENT_ATTRIBUTE = "event";

/** The key of the frame type attribute of locations (OpenTelemetry semantic conventions). */
export const FRAME_TYPE_ATTRIBUTE = "profile.frame.type";

/**
 * `profile.frame.type` of each frame kind: the well-known values of the semantic conventions where one
 * applies (they MUST be used then; each runtime's descriptor gives its own), the kind's own name otherwise
 * (custom values are allowed).
 */
export const FRAME_TYPES: Readonly<Record<FrameKind, string>> = {
  kernel: "kernel",
  native: "native",
  unknown: "unknown",
  error: "error",
  ...Object.fromEntries(runtimeFrameKinds().map((kind) => [kind.name, kind.otlpFrameType])),
};

/** The semantic conventions version whose attribute names this encoder writes. */
export const SEMCONV_SCHEMA_URL = "https://opentelemetry.io/schemas/1.34.0";

/** Options of {@linkcode encodeOtlpProfiles}. */
export interface OtlpEncodeOptions {
  /**
   * The attributes of the resource of process `pid` (host and process attributes), called once per
   * process of the profile.
   */
  resourceAttributes: (pid: number) => OtlpAttributes;
  /** The instrumentation scope: the profiler's name and version. */
  scope: { name: string; version: string };
  /** Returns a fresh 16-byte profile id (default: random). */
  profileId?: () => Uint8Array;
}

interface OtlpSample {
  stackIndex: number;
  threadId: number;
  threadName: number;
  /** Attribute indices of the sample's labels (led by its event's, in a probe-event profile). */
  labels: number[];
  /** Index of its event in the request's list of events, -1 in a profile of CPU samples. */
  event: number;
  count: number;
  /** Off-CPU ns of the samples merged into this one (0 for CPU samples). */
  offCpuNs: number;
}

/** The attributes every sample has, which a label may not name again. */
const THREAD_ATTRIBUTES: ReadonlySet<string> = new Set(["thread.id", "thread.name"]);

const TWO_POW_32 = 4294967296;
const TWO_POW_64 = 18446744073709551616;
const KERNEL_HIGH_HALF = 0xffffffff;

/** Interns values into a dictionary table whose entry 0 is the zero value. */
class Interner {
  readonly #index = new Map<string, number>();
  size: number;

  constructor(zeroKey: string) {
    this.#index.set(zeroKey, 0);
    this.size = 1;
  }

  /** The index of `key`; a new key gets the next index (compare with `size` before to tell). */
  intern(key: string): number {
    let index = this.#index.get(key);
    if (index === undefined) {
      index = this.size++;
      this.#index.set(key, index);
    }
    return index;
  }
}

/**
 * Encodes `profile` as an uncompressed `ExportProfilesServiceRequest`. Samples without a stack are
 * written with the empty stack (index 0). Throws a `RangeError` when a location refers to a missing
 * mapping or a sample to a missing location.
 */
export function encodeOtlpProfiles(profile: Profile, options: OtlpEncodeOptions): Uint8Array {
  const { mappings, locations, samples } = profile;
  const nMappings = mappings.length;
  const nLocations = locations.length;
  const strings: string[] = [""];
  const stringIndex = new Map<string, number>([["", 0]]);
  const str = (value: string): number => {
    let index = stringIndex.get(value);
    if (index === undefined) {
      index = strings.length;
      strings.push(value);
      stringIndex.set(value, index);
    }
    return index;
  };

  // Attribute table: entries keyed by key and typed value; the encoded entries are kept in order.
  const attributes = new Interner("");
  const attributeEntries: Array<readonly [number, OtlpValue]> = [[0, ""]];
  const attribute = (key: string, value: OtlpValue): number => {
    const id = `${key}\0${typeof value}\0${value}`;
    const before = attributes.size;
    const index = attributes.intern(id);
    if (index === before) attributeEntries.push([str(key), value]);
    return index;
  };

  const d = new ProtobufWriter(4096 + nLocations * 24 + samples.length * 8);

  // mapping_table (1): entry 0 is Mapping{}; profile mapping i is entry i + 1.
  emptyMessage(d, 1);
  for (let i = 0; i < nMappings; i++) {
    const m = mappings[i]!;
    const kernel = frameKindOfMapping(m.fileName) === "kernel";
    const fileName = str(m.fileName);
    const buildId = m.buildId === "" ? 0 : attribute("process.executable.build_id.gnu", m.buildId);
    const mark = d.beginLengthDelimited(1);
    writeAddress(d, 1, m.start, kernel);
    writeAddress(d, 2, m.end, kernel);
    if (m.fileOffset !== 0) d.writeVarintField(3, m.fileOffset);
    if (fileName !== 0) d.writeVarintField(4, fileName);
    if (buildId !== 0) d.writePackedVarints(5, [buildId]);
    d.endLengthDelimited(mark);
  }

  // function_table (3) entries, deduplicated by (name, file); written after the locations that make them.
  const functions = new Interner("\0");
  const functionNames: number[] = [0];
  const functionFiles: number[] = [0];

  // location_table (2): entry 0 is Location{}; profile location i is entry i + 1.
  emptyMessage(d, 2);
  for (let i = 0; i < nLocations; i++) {
    const location = locations[i]!;
    const m = location.mapping;
    if (m !== -1 && !(Number.isInteger(m) && m >= 0 && m < nMappings)) {
      throw new RangeError(
        `Cannot encode OTLP profiles: location ${i} refers to mapping ${m} of ${nMappings}`,
      );
    }
    const { functionName, sourceFile, line } = location;
    let functionIndex = 0;
    if (functionName !== "" || sourceFile !== "") {
      const before = functions.size;
      functionIndex = functions.intern(functionName + "\0" + sourceFile);
      if (functionIndex === before) {
        functionNames.push(str(functionName));
        functionFiles.push(str(sourceFile));
      }
    }
    const frameType = attribute(FRAME_TYPE_ATTRIBUTE, FRAME_TYPES[location.kind] ?? location.kind);
    const mark = d.beginLengthDelimited(2);
    if (m !== -1) d.writeVarintField(1, m + 1);
    writeAddress(d, 2, location.address, location.kind === "kernel");
    if (functionIndex !== 0 || line !== 0) {
      const l = d.beginLengthDelimited(3);
      if (functionIndex !== 0) d.writeVarintField(1, functionIndex);
      if (line !== 0) d.writeInt64Field(2, line);
      d.endLengthDelimited(l);
    }
    d.writePackedVarints(4, [frameType]);
    d.endLengthDelimited(mark);
  }

  for (let f = 0; f < functionNames.length; f++) {
    const mark = d.beginLengthDelimited(3);
    if (functionNames[f] !== 0) d.writeVarintField(1, functionNames[f]!);
    if (functionFiles[f] !== 0) d.writeVarintField(3, functionFiles[f]!);
    d.endLengthDelimited(mark);
  }

  // link_table (4): only the zero entry, with full-length zero ids.
  const link = d.beginLengthDelimited(4);
  d.writeBytesField(1, new Uint8Array(16));
  d.writeBytesField(2, new Uint8Array(8));
  d.endLengthDelimited(link);

  // Stacks, sample attributes and the per-process grouping, before the tables they fill are written.
  // Samples with the same identity (stack and attributes) in one process are merged, as the schema asks.
  // A probe-event profile's events, and one for samples that name none of them, added when one does.
  const eventNames: string[] | null = profile.events === undefined ? null : [...profile.events];
  let unknownEvent = -1;
  const stacks = new Interner("");
  const stackLists: number[][] = [[]];
  const samplesOfPid = new Map<number, Map<string, OtlpSample>>();
  for (let s = 0; s < samples.length; s++) {
    const sample = samples[s]!;
    const stack = sample.locations;
    for (let j = 0; j < stack.length; j++) {
      const index = stack[j]!;
      if (!(index >= 0 && index < nLocations)) {
        throw new RangeError(
          `Cannot encode OTLP profiles: sample ${s} refers to location ${index} of ${nLocations}`,
        );
      }
    }
    let stackIndex = 0;
    if (stack.length > 0) {
      const before = stacks.size;
      stackIndex = stacks.intern(stack.join(","));
      if (stackIndex === before) stackLists.push(stack);
    }
    const threadId = attribute("thread.id", sample.tid);
    const threadName = sample.comm === "" ? 0 : attribute("thread.name", sample.comm);
    let ofPid = samplesOfPid.get(sample.pid);
    if (ofPid === undefined) {
      ofPid = new Map();
      samplesOfPid.set(sample.pid, ofPid);
    }
    const labels = (sample.labels ?? []).filter((label, i, all) =>
      !THREAD_ATTRIBUTES.has(label.key) && all.findIndex((other) => other.key === label.key) === i &&
      (eventNames === null || label.key !== EVENT_ATTRIBUTE)
    ).map((label) => attribute(label.key, label.value));
    let event = -1;
    if (eventNames !== null) {
      event = sampleEventIndex(sample, profile.events ?? []);
      if (event === -1) {
        if (unknownEvent === -1) {
          unknownEvent = eventNames.length;
          eventNames.push(UNKNOWN_EVENT);
        }
        event = unknownEvent;
      }
      labels.unshift(attribute(EVENT_ATTRIBUTE, eventNames[event]!));
    }
    const identity = `${stackIndex},${threadId},${threadName},${labels.join(",")}`;
    const merged = ofPid.get(identity);
    const offCpuNs = sampleOffCpuNs(sample);
    if (merged === undefined) {
      ofPid.set(identity, { stackIndex, threadId, threadName, labels, event, count: sample.count, offCpuNs });
    } else {
      merged.count += sample.count;
      merged.offCpuNs += offCpuNs;
    }
  }

  // The request: one ResourceProfiles per process, then the dictionary (field 2).
  const typeSamples = str("samples");
  const unitCount = str("count");
  const typeCpu = str("cpu");
  const unitNanoseconds = str("nanoseconds");
  const offCpu = hasOffCpuTime(profile);
  const typeOffCpu = offCpu ? str("off_cpu") : 0;
  const typeEvents = eventNames !== null ? str("events") : 0;
  const eventAttributes = (eventNames ?? []).map((name) => attribute(EVENT_ATTRIBUTE, name));
  const periodNs = Math.round(profile.periodNs);
  const startNs = Math.max(0, Math.round(profile.startTimeNs));
  const durationNs = Math.max(0, Math.round(profile.durationNs));
  const newProfileId = options.profileId ?? randomProfileId;
  const out = new ProtobufWriter(1024 + samples.length * 16 + samplesOfPid.size * 256 + d.length);
  const pids = [...samplesOfPid.keys()].sort((a, b) => a - b);
  for (const pid of pids) {
    const rp = out.beginLengthDelimited(1);
    const resource = out.beginLengthDelimited(1);
    for (const [key, value] of options.resourceAttributes(pid)) {
      const kv = out.beginLengthDelimited(1);
      out.writeStringField(1, key);
      writeAnyValue(out, 2, value);
      out.endLengthDelimited(kv);
    }
    out.endLengthDelimited(resource);

    const sp = out.beginLengthDelimited(2);
    const scope = out.beginLengthDelimited(1);
    out.writeStringField(1, options.scope.name);
    out.writeStringField(2, options.scope.version);
    out.endLengthDelimited(scope);

    // Profile: time_unix_nano is a fixed64, which the writer has no method for, so the profile is built
    // on its own and its fields concatenated with that one (fields may come in any order).
    const ofPid = samplesOfPid.get(pid)!;
    if (eventNames !== null) {
      for (let e = 0; e < eventNames.length; e++) {
        const p = new ProtobufWriter(256 + ofPid.size * 16);
        writeValueType(p, 1, typeEvents, unitCount);
        for (const sample of ofPid.values()) {
          if (sample.event === e && sample.count > 0) writeSample(p, sample, sample.count);
        }
        if (durationNs !== 0) p.writeVarintField(4, durationNs);
        writeValueType(p, 5, typeEvents, unitCount);
        p.writeInt64Field(6, 1); // every hit is recorded
        p.writeBytesField(7, newProfileId());
        p.writePackedVarints(11, [eventAttributes[e]!]);
        out.writeBytesField(2, concat(fixed64Field(3, startNs), p.finish()));
      }
    } else {
      const p = new ProtobufWriter(256 + ofPid.size * 16);
      writeValueType(p, 1, typeSamples, unitCount);
      for (const sample of ofPid.values()) {
        // An off-CPU sample (count 0) belongs in the off-CPU profile only; before off-CPU time existed,
        // no sample had count 0, so this leaves a CPU profile's bytes as they were.
        if (offCpu && !(sample.count > 0)) continue;
        writeSample(p, sample, sample.count);
      }
      if (durationNs !== 0) p.writeVarintField(4, durationNs);
      writeValueType(p, 5, typeCpu, unitNanoseconds);
      if (periodNs !== 0) p.writeInt64Field(6, periodNs);
      p.writeBytesField(7, newProfileId());
      out.writeBytesField(2, concat(fixed64Field(3, startNs), p.finish()));

      if (offCpu) {
        const o = new ProtobufWriter(256 + ofPid.size * 16);
        writeValueType(o, 1, typeOffCpu, unitNanoseconds);
        for (const sample of ofPid.values()) {
          const ns = Math.round(sample.offCpuNs);
          if (ns > 0) writeSample(o, sample, ns);
        }
        if (durationNs !== 0) o.writeVarintField(4, durationNs);
        o.writeBytesField(7, newProfileId());
        out.writeBytesField(2, concat(fixed64Field(3, startNs), o.finish()));
      }
    }

    out.writeStringField(3, SEMCONV_SCHEMA_URL);
    out.endLengthDelimited(sp);
    out.writeStringField(3, SEMCONV_SCHEMA_URL);
    out.endLengthDelimited(rp);
  }

  // The rest of the dictionary: string_table (5), attribute_table (6), stack_table (7).
  for (const value of strings) d.writeStringField(5, value);
  emptyMessage(d, 6);
  for (let a = 1; a < attributeEntries.length; a++) {
    const [key, value] = attributeEntries[a]!;
    const mark = d.beginLengthDelimited(6);
    d.writeVarintField(1, key);
    writeAnyValue(d, 2, value);
    d.endLengthDelimited(mark);
  }
  emptyMessage(d, 7);
  for (let s = 1; s < stackLists.length; s++) {
    const mark = d.beginLengthDelimited(7);
    const stack = stackLists[s]!;
    const indices = new Array<number>(stack.length);
    for (let j = 0; j < stack.length; j++) indices[j] = stack[j]! + 1;
    d.writePackedVarints(1, indices);
    d.endLengthDelimited(mark);
  }
  out.writeBytesField(2, d.finish());
  return out.finish();
}

/** Writes one `Sample` (field 2 of a `Profile`) with its stack, attributes and single value. */
function writeSample(p: ProtobufWriter, sample: OtlpSample, value: number): void {
  const mark = p.beginLengthDelimited(2);
  if (sample.stackIndex !== 0) p.writeVarintField(1, sample.stackIndex);
  const thread = sample.threadName === 0 ? [sample.threadId] : [sample.threadId, sample.threadName];
  p.writePackedVarints(2, [...thread, ...sample.labels]);
  const values = p.beginLengthDelimited(4);
  p.writeInt64(value);
  p.endLengthDelimited(values);
  p.endLengthDelimited(mark);
}

function randomProfileId(): Uint8Array {
  const id = new Uint8Array(16);
  // An all-zero id is invalid; 2^-128 is not worth a loop, but the fix costs nothing.
  do crypto.getRandomValues(id); while (id.every((byte) => byte === 0));
  return id;
}

function emptyMessage(w: ProtobufWriter, field: number): void {
  w.writeTag(field, WireType.LengthDelimited);
  w.writeVarint(0);
}

function writeValueType(w: ProtobufWriter, field: number, type: number, unit: number): void {
  const mark = w.beginLengthDelimited(field);
  w.writeVarintField(1, type);
  w.writeVarintField(2, unit);
  w.endLengthDelimited(mark);
}

function writeAnyValue(w: ProtobufWriter, field: number, value: OtlpValue): void {
  if (typeof value === "number" && !Number.isSafeInteger(value)) {
    // double_value is a fixed64, which the writer cannot append in place: the AnyValue is built by hand
    // and embedded as bytes (an embedded message is a length-delimited field like bytes).
    const bytes = new Uint8Array(9);
    bytes[0] = 4 * 8 + WireType.Fixed64;
    new DataView(bytes.buffer).setFloat64(1, value, true);
    w.writeBytesField(field, bytes);
    return;
  }
  const mark = w.beginLengthDelimited(field);
  if (typeof value === "string") w.writeStringField(1, value);
  else if (typeof value === "boolean") w.writeBoolField(2, value);
  else w.writeInt64Field(3, value);
  w.endLengthDelimited(mark);
}

function writeAddress(w: ProtobufWriter, field: number, value: number, kernel: boolean): void {
  // A frame-pointer walk that ran into garbage yields "addresses" up to 2^64 - 1, which a double may round
  // up to 2^64: such a frame keeps its place in the stack but is written without an address (unknown).
  if (value === 0 || !(value > 0 && value < TWO_POW_64)) return;
  w.writeTag(field, WireType.Varint);
  if (kernel && value > 0 && value < TWO_POW_32) w.writeVarint64(value, KERNEL_HIGH_HALF);
  else w.writeVarint(value);
}

/** A fixed64 field holding `value` (an integer below 2^64, exact below 2^53). */
function fixed64Field(field: number, value: number): Uint8Array {
  const bytes = new Uint8Array(9);
  bytes[0] = field * 8 + WireType.Fixed64;
  const view = new DataView(bytes.buffer);
  view.setUint32(1, value % TWO_POW_32, true);
  view.setUint32(5, Math.floor(value / TWO_POW_32), true);
  return bytes;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
