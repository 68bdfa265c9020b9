/**
 * `--off-cpu` and `--off-cpu-min US`, as `record` and `agent` read them.
 *
 * @example
 * ```ts
 * import { parseOffCpuMinUs } from "./off_cpu_option.ts";
 * import assert from "node:assert/strict";
 * assert.equal(parseOffCpuMinUs(true, "250"), 250);
 * assert.equal(parseOffCpuMinUs(false, undefined), null);
 * ```
 *
 * @module
 */
import { DEFAULT_OFF_CPU_MIN_US } from "../record/off_cpu.ts";
import { parseWholeNumber } from "./numbers.ts";
import { UsageError } from "./usage_error.ts";

/** The longest minimum wait accepted, µs: an hour. */
const MAX_OFF_CPU_MIN_US = 3_600_000_000;

/**
 * The minimum wait in µs of `--off-cpu` (`offCpu`) with `--off-cpu-min` given as `minText`, or null
 * without `--off-cpu`. Throws UsageError for a bad number or a minimum without `--off-cpu`.
 */
export function parseOffCpuMinUs(offCpu: boolean, minText: string | undefined): number | null {
  if (minText !== undefined && !offCpu) throw new UsageError("--off-cpu-min needs --off-cpu");
  if (!offCpu) return null;
  if (minText === undefined) return DEFAULT_OFF_CPU_MIN_US;
  return parseWholeNumber(minText, "--off-cpu-min", { min: 0, max: MAX_OFF_CPU_MIN_US, unit: "µs" });
}
