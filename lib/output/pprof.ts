/**
 * Encodes a {@linkcode Profile} as a pprof protocol buffer (the published `perftools.profiles.Profile`
 * message), raw or gzip-compressed as pprof files are stored on disk.
 *
 * What the output contains:
 * - `sample_type` is `[samples/count, cpu/nanoseconds]`; each sample's values are
 *   `[count, count * period]`. `period_type` is `cpu/nanoseconds` and `period` the sampling period in ns
 *   (rounded to an integer).
 * - A profile recorded with off-CPU time (`Profile.offCpu`, or any sample with `offCpuNs`) has a third sample type, `off_cpu/nanoseconds`:
 *   a CPU sample's values are `[count, count * period, 0]`, an off-CPU sample's `[0, 0, offCpuNs]`. A type
 *   of its own, rather than off-CPU time folded into `cpu`, lets `pprof -sample_index=cpu` keep showing CPU
 *   time alone and `-sample_index=off_cpu` the time threads were switched out; the reader recognizes the
 *   type by name and turns it back into `offCpuNs`. A profile without off-CPU time is written exactly as
 *   before, byte for byte.
 * - A profile of probe events (`Profile.events`, `record -e`) counts hits, not CPU time: `sample_type` is
 *   `[events/count]` alone, each sample's one value its count, `period_type` `events/count` and `period`
 *   1 (every hit is recorded: nothing is sampled). Each sample has a string label `event`, the event as
 *   the user named it (`uprobe:/usr/bin/app:handle`), right after `comm`, so that
 *   `pprof -tagfocus event=...` shows one event and `-tags` the hits of each; a sample's own label named
 *   `event` is left out, as it would read as that. The reader recognizes the `events/count` type and
 *   turns the labels back into `Profile.events` and each sample's `event`. The events recorded are also
 *   listed, in order, as comments `event=NAME` (`pprof -comments`): labels only name events that were
 *   hit, and an event never hit is worth knowing too; the reader takes its list of events from them.
 *   Off-CPU time has no place in such a profile and is not written.
 * - Mappings, locations and functions get ids from 1 in table order; functions are deduplicated by
 *   (name, source file). A location has one `Line`, or none when it has no function name, source file and
 *   line (an unsymbolized address pprof can symbolize itself). A run of locations in a sample whose every
 *   location but the last is `inlined` (calls inlined into the next) is written as one more location,
 *   after the table's, with a `Line` per call, innermost first, as pprof expects inlined frames; a
 *   location only ever seen inlined in such runs is not written alone.
 * - Sample labels: `pid` and `tid` are numeric labels; the thread name is the string label `comm`, the
 *   name `perf` users know for it (pprof shows every label key the same way, in `-tags`, `-tagfocus`,
 *   `-tagroot`, so the shortest familiar key is the most useful). An empty name writes no `comm` label.
 *   A sample's own labels (Go's pprof labels) follow as string labels, except one named `pid`, `tid` or
 *   `comm`, which would read as the profiler's.
 *
 * Frame kinds travel in mapping names, since pprof has no field for them:
 * - A location's kind is the one its mapping's file name implies: names starting with
 *   `[kernel.kallsyms]` (and kernel modules, `*.ko`) are kernel code, the pseudo names in
 *   {@linkcode KIND_MAPPING_NAMES} (`[unknown]`, and each runtime's: `Runtime.frameKind.pprofMappingName`)
 *   are their kind, anything else is native.
 *   Locations without a mapping (`mapping_id` 0) are native.
 * - A non-native frame without a mapping (mapping -1) is written in a pseudo mapping named for its kind,
 *   with zero start, limit and file offset and no build ID; the reader turns such mappings back into
 *   "no mapping" (-1) and drops them from the mapping table.
 * - A frame whose kind contradicts its mapping's name (say an interpreter's frame in the interpreter's library) keeps its kind
 *   and loses the mapping link: it is written as if its mapping were -1.
 * - Kernel addresses are kept as their low 32 bits in a Profile; the writer restores the high half
 *   (0xffffffff, see `KernelAddress`) for kernel locations and mappings named for the kernel, and the reader
 *   strips it again.
 *
 * So `decodePprof(encodePprof(p))` equals `p` whenever each location's kind agrees with its mapping and no
 * profile mapping looks like a pseudo mapping, except that `periodNs`, `startTimeNs` and `durationNs` are
 * rounded to integers.
 *
 * @example
 * ```ts
 * import { encodePprofGzip } from "./pprof.ts";
 * import type { Profile } from "../profile/profile.ts";
 * declare const profile: Profile;
 * Deno.writeFileSync("cpu.pb.gz", await encodePprofGzip(profile)); // then: pprof -top cpu.pb.gz
 * ```
 *
 * @module
 */

