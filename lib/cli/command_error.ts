/**
 * The error every command throws for a failure the user can act on: `main` prints its message without a
 * stack trace and exits with its code. In a module of its own so that `main` can tell it apart without
 * loading every command.
 *
 * @example
 * ```ts
 * import { CommandError } from "./command_error.ts";
 * const error = new CommandError("No process with PID 1234", 1);
 * console.log(error.exitCode); // 1
 * ```
 *
 * @module
 */

/** A failure the user can act on; printed without a stack trace. */
export class CommandError extends Error {
  readonly exitCode: number;
  constructor(message: string, exitCode = 1) {
    super(message);
    this.name = "CommandError";
    this.exitCode = exitCode;
  }
}
