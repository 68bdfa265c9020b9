/**
 * The data an HTML flamegraph page carries: one or two profiles merged into a call tree once, stored as
 * flat number arrays over a string table (no object per node), so a page with 100,000 distinct stacks
 * stays a few megabytes of JSON that parses in well under a second.
 *
 * The tree's first level under the root is one pseudo frame per process (kind `"process"`), so the page
 * can group by process, by command name or not at all without the stacks being stored again. Samples
 * stay per thread (a call-tree node, a thread, a count), which is what the page's process and thread
 * filters need. In a differential page, every thread and process frame belongs to one of two series
 * (0: before, 1: after) and code frames are keyed by kind and name only, so the same function in two
 * builds of a program is one frame.
 *
 * A profile with off-CPU time (`record --off-cpu`) also keeps, per sample, the ns its thread was switched
 * out (`sampleOffCpuNs`, beside the CPU sample counts), and its series its totals, so that the page can
 * show on-CPU time, off-CPU time or both; data without off-CPU time has neither field, as before.
 *
 * A profile of probe events (`record -e`) keeps its samples' counts as hits, and the data lists the
 * events (`events`, of all series) and each sample's (`sampleEvent`), so the page can say "events"
 * rather than samples and show one event or all; samples of two events are never merged, even on one
 * stack and thread. Data of a CPU profile has neither field, as before.
 *
 * @example
 * ```ts
 * import { flamegraphData } from "./flamegraph_data.ts";
 * import type { Profile } from "../../profile/profile.ts";
 * declare const profile: Profile;
 * const data = flamegraphData(profile, { title: "my service" });
 * console.log(data.nodeFrame.length, "call tree nodes");
 * ```
 *
 * @module
 */

import type { FrameKind, Profile } from "../../profile/profile.ts";
import { processNames } from "../../profile/process_names.ts";
import { hasOffCpuTime, sampleOffCpuNs } from "../../profile/wall_time.ts";
import { hasEvents, sampleEventName } from "../../profile/events.ts";
import { type KindColour, runtimeFrameKinds } from "../../profile/frame_kinds.ts";

/** A frame kind, plus `"process"` for the pseudo frames that stand for processes. */
export type FlamegraphKind = FrameKind | "process";

/** How the page draws a frame kind: its colours, and what the legend calls it. */
export interface KindStyle extends KindColour {
  label: string;
}

/** What one series (a profile) of the page is. */
export interface FlamegraphSeries {
  /** What the user calls it: a file name, or "before"/"after". */
  name: string;
  /** Sum of its sample counts: hits, for a profile of probe events. */
  samples: number;
  durationNs: number;
  /** CPU time one sample stands for, in ns (0 when unknown). */
  periodNs: number;
  /** Wall-clock start, ns since the Unix epoch (0 when unknown). */
  startTimeNs: number;
  /**
   * Sum of the off-CPU time of its samples in ns, present only for a profile recorded with off-CPU time
   * (even when 0): its presence is what tells the page to offer on-CPU, off-CPU and wall time.
   */
  offCpuNs?: number;
  /**
   * For a profile of probe events, the hits of each of the data's `events` in this series (0 for one it
   * did not record or never hit); its presence tells the page that amounts are events.
   */
  eventHits?: number[];
}

/**
 * A flamegraph page's data. Every `*String` value below is an index into `strings`, which is sorted, so
 * the page can order frames by name by comparing indices.
 */
