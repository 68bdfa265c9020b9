/**
 * The speedscope file format (https://www.speedscope.app/file-format-schema.json): "sampled" profiles
 * over one shared frame table, which speedscope, and tools that read its format, open directly.
 *
 * One profile per process, busiest first (speedscope opens the first): an omniprof profile holds
 * aggregated counts, not a timeline, so splitting per thread would add no time order, only more entries
 * to pick from (whole-system profiles have thousands of threads), while the threads of one process
 * usually run the same code (thread pools), which is what one wants to see together. The thread filter
 * of the HTML page is there for per-thread views.
 *
 * Frames are functions: name, and file (the source file, else the mapping's file name), without line
 * numbers, since speedscope would otherwise split a function into one frame per sampled line. Weights are
 * CPU time in nanoseconds (samples times the sampling period), or sample counts (unit "none") when the
 * period is unknown. A profile with off-CPU time (`record --off-cpu`) weighs wall time in nanoseconds
 * instead: CPU samples by the period, off-CPU samples by the time their thread was switched out, so that
 * speedscope's views (which know one weight only) show where time went, not only where the CPU went.
 *
 * A profile of probe events (`record -e`) weighs hit counts (unit "none": speedscope shows them as plain
 * numbers), never time, as its period is 0. With several events, each process gets one profile per
 * event, named `app (pid 7): EVENT`, busiest first like the rest: speedscope sums every weight of a
 * profile, and hits of one probe added to another's would count nothing real.
 *
 * @example
 * ```ts
 * import { formatSpeedscope } from "./speedscope.ts";
 * import type { Profile, ProfileSample } from "../profile/profile.ts";
 * declare const profile: Profile;
 * Deno.writeTextFileSync("cpu.speedscope.json", formatSpeedscope(profile, { name: "nginx" }));
 * ```
 *
 * @module
 */

import type { Profile, ProfileSample } from "../profile/profile.ts";
import { hasOffCpuTime, sampleWallNs } from "../profile/wall_time.ts";
import { processNames } from "../profile/process_names.ts";
import { sampleEventIndex, UNKNOWN_EVENT } from "../profile/events.ts";

/** The schema URL speedscope files declare. */
export const SPEEDSCOPE_SCHEMA_URL = "https://www.speedscope.app/file-format-schema.json";

/** A frame of the shared table. */
export interface SpeedscopeFrame {
  name: string;
  file?: string;
}

/** A sampled profile: stacks (root first, frame indices) with a weight each. */
export interface SpeedscopeSampledProfile {
  type: "sampled";
  name: string;
  unit: "nanoseconds" | "none";
  startValue: number;
  endValue: number;
  samples: number[][];
  weights: number[];
}

/** A whole speedscope file. */
export interface SpeedscopeFile {
  $schema: typeof SPEEDSCOPE_SCHEMA_URL;
  shared: { frames: SpeedscopeFrame[] };
  profiles: SpeedscopeSampledProfile[];
  name: string;
  activeProfileIndex: number;
  exporter: string;
}

/** Options of {@linkcode speedscopeFile}. */
export interface SpeedscopeOptions {
  /** The file's name as speedscope shows it (default "omniprof profile"). */
  name?: string;
}

const KERNEL_FILE = "[kernel]";

/**
 * Converts `profile` into a speedscope file: one sampled profile per process, busiest first.
 *
 * @example
 * ```ts
 * import { speedscopeFile } from "./speedscope.ts";
 * const file = speedscopeFile({
 *   startTimeNs: 0, durationNs: 1e9, periodNs: 1e7, mappings: [],
 *   locations: [{ kind: "native", mapping: -1, address: 0, functionName: "main", sourceFile: "", line: 0 }],
 *   samples: [{ locations: [0], count: 3, pid: 7, tid: 7, comm: "app" }],
 * });
 * // file.profiles[0]: { name: "app (pid 7)", unit: "nanoseconds", samples: [[0]], weights: [30000000], ... }
 * ```
 */
