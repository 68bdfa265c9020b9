/**
 * Decodes pprof files (gzip-compressed or raw `perftools.profiles.Profile` protocol buffers) into a
 * {@linkcode Profile}: ours, and those of other tools (Go's runtime, perf_to_profile, ...).
 *
 * How a pprof file maps onto a Profile:
 * - A location with several lines (inlined calls, innermost first) becomes one Profile location per line,
 *   all with the location's address and mapping, each but the last marked `inlined`, and samples list them
 *   innermost first.
 * - A location without lines becomes one location with an empty function name.
 * - Frame kinds come from mapping names, and pseudo mappings that only carry a kind are dropped; see the
 *   convention in `pprof.ts`. Kernel addresses keep their low 32 bits.
 * - A sample's count is its value for the first sample type `samples/count`, else the first with unit
 *   `count`, else its first value. A file with a sample type `off_cpu/nanoseconds` (ours when recorded
 *   with off-CPU time, `pprof.ts`) reads as a profile with `offCpu`, and that value as a sample's
 *   `offCpuNs`; a sample with a positive count is a CPU sample, one with positive off-CPU time an
 *   off-CPU sample (count 0), one with both becomes one of each, and the off-CPU value is never taken
 *   for a count, even when it is the only one. Samples with neither are dropped.
 * - A file with a sample type `events/count` (ours for a profile of probe events, `pprof.ts`) reads as a
 *   profile of events: that value is the count, `events` lists the events of the comments
 *   `event=NAME` in their order, then any other named by a sample's string label `event`, and that
 *   label becomes the sample's `event` (a sample without it has none) rather than one of its `labels`.
 *   In any other file, a label `event` is a label like the others.
 * - Labels: `pid` and `tid` (also `process.pid`/`process_id`, `thread.id`/`thread_id`) as numbers, numeric
 *   or numeric strings; the thread name from `thread_comm`, else `comm`, else `thread_name`/`thread.name`.
 *   Missing labels read as 0 and "". Every other string label is one of the sample's `labels` (Go's pprof
 *   labels), in the file's order.
 * - `periodNs` is `period` when `period_type` is in nanoseconds, else 0.
 *
 * The input is hostile: malformed bytes throw a `RangeError` "Cannot decode pprof: ...", and every table
 * is bounded (see {@linkcode PPROF_LIMITS}).
 *
 * @example
 * ```ts
 * import { decodePprof } from "./pprof_reader.ts";
 * const profile = decodePprof(Deno.readFileSync("cpu.pb.gz"));
 * console.log(profile.samples.length, profile.locations[0]?.functionName);
 * ```
 *
 * @module
 */

import type {
  FrameKind,
  Profile,
  ProfileLocation,
  ProfileMapping,
  ProfileSample,
  SampleLabel,
} from "../profile/profile.ts";
import { gunzipBounded, isGzip } from "./gunzip.ts";
import {
  EVENT_COMMENT_PREFIX,
  EVENT_LABEL,
  EVENTS_SAMPLE_TYPE,
  frameKindOfMapping,
  isKindPseudoMapping,
  OFF_CPU_SAMPLE_TYPE,
} from "./pprof.ts";
import { ProtobufReader, WireType } from "./protobuf_reader.ts";

/**
 * Bounds of {@linkcode decodePprof}: a pprof file is small when compressed whatever it holds (a 58 KB file
 * can name 60 million frames), so each table is bounded by itself, far above real profiles and low enough
 * that the most a small file can ask for (a million samples of 16 frames: 56 KB of gzip) decodes in about
 * half a gigabyte; larger files take more, in proportion. For scale, a 10 s whole-system recording at
 * 999 Hz on two CPUs decodes from 876 KB to 8,009 samples, 11,403 locations, 41 mappings, 115 frames in
 * its deepest stack (16 on average) and 681 bytes in its longest name; the deepest stacks real profilers
 * keep are 128 frames (Go's runtime), 127 (perf, by default), 192 (omniprof) and 2048 (async-profiler, by
 * default); and Grafana Pyroscope, which takes pprof files from every kind of profiler, refuses by default
 * those over 4 MiB uncompressed or 4,000 samples.
 */
export interface PprofLimits {
  /** Size of the protocol buffer message, after decompression: 150 times that recording. */
  maxBytes: number;
  /** Samples: 130 times that recording's. */
  maxSamples: number;
  /** Frames of one sample after inline expansion: 32 times the deepest kept by any profiler above. */
  maxFramesPerSample: number;
  /** Frames over all samples after inline expansion: 16 a sample at the sample bound, as recorded. */
  maxFrames: number;
  /** Locations after inline expansion (one per line), and distinct location ids referred to: 90 times. */
  maxLocations: number;
  /** Functions, and distinct function ids referred to: as many as locations. */
  maxFunctions: number;
  /** Mappings, and distinct mapping ids referred to: a thousand processes of 130 files each. */
  maxMappings: number;
  /** Entries of the string table: a name and a file name per function at their bound. */
  maxStrings: number;
  /** Bytes of one string: the longest demangled C++ names run to tens of kilobytes. */
  maxStringBytes: number;
  /** Labels over all samples: four per sample at the sample bound (omniprof writes three). */
  maxLabels: number;
  /** Sample types, and values of one sample (one per type): profiles have one to a handful. */
  maxSampleTypes: number;
}

