/**
 * Which CPUs are online, from the kernel's CPU list format ("0-3,8,10-11").
 *
 * @example
 * ```ts
 * import { parseCpuList } from "./cpus.ts";
 * import assert from "node:assert/strict";
 * assert.deepEqual(parseCpuList("0-2,5\n"), [0, 1, 2, 5]);
 * ```
 *
 * @module
 */

/** Parses a kernel CPU list such as `/sys/devices/system/cpu/online`. */
export function parseCpuList(text: string): number[] {
  const cpus: number[] = [];
  const trimmed = text.trim();
  if (trimmed === "") return cpus;
  for (const part of trimmed.split(",")) {
    const match = /^(\d+)(?:-(\d+))?$/.exec(part);
    if (!match) throw new RangeError(`Cannot parse CPU list: bad range "${part}"`);
    const first = Number(match[1]);
    const last = match[2] === undefined ? first : Number(match[2]);
    if (last < first || last - first > 65536) {
      throw new RangeError(`Cannot parse CPU list: bad range "${part}"`);
    }
    for (let cpu = first; cpu <= last; cpu++) cpus.push(cpu);
  }
  return cpus;
}

/** The CPUs that are online now. */
export function onlineCpus(): number[] {
  return parseCpuList(Deno.readTextFileSync("/sys/devices/system/cpu/online"));
}
