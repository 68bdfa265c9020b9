/**
 * The commands the README tells a new user to type first: the lines of the first `sh` block under its
 * "## The two commands" heading, comments and blank lines left out. The fresh-machine check runs exactly
 * these, so that it follows the README when the README changes.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { readmeCommands } from "./readme_commands.ts";
 * const readme = "## The two commands\n\n```sh\n# build\nmake\n\nmake test\n```\n";
 * assert.deepEqual(readmeCommands(readme), ["make", "make test"]);
 * ```
 *
 * @module
 */

const HEADING = "## The two commands";

/** The commands of the README's first-commands block; throws when the README has none. */
export function readmeCommands(readme: string): string[] {
  const start = readme.indexOf(`${HEADING}\n`);
  const after = start < 0 ? "" : readme.slice(start + HEADING.length);
  const end = after.search(/\n## /);
  const block = /```sh\n([\s\S]*?)```/.exec(end < 0 ? after : after.slice(0, end))?.[1] ?? "";
  const commands = block.split("\n").map((line) => line.trim()).filter((line) =>
    line !== "" && !line.startsWith("#")
  );
  if (commands.length === 0) {
    throw new Error(`Cannot find the commands: the README has no sh block under "${HEADING}"`);
  }
  return commands;
}