/** The bounds {@linkcode decodePprof} applies unless told otherwise. */
export const PPROF_LIMITS: Readonly<PprofLimits> = {
  maxBytes: 128 << 20,
  maxSamples: 1 << 20,
  maxFramesPerSample: 1 << 16,
  maxFrames: 1 << 24,
  maxLocations: 1 << 20,
  maxFunctions: 1 << 20,
  maxMappings: 1 << 17,
  maxStrings: 1 << 21,
  maxStringBytes: 1 << 20,
  maxLabels: 1 << 22,
  maxSampleTypes: 64,
};

/** Bounds of {@linkcode decodePprof} that differ from {@linkcode PPROF_LIMITS}. */
export type DecodePprofOptions = Partial<PprofLimits>;

const TWO_POW_32 = 4294967296;
const KERNEL_HIGH_HALF = 0xffffffff;
/** Ids below this are interned through an array (at most 4 MiB of it, grown as ids appear). */
const MAX_DIRECT_ID = 1 << 20;

/**
 * Interns message ids (uint64) into dense indices 0, 1, 2, ... in order of first appearance, so references
 * can be read before the messages they refer to. Small ids (the usual 1, 2, 3, ...) are looked up in an
 * array; others in maps, ids above 2^53 keyed exactly by their two halves. More distinct ids than the
 * messages that may declare them means references to ids nothing declares: refused before the maps grow.
 */
class IdTable {
  #direct = new Int32Array(1024).fill(-1);
  readonly #small = new Map<number, number>();
  #large: Map<string, number> | undefined;
  readonly #limit: number;
  readonly #what: string;
  size = 0;

  /** `limit` is the most distinct ids; `what` names the messages for the error ("location"). */
  constructor(limit: number, what: string) {
    this.#limit = limit;
    this.#what = what;
  }

  /** The dense index of the id the reader has just read. */
  intern(r: ProtobufReader): number {
    if (this.size >= this.#limit) this.#checkRoom(r);
    const lo = r.lo;
    if (r.hi === 0 && lo < MAX_DIRECT_ID) {
      let direct = this.#direct;
      if (lo >= direct.length) {
        const grown = new Int32Array(Math.min(MAX_DIRECT_ID, Math.max(lo + 1, direct.length * 2))).fill(-1);
        grown.set(direct);
        this.#direct = direct = grown;
      }
      let index = direct[lo]!;
      if (index === -1) {
        index = this.size++;
        direct[lo] = index;
      }
      return index;
    }
    if (r.hi < 0x200000) {
      const id = r.hi * TWO_POW_32 + lo;
      let index = this.#small.get(id);
      if (index === undefined) {
        index = this.size++;
        this.#small.set(id, index);
      }
      return index;
    }
    this.#large ??= new Map();
    const key = `${r.hi}:${lo}`;
    let index = this.#large.get(key);
    if (index === undefined) {
      index = this.size++;
      this.#large.set(key, index);
    }
    return index;
  }

  /** At the limit, an id seen before is still fine; a new one is refused. */
  #checkRoom(r: ProtobufReader): void {
    const known = r.hi === 0 && r.lo < MAX_DIRECT_ID
      ? r.lo < this.#direct.length && this.#direct[r.lo] !== -1
      : r.hi < 0x200000
      ? this.#small.has(r.hi * TWO_POW_32 + r.lo)
      : this.#large?.has(`${r.hi}:${r.lo}`) === true;
    if (!known) throw fail(`more than ${this.#limit} distinct ${this.#what} ids`);
  }
}

/** A growable list of int32, cheaper than a JS array for millions of entries. */
class Int32List {
  data = new Int32Array(1024);
  length = 0;

  push(value: number): void {
    if (this.length === this.data.length) {
      const grown = new Int32Array(this.data.length * 2);
      grown.set(this.data);
      this.data = grown;
    }
    this.data[this.length++] = value;
  }
}