import type { FrameKind, Profile } from "../profile/profile.ts";
import { runtimeFrameKinds } from "../profile/frame_kinds.ts";
import { gzip } from "./gzip.ts";
import { hasOffCpuTime, sampleOffCpuNs } from "../profile/wall_time.ts";
import { hasEvents, sampleEventName } from "../profile/events.ts";
import { ProtobufWriter } from "./protobuf_writer.ts";

/**
 * The file name of the pseudo mapping that marks each non-native frame kind in a pprof file: the
 * profiler's own kinds, and each runtime's as its descriptor names it.
 */
export const KIND_MAPPING_NAMES: Readonly<Record<Exclude<FrameKind, "native">, string>> = {
  kernel: "[kernel.kallsyms]",
  unknown: "[unknown]",
  error: "[error]",
  ...Object.fromEntries(runtimeFrameKinds().map((kind) => [kind.name, kind.pprofMappingName])),
};

const kindByMappingName = new Map<string, FrameKind>(
  Object.entries(KIND_MAPPING_NAMES).map(([kind, name]) => [name, kind as FrameKind]),
);
const kernelModule = /\.ko(\.(gz|xz|zst))?$/;

/** The frame kind a mapping's file name implies (see the module documentation). */
export function frameKindOfMapping(fileName: string): FrameKind {
  const kind = kindByMappingName.get(fileName);
  if (kind !== undefined) return kind;
  if (fileName.startsWith("[kernel.kallsyms]") || kernelModule.test(fileName)) return "kernel";
  return "native";
}

/** Whether a mapping with these fields is a pseudo mapping that only carries a frame kind. */
export function isKindPseudoMapping(
  fileName: string,
  start: number,
  end: number,
  fileOffset: number,
  buildId: string,
): boolean {
  return kindByMappingName.has(fileName) && start === 0 && end === 0 && fileOffset === 0 && buildId === "";
}

/**
 * The type (with unit `nanoseconds`) of the sample value that holds off-CPU time: named for what it
 * measures, as `cpu` is, so that `pprof -sample_index=off_cpu` reads as what it shows.
 */
export const OFF_CPU_SAMPLE_TYPE = "off_cpu";

/**
 * The type (with unit `count`) of the one sample value of a profile of probe events: what pprof shows as
 * the value's name (`-sample_index=events`), and what the reader recognizes such a profile by.
 */
export const EVENTS_SAMPLE_TYPE = "events";

/** The string label of each sample of a probe-event profile that names its event. */
export const EVENT_LABEL = "event";

/** What starts each comment of a probe-event profile that lists one of its events, in order. */
export const EVENT_COMMENT_PREFIX = "event=";

const TWO_POW_32 = 4294967296;
const KERNEL_HIGH_HALF = 0xffffffff;

/** Interns strings into the pprof string table ("" first, each string once). */
class StringTable {
  readonly strings: string[] = [""];
  readonly #index = new Map<string, number>([["", 0]]);