export interface FlamegraphData {
  format: "omniprof-flamegraph";
  version: 1;
  /** `"profile"`: one series; `"diff"`: series 0 (before) against series 1 (after). */
  mode: "profile" | "diff";
  title: string;
  series: FlamegraphSeries[];
  strings: string[];
  kinds: FlamegraphKind[];
  /** The colours and label of each runtime's kind in `kinds`, as its descriptor gives them. */
  kindStyles: Record<string, KindStyle>;
  /**
   * Frames as triples `[nameString, kindIndex, detail]`, in name order (then kind, then detail). `detail`
   * is a file name string (the source file, else the mapping's file; -1 when unknown) for code frames,
   * and the pid for process frames.
   */
  frames: number[];
  /**
   * Call tree in depth-first order, children in frame (so name) order: how far back each node's parent
   * is (node index minus parent index; 0 for node 0, the root). Mostly 1, so the JSON stays small.
   */
  nodeParentDistance: number[];
  /** Frame of each node (-1 for the root). */
  nodeFrame: number[];
  /** Threads as quads `[pid, tid, commString, series]`. */
  threads: number[];
  /** Samples: the call-tree node of the leaf, the thread, and how many samples had exactly that. */
  sampleNode: number[];
  sampleThread: number[];
  sampleCount: number[];
  /**
   * Off-CPU ns of each sample (0 for CPU samples), present only when a series has off-CPU time; a sample
   * then has a count, off-CPU time or both (samples of one node and thread are merged).
   */
  sampleOffCpuNs?: number[];
  /**
   * The probe events of the series that are profiles of events (`Profile.events`), in the order the
   * first series lists them, then the second's that the first lacks; present only when a series counts
   * events.
   */
  events?: string[];
  /** Each sample's event, an index into `events`; present with it. */
  sampleEvent?: number[];
}

/** Options of {@linkcode flamegraphData} and {@linkcode diffFlamegraphData}. */
export interface FlamegraphDataOptions {
  /** Shown as the page's title (default: "CPU profile", "Event profile" or "Differential profile"). */
  title?: string;
  /** Names of the series (default: "profile", or "before" and "after"). */
  seriesNames?: string[];
  /** Called now and then while samples are merged: `done` of `total` samples. */
  onProgress?: (done: number, total: number) => void;
}

/** The name of the frame kind of process pseudo frames. */
export const PROCESS_KIND = "process";

/**
 * Merges `profile` into a flamegraph page's data: processes, then stacks root first, one node per
 * distinct path; frames are functions (kind, name, file), not addresses.
 *
 * @example
 * ```ts
 * import { flamegraphData } from "./flamegraph_data.ts";
 * const data = flamegraphData({
 *   startTimeNs: 0, durationNs: 1e9, periodNs: 1e7, mappings: [],
 *   locations: [{ kind: "native", mapping: -1, address: 0, functionName: "main", sourceFile: "", line: 0 }],
 *   samples: [{ locations: [0], count: 3, pid: 7, tid: 7, comm: "app" }],
 * });
 * // data.nodeParentDistance: [0, 1, 1] (root, process "app", main); data.sampleCount: [3]
 * ```
 */
export function flamegraphData(profile: Profile, options: FlamegraphDataOptions = {}): FlamegraphData {
  const builder = new DataBuilder(false, [profile], options);
  builder.add(profile, 0);
  return builder.finish("profile", options.title ?? (hasEvents(profile) ? "Event profile" : "CPU profile"));
}

/**
 * Merges two profiles into a differential page's data: `before` is series 0, `after` series 1. Functions
 * are matched by kind and name.
 */
export function diffFlamegraphData(
  before: Profile,
  after: Profile,
  options: FlamegraphDataOptions = {},
): FlamegraphData {
  const builder = new DataBuilder(true, [before, after], options);
  builder.add(before, 0);
  builder.add(after, 1);
  return builder.finish("diff", options.title ?? "Differential profile");
}

/**
 * Builds the tree by sorting the stacks (frames numbered in name order) and walking them once: each
 * stack shares its prefix with the one before, so nodes come out in depth-first order, children in name
 * order, with no hash table over nodes (which at a million nodes costs seconds in cache misses).
 */