const ROLE_PID = 0;
const ROLE_TID = 1;
const ROLE_COMM = 2;
/** The label `event` of a probe-event profile (only there: elsewhere it is a label like any other). */
const ROLE_EVENT = 3;
/** Label keys the reader understands: key -> [role, rank]; of several keys of one role, the highest rank wins. */
const LABEL_KEYS = new Map<string, [number, number]>([
  ["pid", [ROLE_PID, 3]],
  ["process.pid", [ROLE_PID, 2]],
  ["process_id", [ROLE_PID, 1]],
  ["tid", [ROLE_TID, 3]],
  ["thread.id", [ROLE_TID, 2]],
  ["thread_id", [ROLE_TID, 1]],
  // The thread's name is what a Profile keeps; `comm` is the process's name in perf_to_profile output.
  ["thread_comm", [ROLE_COMM, 4]],
  ["comm", [ROLE_COMM, 3]],
  ["thread_name", [ROLE_COMM, 2]],
  ["thread.name", [ROLE_COMM, 1]],
]);

/** The raw tables of a pprof message, with ids interned and string indices not yet resolved. */
class RawProfile {
  readonly limits: PprofLimits;
  strings: string[] = [];
  sampleTypes: number[] = []; // (type, unit) pairs of string indices
  periodTypeUnit = 0;
  period = 0;
  timeNanos = 0;
  durationNanos = 0;
  /** String indices of the comments. */
  comments: number[] = [];

  sampleFrameEnd: number[] = [];
  sampleFrames = new Int32List(); // dense location indices
  sampleValueEnd: number[] = [];
  sampleValues: number[] = [];
  sampleLabelEnd: number[] = [];
  labelKeys: number[] = [];
  labelStrs: number[] = [];
  labelNums: number[] = [];

  mappingIds: IdTable;
  mappingDense: number[] = [];
  mappingStart: number[] = []; // lo, hi pairs
  mappingLimit: number[] = [];
  mappingOffset: number[] = [];
  mappingFileName: number[] = [];
  mappingBuildId: number[] = [];
  mappingHasFunctions: boolean[] = [];

  locationIds: IdTable;
  locationDense: number[] = [];
  locationMapping: number[] = []; // dense mapping index, -1 for none
  locationAddress: number[] = []; // lo, hi pairs
  locationLineEnd: number[] = [];
  /** Locations after inline expansion: one per line, one for a location without lines. */
  expandedLocations = 0;
  lineFunction: number[] = []; // dense function index, -1 for none
  lineNumber: number[] = [];

  functionIds: IdTable;
  functionDense: number[] = [];
  functionName: number[] = [];
  functionFile: number[] = [];

  constructor(limits: PprofLimits) {
    this.limits = limits;
    this.mappingIds = new IdTable(limits.maxMappings, "mapping");
    this.locationIds = new IdTable(limits.maxLocations, "location");
    this.functionIds = new IdTable(limits.maxFunctions, "function");
  }
}

/**
 * Decodes a pprof profile, gzip-compressed (starting with 1f 8b) or not.
 *
 * Throws a `RangeError` "Cannot decode pprof: ..." for malformed input or input beyond the bounds
 * ({@linkcode PPROF_LIMITS}, or those of `options`).
 *
 * @example
 * ```ts
 * import { decodePprof } from "./pprof_reader.ts";
 * import { encodePprofGzip } from "./pprof.ts";
 * const profile = decodePprof(await encodePprofGzip({
 *   startTimeNs: 0, durationNs: 0, periodNs: 1e7, mappings: [], locations: [], samples: [],
 * }));
 * ```
 */
export function decodePprof(bytes: Uint8Array, options: DecodePprofOptions = {}): Profile {
  const limits: PprofLimits = { ...PPROF_LIMITS, ...options };
  const message = isGzip(bytes) ? gunzipBounded(bytes, limits.maxBytes, "pprof") : bytes;
  if (message.length > limits.maxBytes) throw fail(`${message.length} bytes, more than ${limits.maxBytes}`);
  return resolve(parse(new ProtobufReader(message, "pprof"), limits));
}