  intern(value: string): number {
    let index = this.#index.get(value);
    if (index === undefined) {
      index = this.strings.length;
      this.strings.push(value);
      this.#index.set(value, index);
    }
    return index;
  }
}

// Bits of the per-mapping symbolization flags.
const HAS_FUNCTIONS = 1;
const HAS_FILENAMES = 2;
const HAS_LINE_NUMBERS = 4;

/**
 * Encodes `profile` as an uncompressed pprof protocol buffer.
 *
 * Throws a `RangeError` if a location refers to a missing mapping or a sample to a missing location.
 *
 * @example
 * ```ts
 * import { encodePprof } from "./pprof.ts";
 * const bytes = encodePprof({
 *   startTimeNs: 0, durationNs: 1e9, periodNs: 10_000_000, mappings: [],
 *   locations: [{ kind: "native", mapping: -1, address: 0x401000, functionName: "main", sourceFile: "", line: 0 }],
 *   samples: [{ locations: [0], count: 5, pid: 42, tid: 42, comm: "demo" }],
 * });
 * ```
 */
export function encodePprof(profile: Profile): Uint8Array {
  const { mappings, locations, samples } = profile;
  const strings = new StringTable();
  const nMappings = mappings.length;
  const nLocations = locations.length;

  // Which pprof mapping each location is written in (0 = none); pseudo mappings follow the real ones.
  const mappingKinds = mappings.map((m) => frameKindOfMapping(m.fileName));
  const pseudoKinds: Exclude<FrameKind, "native">[] = [];
  const pseudoIds = new Map<FrameKind, number>();
  const locationMappingId = new Int32Array(nLocations);
  for (let i = 0; i < nLocations; i++) {
    const location = locations[i]!;
    const m = location.mapping;
    let id = 0;
    if (m !== -1) {
      if (!Number.isInteger(m) || m < 0 || m >= nMappings) {
        throw new RangeError(`Cannot encode pprof: location ${i} refers to mapping ${m} of ${nMappings}`);
      }
      if (mappingKinds[m] === location.kind) id = m + 1;
    }
    if (id === 0 && location.kind !== "native") {
      const kind = location.kind;
      id = pseudoIds.get(kind) ?? 0;
      if (id === 0) {
        pseudoKinds.push(kind);
        id = nMappings + pseudoKinds.length;
        pseudoIds.set(kind, id);
      }
    }
    locationMappingId[i] = id;
  }

  // Functions, deduplicated by (name, file); 0 marks a location written without a Line.
  const functionIds = new Map<string, number>();
  const functionNames: number[] = [];
  const functionFiles: number[] = [];
  const locationFunctionId = new Int32Array(nLocations);
  const mappingFlags = new Uint8Array(nMappings + pseudoKinds.length + 1);
  for (let i = 0; i < nLocations; i++) {
    const { functionName, sourceFile, line } = locations[i]!;
    if (functionName === "" && sourceFile === "" && line === 0) continue;
    const key = functionName + "\0" + sourceFile;
    let id = functionIds.get(key);
    if (id === undefined) {
      functionNames.push(strings.intern(functionName));
      functionFiles.push(strings.intern(sourceFile));
      id = functionNames.length;
      functionIds.set(key, id);
    }
    locationFunctionId[i] = id;
    const mappingId = locationMappingId[i]!;
    mappingFlags[mappingId] = mappingFlags[mappingId]! | (functionName !== "" ? HAS_FUNCTIONS : 0) |
      (sourceFile !== "" ? HAS_FILENAMES : 0) | (line > 0 ? HAS_LINE_NUMBERS : 0);
  }

  const mappingFileNames = new Int32Array(nMappings);
  const mappingBuildIds = new Int32Array(nMappings);
  for (let i = 0; i < nMappings; i++) {
    mappingFileNames[i] = strings.intern(mappings[i]!.fileName);
    mappingBuildIds[i] = strings.intern(mappings[i]!.buildId);
  }
  const pseudoFileNames = pseudoKinds.map((kind) => strings.intern(KIND_MAPPING_NAMES[kind] ?? `[${kind}]`));

  // Runs of inlined calls with their caller: each distinct run becomes a location of its own.
  const runIds = new Map<string, number>();
  const runs: number[][] = [];
  const writtenAlone = new Uint8Array(nLocations);
  const sampleIds: number[][] = samples.map((sample, i) => {
    const stack = sample.locations;
    const ids: number[] = [];
    for (let j = 0; j < stack.length; j++) {
      const start = j;
      while (j + 1 < stack.length && locations[stack[j]!]?.inlined === true) j++;
      for (let k = start; k <= j; k++) {
        const index = stack[k]!;
        if (!(index >= 0 && index < nLocations)) {
          throw new RangeError(
            `Cannot encode pprof: sample ${i} refers to location ${index} of ${nLocations}`,
          );
        }
      }
      if (start === j) {
        writtenAlone[stack[j]!] = 1;
        ids.push(stack[j]! + 1);
        continue;
      }
      const run = stack.slice(start, j + 1);
      const key = run.join(",");
      let id = runIds.get(key);
      if (id === undefined) {
        runs.push(run);
        id = nLocations + runs.length;
        runIds.set(key, id);
      }
      ids.push(id);
    }
    return ids;
  });
  for (let i = 0; i < nLocations; i++) if (!locations[i]!.inlined) writtenAlone[i] = 1;

  const keyPid = strings.intern("pid");
  const keyTid = strings.intern("tid");
  const keyComm = strings.intern("comm");
  // Interned only for an events profile, so that a CPU profile's string table stays as it was.
  const events = hasEvents(profile) ? profile.events ?? [] : null;
  const keyEvent = events !== null ? strings.intern(EVENT_LABEL) : 0;
  const commIndex = new Int32Array(samples.length);
  let totalFrames = 0;
  for (let i = 0; i < samples.length; i++) {
    const sample = samples[i]!;
    commIndex[i] = strings.intern(sample.comm);
    totalFrames += sample.locations.length;
  }
  // A CPU profile's value types, interned in the order they always were; an events profile's one type.
  let typeSamples = 0, unitCount = 0, typeCpu = 0, unitNanoseconds = 0, typeOffCpu = 0, typeEvents = 0;
  let offCpu = false;
  if (events === null) {
    typeSamples = strings.intern("samples");
    unitCount = strings.intern("count");
    typeCpu = strings.intern("cpu");
    unitNanoseconds = strings.intern("nanoseconds");
    offCpu = hasOffCpuTime(profile);
    typeOffCpu = offCpu ? strings.intern(OFF_CPU_SAMPLE_TYPE) : 0;
  } else {
    typeEvents = strings.intern(EVENTS_SAMPLE_TYPE);
    unitCount = strings.intern("count");
  }
  const eventComments = (events ?? []).map((name) => strings.intern(EVENT_COMMENT_PREFIX + name));

  // Roughly the output size, so the buffer rarely grows: ids take 1-3 bytes, a sample's header ~24.
  const w = new ProtobufWriter(
    4096 + totalFrames * 3 + samples.length * 28 + nLocations * 20 + nMappings * 48 +
      functionNames.length * 12,
  );

  // sample_type (1)
  if (events !== null) writeValueType(w, 1, typeEvents, unitCount);
  else {
    writeValueType(w, 1, typeSamples, unitCount);
    writeValueType(w, 1, typeCpu, unitNanoseconds);
    if (offCpu) writeValueType(w, 1, typeOffCpu, unitNanoseconds);
  }

  // sample (2)
  const periodNs = Math.round(profile.periodNs);
  for (let i = 0; i < samples.length; i++) {
    const sample = samples[i]!;
    const stack = sampleIds[i]!;
    const s = w.beginLengthDelimited(2);
    if (stack.length > 0) {
      const ids = w.beginLengthDelimited(1); // location_id, packed, leaf first
      for (const id of stack) w.writeVarint(id);
      w.endLengthDelimited(ids);
    }
    const values = w.beginLengthDelimited(2); // value, packed
    w.writeInt64(sample.count);
    if (events === null) {
      w.writeInt64(sample.count * periodNs);
      if (offCpu) w.writeInt64(Math.round(sampleOffCpuNs(sample)));
    }
    w.endLengthDelimited(values);
    writeNumLabel(w, keyPid, sample.pid);
    writeNumLabel(w, keyTid, sample.tid);
    const comm = commIndex[i]!;
    if (comm !== 0) writeStrLabel(w, keyComm, comm);
    if (events !== null) writeStrLabel(w, keyEvent, strings.intern(sampleEventName(sample, events)));
    for (const label of sample.labels ?? []) {
      if (RESERVED_LABEL_KEYS.has(label.key) || (events !== null && label.key === EVENT_LABEL)) continue;
      writeStrLabel(w, strings.intern(label.key), strings.intern(label.value));
    }
    w.endLengthDelimited(s);
  }

  // mapping (3)
  for (let i = 0; i < nMappings; i++) {
    const m = mappings[i]!;
    const kernel = mappingKinds[i] === "kernel";
    const flags = mappingFlags[i + 1]!;
    writeMapping(w, i + 1, m.start, m.end, m.fileOffset, kernel, mappingFileNames[i]!, mappingBuildIds[i]!, {
      functions: m.hasFunctions,
      filenames: (flags & HAS_FILENAMES) !== 0,
      lineNumbers: (flags & HAS_LINE_NUMBERS) !== 0,
    });
  }
  for (let k = 0; k < pseudoKinds.length; k++) {
    const id = nMappings + k + 1;
    const flags = mappingFlags[id]!;
    writeMapping(w, id, 0, 0, 0, false, pseudoFileNames[k]!, 0, {
      functions: (flags & HAS_FUNCTIONS) !== 0,
      filenames: (flags & HAS_FILENAMES) !== 0,
      lineNumbers: (flags & HAS_LINE_NUMBERS) !== 0,
    });
  }

  // location (4): the table's, then the runs of inlined calls, each written as its outermost location.
  const writeLocation = (id: number, lines: readonly number[]) => {
    const outer = lines[lines.length - 1]!;
    const location = locations[outer]!;
    const l = w.beginLengthDelimited(4);
    w.writeVarintField(1, id);
    const mappingId = locationMappingId[outer]!;
    if (mappingId !== 0) w.writeVarintField(2, mappingId);
    writeAddress(w, 3, location.address, location.kind === "kernel");
    for (const index of lines) {
      const functionId = locationFunctionId[index]!;
      if (functionId === 0) continue;
      const line = w.beginLengthDelimited(4);
      w.writeVarintField(1, functionId);
      const number = locations[index]!.line;
      if (number !== 0) w.writeInt64Field(2, number);
      w.endLengthDelimited(line);
    }
    w.endLengthDelimited(l);
  };
  for (let i = 0; i < nLocations; i++) if (writtenAlone[i] === 1) writeLocation(i + 1, [i]);
  for (let k = 0; k < runs.length; k++) writeLocation(nLocations + k + 1, runs[k]!);

  // function (5); system_name repeats the name, as Go's runtime does, since only demangled names are kept.
  for (let i = 0; i < functionNames.length; i++) {
    const f = w.beginLengthDelimited(5);
    w.writeVarintField(1, i + 1);
    const name = functionNames[i]!;
    if (name !== 0) {
      w.writeVarintField(2, name);
      w.writeVarintField(3, name);
    }
    const file = functionFiles[i]!;
    if (file !== 0) w.writeVarintField(4, file);
    w.endLengthDelimited(f);
  }

  // string_table (6)
  for (const value of strings.strings) w.writeStringField(6, value);

  const startTime = Math.round(profile.startTimeNs);
  if (startTime !== 0) w.writeInt64Field(9, startTime); // time_nanos
  const duration = Math.round(profile.durationNs);
  if (duration !== 0) w.writeInt64Field(10, duration); // duration_nanos
  if (events !== null) {
    // Every hit is recorded, so the period is one event: pprof then scales nothing.
    writeValueType(w, 11, typeEvents, unitCount); // period_type
    w.writeInt64Field(12, 1); // period
    for (const comment of eventComments) w.writeInt64Field(13, comment); // comment
  } else {
    writeValueType(w, 11, typeCpu, unitNanoseconds); // period_type
    if (periodNs !== 0) w.writeInt64Field(12, periodNs); // period
  }
  return w.finish();
}