class DataBuilder {
  readonly #byKindAndNameOnly: boolean;
  readonly #profiles: Profile[];
  readonly #options: FlamegraphDataOptions;
  readonly #strings = new Map<string, number>();
  readonly #stringList: string[] = [];
  readonly #kinds = new Map<FlamegraphKind, number>();
  readonly #frames: number[] = [];
  readonly #frameIds = new Map<string, number>();
  /** Every sample's frames, root first (the process frame first), one after the other. */
  #stackFrames: Int32Array;
  #stackFramesEnd = 0;
  /** Per sample: where its stack starts in #stackFrames, its length, thread and count. */
  readonly #recordStart: number[] = [];
  readonly #recordLength: number[] = [];
  readonly #recordThread: number[] = [];
  readonly #recordCount: number[] = [];
  readonly #recordOffCpuNs: number[] = [];
  /** Per sample: its event's index in #events (-1 for a CPU sample). */
  readonly #recordEvent: number[] = [];
  readonly #events: string[] = [];
  readonly #eventIds = new Map<string, number>();
  readonly #threads: number[] = [];
  /** Thread ids by tid: the (series, pid, comm) variants seen with that tid. */
  readonly #threadIds = new Map<number, { series: number; pid: number; comm: string; id: number }[]>();
  readonly #totalSamples: number;
  #doneSamples = 0;

  constructor(byKindAndNameOnly: boolean, profiles: Profile[], options: FlamegraphDataOptions) {
    this.#byKindAndNameOnly = byKindAndNameOnly;
    this.#profiles = profiles;
    this.#options = options;
    let samples = 0, frames = 0;
    for (const profile of profiles) {
      samples += profile.samples.length;
      for (const sample of profile.samples) frames += sample.locations.length + 1;
    }
    this.#totalSamples = samples;
    this.#stackFrames = new Int32Array(frames);
    this.#string(""); // keeps index 0 meaningful in any order: "" sorts first
  }