function parse(r: ProtobufReader, limits: PprofLimits): RawProfile {
  const p = new RawProfile(limits);
  while (r.next()) {
    switch (r.field) {
      case 1: { // sample_type
        r.expectWireType(WireType.LengthDelimited, "sample_type");
        if (p.sampleTypes.length / 2 >= limits.maxSampleTypes) {
          throw fail(`more than ${limits.maxSampleTypes} sample types`);
        }
        const [type, unit] = readValueType(r);
        p.sampleTypes.push(type, unit);
        break;
      }
      case 2: // sample
        r.expectWireType(WireType.LengthDelimited, "sample");
        if (p.sampleFrameEnd.length >= limits.maxSamples) {
          throw fail(`more than ${limits.maxSamples} samples`);
        }
        readSample(r, p);
        break;
      case 3: // mapping
        r.expectWireType(WireType.LengthDelimited, "mapping");
        if (p.mappingDense.length >= limits.maxMappings) {
          throw fail(`more than ${limits.maxMappings} mappings`);
        }
        readMapping(r, p);
        break;
      case 4: // location
        r.expectWireType(WireType.LengthDelimited, "location");
        readLocation(r, p);
        break;
      case 5: // function
        r.expectWireType(WireType.LengthDelimited, "function");
        if (p.functionDense.length >= limits.maxFunctions) {
          throw fail(`more than ${limits.maxFunctions} functions`);
        }
        readFunction(r, p);
        break;
      case 6: // string_table
        r.expectWireType(WireType.LengthDelimited, "string_table");
        if (p.strings.length >= limits.maxStrings) throw fail(`more than ${limits.maxStrings} strings`);
        p.strings.push(r.readString(limits.maxStringBytes));
        break;
      case 9: // time_nanos
        r.expectWireType(WireType.Varint, "time_nanos");
        p.timeNanos = r.readInt64();
        break;
      case 10: // duration_nanos
        r.expectWireType(WireType.Varint, "duration_nanos");
        p.durationNanos = r.readInt64();
        break;
      case 11: // period_type
        r.expectWireType(WireType.LengthDelimited, "period_type");
        p.periodTypeUnit = readValueType(r)[1];
        break;
      case 12: // period
        r.expectWireType(WireType.Varint, "period");
        p.period = r.readInt64();
        break;
      case 13: // comment, packed or not; each names a string, so there are no more than strings
        if (r.wireType === WireType.LengthDelimited) {
          const packed = r.enterLengthDelimited();
          while (r.pos < r.end) {
            if (p.comments.length >= limits.maxStrings) throw fail(`more than ${limits.maxStrings} comments`);
            p.comments.push(r.readInt64());
          }
          r.exitLengthDelimited(packed);
        } else {
          r.expectWireType(WireType.Varint, "comment");
          if (p.comments.length >= limits.maxStrings) throw fail(`more than ${limits.maxStrings} comments`);
          p.comments.push(r.readInt64());
        }
        break;
      default:
        r.skip();
    }
  }
  return p;
}

function readValueType(r: ProtobufReader): [number, number] {
  let type = 0;
  let unit = 0;
  const outer = r.enterLengthDelimited();
  while (r.next()) {
    if (r.field === 1) {
      r.expectWireType(WireType.Varint, "ValueType.type");
      type = r.readInt64();
    } else if (r.field === 2) {
      r.expectWireType(WireType.Varint, "ValueType.unit");
      unit = r.readInt64();
    } else r.skip();
  }
  r.exitLengthDelimited(outer);
  return [type, unit];
}

function readSample(r: ProtobufReader, p: RawProfile): void {
  const { maxFramesPerSample, maxFrames, maxSampleTypes, maxLabels } = p.limits;
  const frames = p.sampleFrames;
  const values = p.sampleValues;
  // Each location expands to one frame or more: the raw count is checked here, before it is stored.
  const frameLimit = Math.min(frames.length + maxFramesPerSample, maxFrames);
  const valueLimit = values.length + maxSampleTypes;
  const outer = r.enterLengthDelimited();
  while (r.next()) {
    switch (r.field) {
      case 1: // location_id, packed or not
        if (r.wireType === WireType.LengthDelimited) {
          const packed = r.enterLengthDelimited();
          while (r.pos < r.end) {
            r.readVarint();
            if (frames.length >= frameLimit) throw tooManyFrames(p);
            frames.push(p.locationIds.intern(r));
          }
          r.exitLengthDelimited(packed);
        } else {
          r.expectWireType(WireType.Varint, "Sample.location_id");
          r.readVarint();
          if (frames.length >= frameLimit) throw tooManyFrames(p);
          frames.push(p.locationIds.intern(r));
        }
        break;
      case 2: // value, packed or not
        if (r.wireType === WireType.LengthDelimited) {
          const packed = r.enterLengthDelimited();
          while (r.pos < r.end) {
            if (values.length >= valueLimit) throw tooManyValues(p);
            values.push(r.readInt64());
          }
          r.exitLengthDelimited(packed);
        } else {
          r.expectWireType(WireType.Varint, "Sample.value");
          if (values.length >= valueLimit) throw tooManyValues(p);
          values.push(r.readInt64());
        }
        break;
      case 3: // label
        r.expectWireType(WireType.LengthDelimited, "Sample.label");
        if (p.labelKeys.length >= maxLabels) throw fail(`more than ${maxLabels} labels`);
        readLabel(r, p);
        break;
      default:
        r.skip();
    }
  }
  r.exitLengthDelimited(outer);
  p.sampleFrameEnd.push(p.sampleFrames.length);
  p.sampleValueEnd.push(p.sampleValues.length);
  p.sampleLabelEnd.push(p.labelKeys.length);
}