/**
 * Encodes `profile` as a gzip-compressed pprof file, the form `pprof` and most profile stores expect.
 *
 * @example
 * ```ts
 * import { encodePprofGzip } from "./pprof.ts";
 * import type { Profile } from "../profile/profile.ts";
 * declare const profile: Profile;
 * Deno.writeFileSync("cpu.pb.gz", await encodePprofGzip(profile));
 * ```
 */
export function encodePprofGzip(profile: Profile): Promise<Uint8Array> {
  return gzip(encodePprof(profile));
}

function writeValueType(w: ProtobufWriter, field: number, type: number, unit: number): void {
  const m = w.beginLengthDelimited(field);
  w.writeVarintField(1, type);
  w.writeVarintField(2, unit);
  w.endLengthDelimited(m);
}

/** The label keys the writer gives every sample, which a sample's own labels may not take. */
const RESERVED_LABEL_KEYS: ReadonlySet<string> = new Set(["pid", "tid", "comm"]);

function writeStrLabel(w: ProtobufWriter, key: number, str: number): void {
  const label = w.beginLengthDelimited(3);
  w.writeVarintField(1, key);
  w.writeVarintField(2, str);
  w.endLengthDelimited(label);
}

function writeNumLabel(w: ProtobufWriter, key: number, value: number): void {
  const m = w.beginLengthDelimited(3);
  w.writeVarintField(1, key);
  if (value !== 0) w.writeInt64Field(3, value); // num; proto3 leaves 0 implicit
  w.endLengthDelimited(m);
}

