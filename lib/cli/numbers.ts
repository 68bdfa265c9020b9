/**
 * Numbers on the command line: counts, rates, PIDs and durations, written in plain decimal and checked
 * against their range here, at the edge. `Number()` would take `0x10`, `1e3`, `+5`, ` 5 ` and the empty
 * string (0) for numbers, so that `-p 0x10` profiled PID 16; every numeric option goes through these
 * instead.
 *
 * @example
 * ```ts
 * import { parseSeconds, parseWholeNumber } from "./numbers.ts";
 * import assert from "node:assert/strict";
 * assert.equal(parseWholeNumber("49", "-F", { min: 1, max: 20000 }), 49);
 * assert.equal(parseSeconds("2.5", "-d"), 2.5);
 * assert.throws(() => parseWholeNumber("0x10", "-F", { min: 1, max: 20000 }));
 * ```
 *
 * @module
 */
import { asPid, type Pid } from "../types.ts";
import { MAX_TIMER_MS } from "../sys/timer.ts";
import { UsageError } from "./usage_error.ts";

/** Digits only: no sign, no spaces, no other base, no exponent. */
const WHOLE = /^[0-9]+$/;
/** Digits with at most three decimals (milliseconds), and a digit on each side of the point. */
const DECIMAL_SECONDS = /^[0-9]+(\.[0-9]{1,3})?$/;
/** More digits than this cannot be in any range below 2^53, and would lose precision. */
const MAX_DIGITS = 15;
/** The longest duration an option takes: what a timer can wait, in whole seconds (about 24 days). */
export const MAX_SECONDS = Math.floor(MAX_TIMER_MS / 1000);
/** The most of anything counted on the command line (rows, refreshes, profiles held). */
export const MAX_COUNT = 1_000_000;
/** The highest sampling rate `-F` takes, per CPU. */
export const MAX_FREQUENCY_HZ = 20000;
/** The kernel's PID_MAX_LIMIT on 64-bit systems, used when /proc/sys/kernel/pid_max cannot be read. */
const PID_MAX_LIMIT = 4194304;

/** The range a number must fall in, both ends included. */
export interface NumberRange {
  readonly min: number;
  readonly max: number;
  /** Appended to the bounds in the message ("Hz"). */
  readonly unit?: string;
}

/**
 * `text` as a whole number in `range`: decimal digits and nothing else.
 *
 * @throws {UsageError} naming `option` and what it accepts.
 */
export function parseWholeNumber(text: string, option: string, range: NumberRange): number {
  const unit = range.unit === undefined ? "" : ` ${range.unit}`;
  const expected = `expected a whole number from ${range.min} to ${range.max}${unit}`;
  if (!WHOLE.test(text)) throw new UsageError(`${option} ${shown(text)}: ${expected}, in decimal digits`);
  const value = text.length > MAX_DIGITS ? Infinity : Number(text);
  if (value < range.min || value > range.max) throw new UsageError(`${option} ${text}: ${expected}`);
  return value;
}

/**
 * `text` as a sampling rate: a whole number of Hz from 1 to {@linkcode MAX_FREQUENCY_HZ}.
 *
 * @throws {UsageError} naming `option` and the range.
 */
export function parseFrequency(text: string, option: string): number {
  return parseWholeNumber(text, option, { min: 1, max: MAX_FREQUENCY_HZ, unit: "Hz" });
}

/**
 * `text` as seconds: decimal digits with at most three decimals (`2`, `0.5`, `1.25`), at least `minSeconds`
 * and at most {@linkcode MAX_SECONDS} (a timer cannot wait longer).
 *
 * @throws {UsageError} naming `option` and what it accepts.
 */
export function parseSeconds(text: string, option: string, minSeconds = 0.001): number {
  const expected = `expected seconds from ${minSeconds} to ${MAX_SECONDS}`;
  if (!DECIMAL_SECONDS.test(text)) {
    throw new UsageError(`${option} ${shown(text)}: ${expected}, in decimal digits (at most 3 decimals)`);
  }
  const point = text.indexOf(".");
  const whole = point < 0 ? text : text.slice(0, point);
  // Whole milliseconds, counted in integers: the text is exact, a float product may not be.
  const ms = whole.length > MAX_DIGITS
    ? Infinity
    : Number(whole) * 1000 + (point < 0 ? 0 : Number(text.slice(point + 1).padEnd(3, "0")));
  if (ms < minSeconds * 1000) throw new UsageError(`${option} ${text}: ${expected}`);
  if (ms > MAX_SECONDS * 1000) {
    throw new UsageError(
      `${option} ${text}: at most ${MAX_SECONDS} s (about 24 days, the longest a timer can wait)`,
    );
  }
  return ms / 1000;
}

/**
 * `text` as the PID of a process that can exist here: from 1 to one below /proc/sys/kernel/pid_max.
 *
 * @throws {UsageError} naming `option` and the range.
 */
export function parsePid(text: string, option: string): Pid {
  const highest = pidMax() - 1;
  if (!WHOLE.test(text)) {
    throw new UsageError(`${option} ${shown(text)}: not a process id (decimal digits from 1 to ${highest})`);
  }
  const value = text.length > MAX_DIGITS ? Infinity : Number(text);
  if (value < 1 || value > highest) {
    throw new UsageError(`${option} ${text}: not a process id (PIDs here go from 1 to ${highest})`);
  }
  return asPid(value);
}

/** One more than the highest PID the kernel hands out. */
function pidMax(): number {
  try {
    const value = Number(Deno.readTextFileSync("/proc/sys/kernel/pid_max").trim());
    if (Number.isInteger(value) && value > 1 && value <= PID_MAX_LIMIT) return value;
  } catch {
    // no procfs: the kernel's own limit still bounds every PID
  }
  return PID_MAX_LIMIT;
}

/** The text as the user typed it, quoted when it would not show (empty, spaces). */
function shown(text: string): string {
  return text === "" || text.trim() !== text ? JSON.stringify(text) : text;
}
