/**
 * The fields of a `/proc/PID/stat` (or `/proc/PID/task/TID/stat`) line. The command name, field 2, is in
 * parentheses and may itself hold spaces and parentheses, so the fixed fields are counted from the last
 * ")": proc(5)'s field N is at index N - 3 of what {@linkcode statFields} returns.
 *
 * @example
 * ```ts
 * import { statFields } from "./proc_stat.ts";
 * const fields = statFields("42 (a (b) c) S 1 42 42 0 -1");
 * console.log(fields?.[0], fields?.[1]); // "S" (field 3, state) "1" (field 4, parent pid)
 * ```
 *
 * @module
 */

/** Fields 3 and on of a stat line, or null when it has no command name in parentheses. */
export function statFields(text: string): string[] | null {
  const close = text.lastIndexOf(")");
  return close < 0 ? null : text.slice(close + 2).split(" ");
}