function tooManyFrames(p: RawProfile): RangeError {
  const sample = p.sampleFrameEnd.length;
  const start = sample === 0 ? 0 : p.sampleFrameEnd[sample - 1]!;
  return p.sampleFrames.length - start >= p.limits.maxFramesPerSample
    ? fail(`sample ${sample} has more than ${p.limits.maxFramesPerSample} frames`)
    : fail(`samples have more than ${p.limits.maxFrames} frames`);
}

function tooManyValues(p: RawProfile): RangeError {
  return fail(
    `sample ${p.sampleFrameEnd.length} has more than ${p.limits.maxSampleTypes} values (one per sample type)`,
  );
}

function readLabel(r: ProtobufReader, p: RawProfile): void {
  let key = 0;
  let str = 0;
  let num = 0;
  const outer = r.enterLengthDelimited();
  while (r.next()) {
    if (r.field === 1) {
      r.expectWireType(WireType.Varint, "Label.key");
      key = r.readInt64();
    } else if (r.field === 2) {
      r.expectWireType(WireType.Varint, "Label.str");
      str = r.readInt64();
    } else if (r.field === 3) {
      r.expectWireType(WireType.Varint, "Label.num");
      num = r.readInt64();
    } else r.skip();
  }
  r.exitLengthDelimited(outer);
  p.labelKeys.push(key);
  p.labelStrs.push(str);
  p.labelNums.push(num);
}

function readMapping(r: ProtobufReader, p: RawProfile): void {
  let dense = -1;
  let startLo = 0, startHi = 0, limitLo = 0, limitHi = 0, offsetLo = 0, offsetHi = 0;
  let fileName = 0;
  let buildId = 0;
  let hasFunctions = false;
  const outer = r.enterLengthDelimited();
  while (r.next()) {
    switch (r.field) {
      case 1:
        r.expectWireType(WireType.Varint, "Mapping.id");
        r.readVarint();
        dense = p.mappingIds.intern(r);
        break;
      case 2:
        r.expectWireType(WireType.Varint, "Mapping.memory_start");
        r.readVarint();
        startLo = r.lo;
        startHi = r.hi;
        break;
      case 3:
        r.expectWireType(WireType.Varint, "Mapping.memory_limit");
        r.readVarint();
        limitLo = r.lo;
        limitHi = r.hi;
        break;
      case 4:
        r.expectWireType(WireType.Varint, "Mapping.file_offset");
        r.readVarint();
        offsetLo = r.lo;
        offsetHi = r.hi;
        break;
      case 5:
        r.expectWireType(WireType.Varint, "Mapping.filename");
        fileName = r.readInt64();
        break;
      case 6:
        r.expectWireType(WireType.Varint, "Mapping.build_id");
        buildId = r.readInt64();
        break;
      case 7:
        r.expectWireType(WireType.Varint, "Mapping.has_functions");
        hasFunctions = r.readBool();
        break;
      default:
        r.skip();
    }
  }
  r.exitLengthDelimited(outer);
  if (dense === -1) throw r.error(`mapping ${p.mappingDense.length} has no id`);
  p.mappingDense.push(dense);
  p.mappingStart.push(startLo, startHi);
  p.mappingLimit.push(limitLo, limitHi);
  p.mappingOffset.push(offsetLo, offsetHi);
  p.mappingFileName.push(fileName);
  p.mappingBuildId.push(buildId);
  p.mappingHasFunctions.push(hasFunctions);
}

function readLocation(r: ProtobufReader, p: RawProfile): void {
  const lineStart = p.lineFunction.length;
  let dense = -1;
  let mapping = -1;
  let addressLo = 0;
  let addressHi = 0;
  const outer = r.enterLengthDelimited();
  while (r.next()) {
    switch (r.field) {
      case 1:
        r.expectWireType(WireType.Varint, "Location.id");
        r.readVarint();
        dense = p.locationIds.intern(r);
        break;
      case 2:
        r.expectWireType(WireType.Varint, "Location.mapping_id");
        r.readVarint();
        mapping = r.lo === 0 && r.hi === 0 ? -1 : p.mappingIds.intern(r);
        break;
      case 3:
        r.expectWireType(WireType.Varint, "Location.address");
        r.readVarint();
        addressLo = r.lo;
        addressHi = r.hi;
        break;
      case 4:
        r.expectWireType(WireType.LengthDelimited, "Location.line");
        // Lines become locations of their own: bounded as they are read.
        if (p.expandedLocations + (p.lineFunction.length - lineStart) >= p.limits.maxLocations) {
          throw tooManyLocations(p);
        }
        readLine(r, p);
        break;
      default:
        r.skip();
    }
  }
  r.exitLengthDelimited(outer);
  if (dense === -1) throw r.error(`location ${p.locationDense.length} has no id`);
  p.expandedLocations += Math.max(1, p.lineFunction.length - lineStart);
  if (p.expandedLocations > p.limits.maxLocations) throw tooManyLocations(p);
  p.locationDense.push(dense);
  p.locationMapping.push(mapping);
  p.locationAddress.push(addressLo, addressHi);
  p.locationLineEnd.push(p.lineFunction.length);
}

