/**
 * `omniprof report FILE`: the top functions of a pprof profile (ours or any other tool's), by self and
 * total samples.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { decodePprof } from "../output/pprof_reader.ts";
import { formatTopTable, topFunctions, totalSampleCount } from "../report/top.ts";
import { CommandError } from "./record_command.ts";

const USAGE = `Usage: omniprof report [-n N] FILE

Prints the N (default 25) functions with the most self samples of a pprof profile (.pb.gz or .pb).`;

/** Runs `report`; returns the exit code. */
export function reportCommand(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { top: { type: "string", short: "n" }, help: { type: "boolean", short: "h" } },
    });
  } catch (error) {
    console.error(`omniprof report: ${error instanceof Error ? error.message : error}\n\n${USAGE}`);
    return Promise.resolve(2);
  }
  if (parsed.values.help || parsed.positionals.length !== 1) {
    console.error(USAGE);
    return Promise.resolve(parsed.values.help ? 0 : 2);
  }
  const path = parsed.positionals[0]!;
  const limit = parsed.values.top === undefined ? 25 : Number(parsed.values.top);
  if (!Number.isInteger(limit) || limit <= 0) {
    throw new CommandError(`-n ${parsed.values.top}: expected a count`);
  }
  let bytes: Uint8Array;
  try {
    bytes = Deno.readFileSync(path);
  } catch (error) {
    throw new CommandError(`Cannot read ${path}: ${error instanceof Error ? error.message : error}`);
  }
  let profile;
  try {
    profile = decodePprof(bytes);
  } catch (error) {
    throw new CommandError(
      `Cannot read ${path} as a pprof profile: ${error instanceof Error ? error.message : error}`,
    );
  }
  const total = totalSampleCount(profile);
  const seconds = profile.durationNs / 1e9;
  console.log(
    `${path}: ${total} samples over ${seconds.toFixed(1)} s, ${profile.samples.length} distinct stacks, ` +
      `${new Set(profile.samples.map((sample) => sample.pid)).size} processes`,
  );
  console.log(formatTopTable(topFunctions(profile, { limit }), total));
  return Promise.resolve(0);
}
