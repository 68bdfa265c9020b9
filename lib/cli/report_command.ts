/**
 * `omniprof report FILE`: the top functions of a pprof profile (ours or any other tool's), by self and
 * total samples (hits, for a profile of probe events, with each event's total when there are several); or the profile converted: folded stacks on stdout, an interactive flamegraph page, or a
 * speedscope file.
 *
 * @module
 */
import { parseOptions } from "./options.ts";
import { MAX_COUNT, parseWholeNumber } from "./numbers.ts";
import { formatFolded } from "../output/folded.ts";
import { formatFlamegraphHtml } from "../output/html/flamegraph.ts";
import { decodePprof, PPROF_LIMITS } from "../output/pprof_reader.ts";
import { formatSpeedscope } from "../output/speedscope.ts";
import type { Profile } from "../profile/profile.ts";
import { holdsKernelAddresses } from "../output/kernel_addresses.ts";
import { OutputFile } from "../output/output_file.ts";
import { formatTopTable, topFunctions, totalSampleCount } from "../report/top.ts";
import { sampleOffCpuNs } from "../profile/wall_time.ts";
import { timeSummary } from "../report/time_summary.ts";
import { countUnit, eventSummary } from "../report/event_summary.ts";
import { CommandError } from "./command_error.ts";
import { progressReporter, StatusLine } from "./status_line.ts";
import { baseName } from "../sys/path.ts";
import { readInputFile } from "../sys/input_file.ts";

const USAGE = `Usage: omniprof report [options] FILE

Prints the N (default 25) functions with the most self samples of a pprof profile (.pb.gz or .pb),
or converts it. A profile with off-CPU time (record --off-cpu) gets a second table: the functions
threads waited in, by off-CPU time.

Options:
  -n, --top N          how many functions to print (default 25)
      --folded         print folded stacks (comm;root;...;leaf COUNT) instead
      --html OUT       write an interactive flamegraph page to OUT instead
      --speedscope OUT write a speedscope file to OUT instead
  -h, --help           show this help`;

/**
 * Reads a pprof file, turning any failure into a CommandError that names the file. The file is read with
 * the reader's own bound (a larger file could not decode anyway), and an empty one is refused: no tool
 * writes a profile of zero bytes, so it is a failed or truncated copy.
 */
export async function readPprofFile(path: string): Promise<Profile> {
  let bytes: Uint8Array;
  try {
    bytes = await readInputFile(path, { maxBytes: PPROF_LIMITS.maxBytes, kind: "pprof profile" });
  } catch (error) {
    throw new CommandError(error instanceof Error ? error.message : String(error));
  }
  if (bytes.length === 0) throw new CommandError(`Cannot read ${path} as a pprof profile: the file is empty`);
  try {
    return decodePprof(bytes);
  } catch (error) {
    throw new CommandError(
      `Cannot read ${path} as a pprof profile: ${error instanceof Error ? error.message : error}`,
    );
  }
}

/** Runs `report`; returns the exit code. */
export async function reportCommand(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseOptions(
      argv,
      {
        top: { type: "string", short: "n" },
        folded: { type: "boolean" },
        html: { type: "string" },
        speedscope: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
      { allowPositionals: true },
    );
  } catch (error) {
    console.error(`omniprof report: ${error instanceof Error ? error.message : error}\n\n${USAGE}`);
    return 2;
  }
  const values = parsed.values;
  if (values.help || parsed.positionals.length !== 1) {
    console.error(USAGE);
    return values.help ? 0 : 2;
  }
  const conversions = [values.folded, values.html, values.speedscope].filter((v) => v !== undefined).length;
  if (conversions > 1) {
    console.error(`omniprof report: choose one of --folded, --html and --speedscope\n\n${USAGE}`);
    return 2;
  }
  const path = parsed.positionals[0]!;
  let limit = 25;
  if (values.top !== undefined) {
    try {
      limit = parseWholeNumber(values.top, "-n", { min: 1, max: MAX_COUNT });
    } catch (error) {
      console.error(`omniprof report: ${error instanceof Error ? error.message : error}\n\n${USAGE}`);
      return 2;
    }
  }
  const outputPath = values.html ?? values.speedscope;
  using output = outputPath === undefined ? null : OutputFile.open(outputPath);
  const profile = await readPprofFile(path);
  if (values.folded) {
    // writeSync may write part of a large buffer to a pipe: loop until all of it is out.
    const bytes = new TextEncoder().encode(formatFolded(profile));
    for (let offset = 0; offset < bytes.length;) offset += Deno.stdout.writeSync(bytes.subarray(offset));
    return 0;
  }
  if (output !== null) {
    const status = new StatusLine();
    const data = values.html !== undefined
      ? formatFlamegraphHtml(profile, {
        title: baseName(path),
        seriesNames: [path],
        onProgress: progressReporter(status, `writing ${output.path}`),
      })
      : formatSpeedscope(profile, { name: baseName(path) });
    status.update(`writing ${output.path}`);
    try {
      // Names are all these formats take of a profile: private if one is a kernel address.
      await output.write(data, { private: holdsKernelAddresses(profile, { namesOnly: true }) });
    } finally {
      status.clear();
    }
    status.note(`wrote ${output.path} (${values.html !== undefined ? "html" : "speedscope"})`);
    return 0;
  }
  const total = totalSampleCount(profile);
  const seconds = profile.durationNs / 1e9;
  console.log(
    `${path}: ${total} ${countUnit(profile)} over ${
      seconds.toFixed(1)
    } s, ${profile.samples.length} distinct stacks, ` +
      `${new Set(profile.samples.map((sample) => sample.pid)).size} processes`,
  );
  // With off-CPU time, a line of each total: the first table counts CPU samples only, a second one
  // where threads waited.
  const times = timeSummary(profile);
  if (times !== null) console.log(`${times}; functions by CPU samples:`);
  // With several probe events, each one's hits: the table adds them all up.
  const events = eventSummary(profile);
  if (events !== null && events.length > 0) {
    console.log(`${events.join("\n")}\nfunctions by hits of all events:`);
  }
  console.log(formatTopTable(topFunctions(profile, { limit }), total));
  if (times !== null) {
    const offCpuNs = profile.samples.reduce((sum, sample) => sum + sampleOffCpuNs(sample), 0);
    console.log("functions by off-CPU time:");
    console.log(
      formatTopTable(topFunctions(profile, { limit, value: "offCpu" }), offCpuNs, { unit: "ns" }),
    );
  }
  return 0;
}