function tooManyLocations(p: RawProfile): RangeError {
  return fail(`more than ${p.limits.maxLocations} locations (one per line of inlined code)`);
}

function readLine(r: ProtobufReader, p: RawProfile): void {
  let fn = -1;
  let line = 0;
  const outer = r.enterLengthDelimited();
  while (r.next()) {
    if (r.field === 1) {
      r.expectWireType(WireType.Varint, "Line.function_id");
      r.readVarint();
      fn = r.lo === 0 && r.hi === 0 ? -1 : p.functionIds.intern(r);
    } else if (r.field === 2) {
      r.expectWireType(WireType.Varint, "Line.line");
      line = r.readInt64();
    } else r.skip();
  }
  r.exitLengthDelimited(outer);
  p.lineFunction.push(fn);
  p.lineNumber.push(line);
}

function readFunction(r: ProtobufReader, p: RawProfile): void {
  let dense = -1;
  let name = 0;
  let systemName = 0;
  let file = 0;
  const outer = r.enterLengthDelimited();
  while (r.next()) {
    switch (r.field) {
      case 1:
        r.expectWireType(WireType.Varint, "Function.id");
        r.readVarint();
        dense = p.functionIds.intern(r);
        break;
      case 2:
        r.expectWireType(WireType.Varint, "Function.name");
        name = r.readInt64();
        break;
      case 3:
        r.expectWireType(WireType.Varint, "Function.system_name");
        systemName = r.readInt64();
        break;
      case 4:
        r.expectWireType(WireType.Varint, "Function.filename");
        file = r.readInt64();
        break;
      default:
        r.skip();
    }
  }
  r.exitLengthDelimited(outer);
  if (dense === -1) throw r.error(`function ${p.functionDense.length} has no id`);
  p.functionDense.push(dense);
  // Tools that only know the raw symbol leave the name empty.
  p.functionName.push(name !== 0 ? name : systemName);
  p.functionFile.push(file);
}

function fail(state: string): RangeError {
  return new RangeError(`Cannot decode pprof: ${state}`);
}

/** Maps each dense id to the position of the message that declared it; -1 where none did. */
function positionsOfIds(dense: number[], size: number, what: string): Int32Array {
  const positions = new Int32Array(size).fill(-1);
  for (let i = 0; i < dense.length; i++) {
    const d = dense[i]!;
    if (positions[d] !== -1) throw fail(`two ${what}s share an id (${what} ${positions[d]} and ${i})`);
    positions[d] = i;
  }
  return positions;
}

function toNumber(lo: number, hi: number): number {
  return hi * TWO_POW_32 + lo;
}

/** A kernel address written with its high half restored keeps only its low 32 bits. */
function toKernelNumber(lo: number, hi: number): number {
  return hi === KERNEL_HIGH_HALF ? lo : hi * TWO_POW_32 + lo;
}