export function speedscopeFile(profile: Profile, options: SpeedscopeOptions = {}): SpeedscopeFile {
  const { locations, mappings, samples } = profile;
  const frames: SpeedscopeFrame[] = [];
  const frameIds = new Map<string, number>();
  const frameOfLocation = new Int32Array(locations.length).fill(-1);
  const wall = hasOffCpuTime(profile);
  // Hits of probe events are counts whatever the period says (it is 0 there).
  const events = profile.events;
  const unit = events === undefined && (wall || profile.periodNs > 0) ? "nanoseconds" : "none";
  const weightPerSample = events === undefined && profile.periodNs > 0 ? profile.periodNs : 1;
  // With several events, a profile per process and event: samples are grouped by this key.
  const splitEvents = events !== undefined && events.length > 1;
  const weightOf = (sample: ProfileSample): number =>
    wall ? sampleWallNs(sample, profile.periodNs) : sample.count > 0 ? sample.count * weightPerSample : 0;

  interface Building {
    pid: number;
    /** The event's index, events.length for samples of no event, -1 when not split by event. */
    event: number;
    stacks: Map<string, number>;
    stackList: number[][];
    weights: number[];
    total: number;
  }
  const processes = new Map<number | string, Building>();
  const names = processNames(profile);
  for (let s = 0; s < samples.length; s++) {
    const sample = samples[s]!;
    const weight = weightOf(sample);
    if (!(weight > 0)) continue;
    const stack: number[] = new Array(sample.locations.length);
    // Root first, so frames are numbered in the order a reader meets them.
    for (let i = sample.locations.length - 1; i >= 0; i--) {
      const index = sample.locations[i]!;
      let frame = frameOfLocation[index];
      if (frame === undefined) {
        throw new RangeError(`Cannot write speedscope: sample ${s} refers to location ${index}`);
      }
      if (frame < 0) {
        const location = locations[index]!;
        const file = location.sourceFile ||
          (mappings[location.mapping]?.fileName ?? (location.kind === "kernel" ? KERNEL_FILE : ""));
        const name = location.functionName || "[unknown]";
        const key = `${name}\0${file}`;
        frame = frameIds.get(key) ?? -1;
        if (frame < 0) {
          frame = frames.length;
          frames.push(file === "" ? { name } : { name, file });
          frameIds.set(key, frame);
        }
        frameOfLocation[index] = frame;
      }
      // Leaf first in the profile, root first in speedscope.
      stack[sample.locations.length - 1 - i] = frame;
    }
    let event = -1;
    if (splitEvents) {
      event = sampleEventIndex(sample, events);
      if (event === -1) event = events.length;
    }
    const group = splitEvents ? `${sample.pid}:${event}` : sample.pid;
    let building = processes.get(group);
    if (building === undefined) {
      building = {
        pid: sample.pid,
        event,
        stacks: new Map(),
        stackList: [],
        weights: [],
        total: 0,
      };
      processes.set(group, building);
    }
    building.total += weight;
    const key = stack.join(",");
    const existing = building.stacks.get(key);
    if (existing !== undefined) {
      building.weights[existing] = building.weights[existing]! + weight;
    } else {
      building.stacks.set(key, building.stackList.length);
      building.stackList.push(stack);
      building.weights.push(weight);
    }
  }
  const ordered = [...processes.values()].sort((a, b) =>
    b.total - a.total || a.pid - b.pid || a.event - b.event
  );
  const eventName = (event: number) => event === -1 ? "" : `: ${events?.[event] ?? UNKNOWN_EVENT}`;
  return {
    $schema: SPEEDSCOPE_SCHEMA_URL,
    shared: { frames },
    profiles: ordered.map((building) => ({
      type: "sampled",
      name: `${names.get(building.pid) || "[unknown]"} (pid ${building.pid})${eventName(building.event)}`,
      unit,
      startValue: 0,
      endValue: building.total,
      samples: building.stackList,
      weights: building.weights,
    })),
    name: options.name ?? "omniprof profile",
    activeProfileIndex: 0,
    exporter: "omniprof",
  };
}

/** {@linkcode speedscopeFile} as JSON text, ending in a newline. */
export function formatSpeedscope(profile: Profile, options: SpeedscopeOptions = {}): string {
  return JSON.stringify(speedscopeFile(profile, options)) + "\n";
}
