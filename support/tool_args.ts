/**
 * Command-line options of the repository's own tools (build.ts, the qemu kernel tasks, fresh-machine):
 * `--help` prints the tool's usage, and an unknown or malformed option ends it with exit code 2, a line
 * saying what was wrong and the usage, never a stack trace.
 *
 * @example
 * ```ts ignore
 * import { parseToolArgs } from "./tool_args.ts";
 * const { values } = parseToolArgs("build", "Usage: deno run -A build.ts [--check]", {
 *   args: Deno.args,
 *   options: { check: { type: "boolean", default: false } },
 * });
 * ```
 *
 * @module
 */
import { parseArgs, type ParseArgsConfig } from "node:util";

/** `parseArgs(config)`, or the end of the process with the usage (exit 0 for --help, 2 for an error). */
export function parseToolArgs<T extends ParseArgsConfig>(
  tool: string,
  usage: string,
  config: T,
): ReturnType<typeof parseArgs<T>> {
  if (config.args?.includes("--help") || config.args?.includes("-h")) {
    console.log(usage);
    Deno.exit(0);
  }
  try {
    return parseArgs(config);
  } catch (error) {
    console.error(`${tool}: ${error instanceof Error ? error.message : String(error)}\n${usage}`);
    Deno.exit(2);
  }
}