function resolve(p: RawProfile): Profile {
  const { maxFrames, maxFramesPerSample } = p.limits;
  const strings = p.strings;
  if (strings.length > 0 && strings[0] !== "") throw fail(`string_table[0] is not empty`);
  const str = (index: number, what: string): string => {
    if (index === 0) return "";
    const value = strings[index];
    if (value === undefined) {
      throw fail(`${what} refers to string ${index} of ${strings.length}`);
    }
    return value;
  };

  // Mappings.
  const mappings: ProfileMapping[] = [];
  const nRawMappings = p.mappingDense.length;
  const mappingKind: FrameKind[] = new Array(nRawMappings);
  const mappingIndex = new Int32Array(nRawMappings);
  for (let i = 0; i < nRawMappings; i++) {
    const fileName = str(p.mappingFileName[i]!, `mapping ${i}`);
    const buildId = str(p.mappingBuildId[i]!, `mapping ${i}`);
    const kind = frameKindOfMapping(fileName);
    const convert = kind === "kernel" ? toKernelNumber : toNumber;
    const start = convert(p.mappingStart[2 * i]!, p.mappingStart[2 * i + 1]!);
    const end = convert(p.mappingLimit[2 * i]!, p.mappingLimit[2 * i + 1]!);
    const fileOffset = toNumber(p.mappingOffset[2 * i]!, p.mappingOffset[2 * i + 1]!);
    mappingKind[i] = kind;
    if (isKindPseudoMapping(fileName, start, end, fileOffset, buildId)) {
      mappingIndex[i] = -1;
      continue;
    }
    mappingIndex[i] = mappings.length;
    mappings.push({ start, end, fileOffset, fileName, buildId, hasFunctions: p.mappingHasFunctions[i]! });
  }
  const mappingOfId = positionsOfIds(p.mappingDense, p.mappingIds.size, "mapping");

  // Functions.
  const functionOfId = positionsOfIds(p.functionDense, p.functionIds.size, "function");
  const functionNames: string[] = new Array(p.functionDense.length);
  const functionFiles: string[] = new Array(p.functionDense.length);
  for (let i = 0; i < p.functionDense.length; i++) {
    functionNames[i] = str(p.functionName[i]!, `function ${i}`);
    functionFiles[i] = str(p.functionFile[i]!, `function ${i}`);
  }

  // Locations: one Profile location per line, innermost first.
  const locations: ProfileLocation[] = [];
  const nRawLocations = p.locationDense.length;
  const firstOfLocation = new Int32Array(nRawLocations);
  const countOfLocation = new Int32Array(nRawLocations);
  let lineStart = 0;
  for (let i = 0; i < nRawLocations; i++) {
    let kind: FrameKind = "native";
    let mapping = -1;
    const mappingDense = p.locationMapping[i]!;
    if (mappingDense !== -1) {
      const position = mappingOfId[mappingDense]!;
      if (position === -1) throw fail(`location ${i} refers to a mapping id no mapping has`);
      kind = mappingKind[position]!;
      mapping = mappingIndex[position]!;
    }
    const lo = p.locationAddress[2 * i]!;
    const hi = p.locationAddress[2 * i + 1]!;
    const address = kind === "kernel" ? toKernelNumber(lo, hi) : toNumber(lo, hi);
    const lineEnd = p.locationLineEnd[i]!;
    firstOfLocation[i] = locations.length;
    if (lineStart === lineEnd) {
      locations.push({ kind, mapping, address, functionName: "", sourceFile: "", line: 0 });
    }
    for (let j = lineStart; j < lineEnd; j++) {
      const fnDense = p.lineFunction[j]!;
      let functionName = "";
      let sourceFile = "";
      if (fnDense !== -1) {
        const position = functionOfId[fnDense]!;
        if (position === -1) throw fail(`location ${i} refers to a function id no function has`);
        functionName = functionNames[position]!;
        sourceFile = functionFiles[position]!;
      }
      const line = Math.max(0, p.lineNumber[j]!);
      const location: ProfileLocation = { kind, mapping, address, functionName, sourceFile, line };
      if (j < lineEnd - 1) location.inlined = true;
      locations.push(location);
    }
    countOfLocation[i] = locations.length - firstOfLocation[i]!;
    lineStart = lineEnd;
  }
  const locationOfId = positionsOfIds(p.locationDense, p.locationIds.size, "location");

  const nTypes = p.sampleTypes.length / 2;
  let valueIndex = -1;
  // A profile of probe events: its hits are the count, and its samples name their events.
  for (let k = 0; k < nTypes && valueIndex === -1; k++) {
    const type = str(p.sampleTypes[2 * k]!, "sample_type");
    const unit = str(p.sampleTypes[2 * k + 1]!, "sample_type");
    if (type === EVENTS_SAMPLE_TYPE && unit === "count") valueIndex = k;
  }
  const events: string[] | null = valueIndex === -1 ? null : [];
  const eventIndex = new Map<string, number>();
  const eventOf = (name: string): number => {
    let index = eventIndex.get(name);
    if (index === undefined && events !== null) {
      index = events.length;
      events.push(name);
      eventIndex.set(name, index);
    }
    return index ?? -1;
  };
  if (events !== null) {
    for (const comment of p.comments) {
      const text = str(comment, "comment");
      if (text.startsWith(EVENT_COMMENT_PREFIX)) eventOf(text.slice(EVENT_COMMENT_PREFIX.length));
    }
  }
  // Which value is the off-CPU time, if any, and which the sample count (never the off-CPU time: a file
  // of off-CPU time alone has no count, and its samples are off-CPU samples).
  // A profile of probe events has no off-CPU time, whatever its types say.
  let offCpuIndex = -1;
  for (let k = 0; k < nTypes && offCpuIndex === -1 && events === null; k++) {
    const type = str(p.sampleTypes[2 * k]!, "sample_type");
    const unit = str(p.sampleTypes[2 * k + 1]!, "sample_type");
    if (type === OFF_CPU_SAMPLE_TYPE && unit === "nanoseconds") offCpuIndex = k;
  }
  for (let k = 0; k < nTypes && valueIndex === -1; k++) {
    const type = str(p.sampleTypes[2 * k]!, "sample_type");
    const unit = str(p.sampleTypes[2 * k + 1]!, "sample_type");
    if (type === "samples" && unit === "count") valueIndex = k;
  }
  for (let k = 0; k < nTypes && valueIndex === -1; k++) {
    if (str(p.sampleTypes[2 * k + 1]!, "sample_type") === "count") valueIndex = k;
  }
  if (valueIndex === -1 && offCpuIndex !== 0) valueIndex = 0;
  const neededValues = Math.max(valueIndex, offCpuIndex) + 1;

  // Label keys, by string index.
  const roleOfKey = new Map<number, number>();
  const rankOfKey = new Map<number, number>();
  for (let i = 0; i < strings.length; i++) {
    const known = LABEL_KEYS.get(strings[i]!);
    if (known !== undefined) {
      roleOfKey.set(i, known[0]);
      rankOfKey.set(i, known[1]);
    } else if (events !== null && strings[i] === EVENT_LABEL) {
      roleOfKey.set(i, ROLE_EVENT);
      rankOfKey.set(i, 1);
    }
  }

  // Samples.
  const samples: ProfileSample[] = [];
  let frameStart = 0;
  let valueStart = 0;
  let labelStart = 0;
  let totalFrames = 0;
  const frames = p.sampleFrames.data;
  for (let s = 0; s < p.sampleFrameEnd.length; s++) {
    const frameEnd = p.sampleFrameEnd[s]!;
    const valueEnd = p.sampleValueEnd[s]!;
    const labelEnd = p.sampleLabelEnd[s]!;
    const nValues = valueEnd - valueStart;
    if (nValues < neededValues) {
      throw fail(`sample ${s} has ${nValues} values, the profile has ${Math.max(1, nTypes)} sample types`);
    }
    const count = valueIndex === -1 ? 0 : p.sampleValues[valueStart + valueIndex]!;
    const offCpuNs = offCpuIndex === -1 ? 0 : p.sampleValues[valueStart + offCpuIndex]!;
    if (count > 0 || offCpuNs > 0) {
      const stack: number[] = [];
      for (let f = frameStart; f < frameEnd; f++) {
        const position = locationOfId[frames[f]!]!;
        if (position === -1) throw fail(`sample ${s} refers to a location id no location has`);
        const first = firstOfLocation[position]!;
        const n = countOfLocation[position]!;
        totalFrames += n;
        if (totalFrames > maxFrames) throw fail(`samples expand to more than ${maxFrames} frames`);
        if (stack.length + n > maxFramesPerSample) {
          throw fail(`sample ${s} expands to more than ${maxFramesPerSample} frames`);
        }
        for (let k = 0; k < n; k++) stack.push(first + k);
      }
      let pid = 0, tid = 0, comm = "";
      let pidRank = 0, tidRank = 0, commRank = 0;
      let event = -1;
      const labels: SampleLabel[] = [];
      for (let l = labelStart; l < labelEnd; l++) {
        const key = p.labelKeys[l]!;
        const role = roleOfKey.get(key);
        if (role === undefined) {
          const strIndex = p.labelStrs[l]!;
          if (strIndex !== 0) {
            labels.push({ key: str(key, `sample ${s} label`), value: str(strIndex, `sample ${s} label`) });
          }
          continue;
        }
        const rank = rankOfKey.get(key)!;
        const strIndex = p.labelStrs[l]!;
        if (role === ROLE_EVENT) {
          if (event === -1) event = eventOf(str(strIndex, `sample ${s} label`));
          continue;
        }
        if (role === ROLE_COMM) {
          if (rank > commRank && strIndex !== 0) {
            comm = str(strIndex, `sample ${s} label`);
            commRank = rank;
          }
          continue;
        }
        const value = strIndex !== 0 ? Number(str(strIndex, `sample ${s} label`)) : p.labelNums[l]!;
        if (!Number.isFinite(value)) continue;
        if (role === ROLE_PID && rank > pidRank) {
          pid = value;
          pidRank = rank;
        } else if (role === ROLE_TID && rank > tidRank) {
          tid = value;
          tidRank = rank;
        }
      }
      const labelled = labels.length > 0 ? { labels } : {};
      const evented = event !== -1 ? { event } : {};
      if (count > 0) samples.push({ locations: stack, count, ...evented, pid, tid, comm, ...labelled });
      // A sample with both values (not ours: a Profile sample is one or the other) becomes two samples.
      if (offCpuNs > 0) {
        const locations = count > 0 ? [...stack] : stack;
        const own = count > 0 && labels.length > 0 ? { labels: [...labels] } : labelled;
        samples.push({ locations, count: 0, offCpuNs, pid, tid, comm, ...own });
      }
    }
    frameStart = frameEnd;
    valueStart = valueEnd;
    labelStart = labelEnd;
  }

  const periodNs = str(p.periodTypeUnit, "period_type") === "nanoseconds" ? p.period : 0;
  return {
    startTimeNs: p.timeNanos,
    durationNs: p.durationNanos,
    periodNs,
    ...(offCpuIndex !== -1 ? { offCpu: true } : {}),
    ...(events !== null ? { events } : {}),
    mappings,
    locations,
    samples,
  };
}
