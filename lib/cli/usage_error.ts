/**
 * The error a command's argument parser throws for a command-line mistake: the command prints its message
 * and its usage, and exits 2. An empty message asks for the usage alone (`--help`).
 *
 * @example
 * ```ts
 * import { UsageError } from "./usage_error.ts";
 * const error = new UsageError("-F 0: the frequency must be a whole number from 1 to 20000");
 * console.log(error.message);
 * ```
 *
 * @module
 */

/** A command line mistake; the message is for the user. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}