  add(profile: Profile, series: number): void {
    const { locations, mappings, samples } = profile;
    const frameOfLocation = new Int32Array(locations.length).fill(-1);
    const nameOfProcess = processNames(profile);
    const processFrame = new Map<number, number>();
    // Every event the profile recorded is listed, hit or not, in its order.
    const events = hasEvents(profile) ? profile.events ?? [] : null;
    if (events !== null) { for (const name of events) this.#event(name); }
    const onProgress = this.#options.onProgress;
    for (let s = 0; s < samples.length; s++) {
      if (onProgress !== undefined && (this.#doneSamples & 0x3fff) === 0) {
        onProgress(this.#doneSamples, this.#totalSamples);
      }
      this.#doneSamples++;
      const sample = samples[s]!;
      const count = sample.count > 0 ? sample.count : 0;
      const offCpuNs = sampleOffCpuNs(sample);
      if (count === 0 && offCpuNs === 0) continue;
      let process = processFrame.get(sample.pid);
      if (process === undefined) {
        const name = nameOfProcess.get(sample.pid) ?? "";
        process = this.#frame(`p\0${series}\0${sample.pid}`, name, PROCESS_KIND, sample.pid);
        processFrame.set(sample.pid, process);
      }
      const leafFirst = sample.locations;
      const start = this.#stackFramesEnd;
      const stack = this.#stackFrames;
      stack[start] = process;
      for (let i = 0; i < leafFirst.length; i++) {
        const index = leafFirst[i]!;
        let frame = frameOfLocation[index];
        if (frame === undefined) {
          throw new RangeError(`Cannot build a flamegraph: sample ${s} refers to location ${index}`);
        }
        if (frame < 0) {
          const location = locations[index]!;
          const file = location.sourceFile || (mappings[location.mapping]?.fileName ?? "");
          const key = this.#byKindAndNameOnly
            ? `${location.kind}\0${location.functionName}`
            : `${location.kind}\0${location.functionName}\0${file}`;
          const fileString = this.#byKindAndNameOnly || file === "" ? -1 : this.#string(file);
          frame = this.#frame(key, location.functionName, location.kind, fileString);
          frameOfLocation[index] = frame;
        }
        stack[start + leafFirst.length - i] = frame;
      }
      this.#stackFramesEnd += leafFirst.length + 1;
      this.#recordStart.push(start);
      this.#recordLength.push(leafFirst.length + 1);
      this.#recordThread.push(this.#thread(series, sample.pid, sample.tid, sample.comm));
      this.#recordCount.push(count);
      this.#recordOffCpuNs.push(offCpuNs);
      this.#recordEvent.push(events === null ? -1 : this.#event(sampleEventName(sample, events)));
    }
  }

  finish(mode: "profile" | "diff", title: string): FlamegraphData {
    // Sort the string table so the page orders names by comparing indices, then renumber.
    const stringOrder = this.#stringList.map((_, i) => i).sort((a, b) =>
      compare(this.#stringList[a]!, this.#stringList[b]!)
    );
    const stringRank = new Int32Array(stringOrder.length);
    stringOrder.forEach((old, index) => stringRank[old] = index);
    const strings = stringOrder.map((old) => this.#stringList[old]!);

    // Number frames in (name, kind, file or pid) order, so sorted stacks put children in name order.
    const kindNames = [...this.#kinds.keys()];
    const processKind = this.#kinds.get(PROCESS_KIND);
    const oldFrames = this.#frames;
    const frameCount = oldFrames.length / 3;
    const detailKey = (f: number) => {
      const detail = oldFrames[3 * f + 2]!;
      return oldFrames[3 * f + 1] === processKind ? detail : detail < 0 ? -1 : stringRank[detail]!;
    };
    const frameOrder = Array.from({ length: frameCount }, (_, f) => f).sort((a, b) =>
      stringRank[oldFrames[3 * a]!]! - stringRank[oldFrames[3 * b]!]! ||
      compare(kindNames[oldFrames[3 * a + 1]!]!, kindNames[oldFrames[3 * b + 1]!]!) ||
      detailKey(a) - detailKey(b)
    );
    const frameRank = new Int32Array(frameCount);
    const frames: number[] = [];
    frameOrder.forEach((old, index) => {
      frameRank[old] = index;
      const isProcess = oldFrames[3 * old + 1] === processKind;
      const detail = oldFrames[3 * old + 2]!;
      frames.push(
        stringRank[oldFrames[3 * old]!]!,
        oldFrames[3 * old + 1]!,
        isProcess || detail < 0 ? detail : stringRank[detail]!,
      );
    });
    const stacks = this.#stackFrames;
    for (let i = 0; i < this.#stackFramesEnd; i++) stacks[i] = frameRank[stacks[i]!]!;
    const starts = this.#recordStart, lengths = this.#recordLength, threadOf = this.#recordThread;
    const eventOf = this.#recordEvent;
    // Stacks in lexicographic order (a prefix first), then by thread.
    const order = starts.map((_, i) => i).sort((a, b) => {
      const x = starts[a]!, y = starts[b]!;
      const n = Math.min(lengths[a]!, lengths[b]!);
      for (let i = 0; i < n; i++) {
        const d = stacks[x + i]! - stacks[y + i]!;
        if (d !== 0) return d;
      }
      return lengths[a]! - lengths[b]! || threadOf[a]! - threadOf[b]! || eventOf[a]! - eventOf[b]!;
    });

    // One walk over the sorted stacks builds the tree: each stack reuses the path it shares with the last.
    const nodeParentDistance = [0];
    const nodeFrame = [-1];
    const sampleNode: number[] = [];
    const sampleThread: number[] = [];
    const sampleCount: number[] = [];
    const sampleOffCpu: number[] = [];
    const sampleEvent: number[] = [];
    const path: number[] = [];
    let previous = -1;
    for (const record of order) {
      const start = starts[record]!, length = lengths[record]!;
      let shared = 0;
      if (previous >= 0) {
        const last = starts[previous]!;
        const limit = Math.min(lengths[previous]!, length);
        while (shared < limit && stacks[last + shared] === stacks[start + shared]) shared++;
      }
      for (let depth = shared; depth < length; depth++) {
        const node = nodeFrame.length;
        nodeParentDistance.push(node - (depth === 0 ? 0 : path[depth - 1]!));
        nodeFrame.push(stacks[start + depth]!);
        path[depth] = node;
      }
      const thread = threadOf[record]!;
      if (
        previous >= 0 && shared === length && lengths[previous] === length && threadOf[previous] === thread &&
        eventOf[previous] === eventOf[record]
      ) {
        sampleCount[sampleCount.length - 1]! += this.#recordCount[record]!;
        sampleOffCpu[sampleOffCpu.length - 1]! += this.#recordOffCpuNs[record]!;
      } else {
        sampleNode.push(path[length - 1]!);
        sampleThread.push(thread);
        sampleCount.push(this.#recordCount[record]!);
        sampleOffCpu.push(this.#recordOffCpuNs[record]!);
        sampleEvent.push(eventOf[record]!);
      }
      previous = record;
    }
    this.#options.onProgress?.(this.#totalSamples, this.#totalSamples);

    const threads = this.#threads.slice();
    for (let t = 0; t < threads.length; t += 4) threads[t + 2] = stringRank[threads[t + 2]!]!;
    const seriesNames = this.#options.seriesNames ?? (mode === "diff" ? ["before", "after"] : ["profile"]);
    const offCpu = this.#profiles.map((profile) => hasOffCpuTime(profile));
    const counted = this.#profiles.map((profile) => hasEvents(profile));
    const eventHits = (profile: Profile): number[] => {
      const hits = this.#events.map(() => 0);
      const events = profile.events ?? [];
      for (const sample of profile.samples) {
        if (!(sample.count > 0)) continue;
        const e = this.#eventIds.get(sampleEventName(sample, events))!;
        hits[e] = hits[e]! + sample.count;
      }
      return hits;
    };
    return {
      format: "omniprof-flamegraph",
      version: 1,
      mode,
      title,
      series: this.#profiles.map((profile, i) => ({
        name: seriesNames[i] ?? `profile ${i + 1}`,
        samples: profile.samples.reduce((sum, sample) => sum + (sample.count > 0 ? sample.count : 0), 0),
        durationNs: profile.durationNs,
        periodNs: profile.periodNs,
        startTimeNs: profile.startTimeNs,
        ...(offCpu[i]
          ? { offCpuNs: profile.samples.reduce((sum, sample) => sum + sampleOffCpuNs(sample), 0) }
          : {}),
        ...(counted[i] ? { eventHits: eventHits(profile) } : {}),
      })),
      strings,
      kinds: kindNames,
      kindStyles: Object.fromEntries(
        runtimeFrameKinds().filter((kind) => kindNames.includes(kind.name))
          .map(({ name, label, colour }) => [name, { label, ...colour }]),
      ),
      frames,
      nodeParentDistance,
      nodeFrame,
      threads,
      sampleNode,
      sampleThread,
      sampleCount,
      ...(offCpu.includes(true) ? { sampleOffCpuNs: sampleOffCpu } : {}),
      ...(counted.includes(true) ? { events: this.#events.slice(), sampleEvent } : {}),
    };
  }

  #string(text: string): number {
    let id = this.#strings.get(text);
    if (id === undefined) {
      id = this.#stringList.length;
      this.#stringList.push(text);
      this.#strings.set(text, id);
    }
    return id;
  }

  #event(name: string): number {
    let id = this.#eventIds.get(name);
    if (id === undefined) {
      id = this.#events.length;
      this.#events.push(name);
      this.#eventIds.set(name, id);
    }
    return id;
  }

  #frame(key: string, name: string, kind: FlamegraphKind, detail: number): number {
    let id = this.#frameIds.get(key);
    if (id === undefined) {
      let kindId = this.#kinds.get(kind);
      if (kindId === undefined) {
        kindId = this.#kinds.size;
        this.#kinds.set(kind, kindId);
      }
      id = this.#frames.length / 3;
      this.#frames.push(this.#string(name), kindId, detail);
      this.#frameIds.set(key, id);
    }
    return id;
  }

  #thread(series: number, pid: number, tid: number, comm: string): number {
    let variants = this.#threadIds.get(tid);
    if (variants === undefined) {
      variants = [];
      this.#threadIds.set(tid, variants);
    }
    for (const known of variants) {
      if (known.series === series && known.pid === pid && known.comm === comm) return known.id;
    }
    const id = this.#threads.length / 4;
    this.#threads.push(pid, tid, this.#string(comm), series);
    variants.push({ series, pid, comm, id });
    return id;
  }
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
