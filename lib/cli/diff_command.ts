/**
 * `omniprof diff BEFORE AFTER`: which functions grew or shrank between two pprof profiles, as shares of
 * each profile's samples (so profiles of different lengths compare); with `--html OUT`, also a
 * differential flamegraph page.
 *
 * @module
 */
import { parseOptions } from "./options.ts";
import { MAX_COUNT, parseWholeNumber } from "./numbers.ts";
import { holdsKernelAddresses } from "../output/kernel_addresses.ts";
import { OutputFile } from "../output/output_file.ts";
import { diffProfiles, formatDiffTable } from "../report/diff.ts";
import { formatDiffHtml } from "../report/diff_html.ts";
import { totalSampleCount } from "../report/top.ts";
import { countUnit } from "../report/event_summary.ts";
import type { Profile } from "../profile/profile.ts";
import { readPprofFile } from "./report_command.ts";
import { baseName } from "../sys/path.ts";
import { progressReporter, StatusLine } from "./status_line.ts";

const USAGE = `Usage: omniprof diff [options] BEFORE AFTER

Compares two pprof profiles function by function: the change of each function's share of the samples,
self and total, biggest change first.

Options:
  -n, --top N      how many functions to print (default 25)
      --html OUT   also write a differential flamegraph (red: grew, blue: shrank) to OUT
  -h, --help       show this help`;

/** Runs `diff`; returns the exit code. */
export async function diffCommand(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseOptions(
      argv,
      {
        top: { type: "string", short: "n" },
        html: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
      { allowPositionals: true },
    );
  } catch (error) {
    console.error(`omniprof diff: ${error instanceof Error ? error.message : error}\n\n${USAGE}`);
    return 2;
  }
  const values = parsed.values;
  if (values.help || parsed.positionals.length !== 2) {
    console.error(USAGE);
    return values.help ? 0 : 2;
  }
  const [beforePath, afterPath] = parsed.positionals as [string, string];
  let limit = 25;
  if (values.top !== undefined) {
    try {
      limit = parseWholeNumber(values.top, "-n", { min: 1, max: MAX_COUNT });
    } catch (error) {
      console.error(`omniprof diff: ${error instanceof Error ? error.message : error}\n\n${USAGE}`);
      return 2;
    }
  }
  using output = values.html === undefined ? null : OutputFile.open(values.html);
  const before = await readPprofFile(beforePath);
  const after = await readPprofFile(afterPath);
  const diff = diffProfiles(before, after);
  console.log(`before: ${describe(beforePath, before)}`);
  console.log(`after:  ${describe(afterPath, after)}`);
  console.log("Shares of each profile's samples; changes in percentage points (pp).\n");
  console.log(formatDiffTable(diff, { limit }));
  if (output !== null) {
    const status = new StatusLine();
    const html = formatDiffHtml(before, after, {
      title: `${baseName(beforePath)} → ${baseName(afterPath)}`,
      seriesNames: [beforePath, afterPath],
      onProgress: progressReporter(status, `writing ${output.path}`),
    });
    status.update(`writing ${output.path}`);
    try {
      // The page names the functions of both profiles: private if one is a kernel address.
      const kernelAddresses = [before, after].some((p) => holdsKernelAddresses(p, { namesOnly: true }));
      await output.write(html, { private: kernelAddresses });
    } finally {
      status.clear();
    }
    status.note(`wrote ${output.path} (differential flamegraph)`);
  }
  return 0;
}

function describe(path: string, profile: Profile): string {
  return `${path}, ${totalSampleCount(profile)} ${countUnit(profile)} over ${
    (profile.durationNs / 1e9).toFixed(1)
  } s`;
}