/** Writes a uint64 address field, restoring the high half of a kernel address kept as its low 32 bits. */
function writeAddress(w: ProtobufWriter, field: number, value: number, kernel: boolean): void {
  // Addresses outside exact integers (garbage from a broken frame chain) are written as unknown (0).
  if (value === 0 || !Number.isSafeInteger(value) || value < 0) return;
  w.writeTag(field, 0);
  if (kernel && value > 0 && value < TWO_POW_32) w.writeVarint64(value, KERNEL_HIGH_HALF);
  else w.writeVarint(value);
}

function writeMapping(
  w: ProtobufWriter,
  id: number,
  start: number,
  end: number,
  fileOffset: number,
  kernel: boolean,
  fileName: number,
  buildId: number,
  has: { functions: boolean; filenames: boolean; lineNumbers: boolean },
): void {
  const m = w.beginLengthDelimited(3);
  w.writeVarintField(1, id);
  writeAddress(w, 2, start, kernel); // memory_start
  writeAddress(w, 3, end, kernel); // memory_limit
  if (fileOffset !== 0) w.writeVarintField(4, fileOffset);
  if (fileName !== 0) w.writeVarintField(5, fileName);
  if (buildId !== 0) w.writeVarintField(6, buildId);
  if (has.functions) w.writeBoolField(7, true);
  if (has.filenames) w.writeBoolField(8, true);
  if (has.lineNumbers) w.writeBoolField(9, true);
  w.endLengthDelimited(m);
}
