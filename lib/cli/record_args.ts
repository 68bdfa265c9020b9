/**
 * The `record` command line: parsed and validated here, at the edge, into {@linkcode RecordArgs}.
 *
 * @example
 * ```ts
 * import { parseRecordArgs } from "./record_args.ts";
 * import assert from "node:assert/strict";
 * const args = parseRecordArgs(["-F", "49", "-o", "out.folded", "--", "sleep", "1"]);
 * assert.equal(args.format, "folded");
 * assert.deepEqual(args.command, ["sleep", "1"]);
 * ```
 *
 * @module
 */
import { parseOptions } from "./options.ts";
import type { Pid } from "../types.ts";
import { STDOUT_PATH } from "../output/output_file.ts";
import { parseFrequency, parsePid, parseSeconds } from "./numbers.ts";
import { DEFAULT_OFF_CPU_MIN_US } from "../record/off_cpu.ts";
import { parseProbe, ProbeError, type ProbeSpec } from "../probe/probe_spec.ts";
import { UsageError } from "./usage_error.ts";
import { parseOffCpuMinUs } from "./off_cpu_option.ts";
import { Limits } from "../../support/types.ts";

export { UsageError };

/** Output formats `record` writes. */
export type OutputFormat = "pprof" | "folded" | "html" | "speedscope";

const FORMATS: readonly OutputFormat[] = ["pprof", "folded", "html", "speedscope"];
/** Probes one recording can count (bpf/probe.bpf.c has an entry program for each). */
const MAX_EVENTS = Limits.MaxProbes;

/** A validated `record` invocation. */
export interface RecordArgs {
  /** Seconds to record; null: until Ctrl-C or until the command exits. */
  durationSeconds: number | null;
  frequencyHz: number;
  pids: Pid[];
  output: string;
  format: OutputFormat;
  /** Command to start and profile with its children; empty when none. */
  command: string[];
  /** Profile the built-in demo workload. */
  demo: boolean;
  /** Record idle CPUs too. */
  idle: boolean;
  /** Where to write the session's counters as JSON, or null. */
  statsPath: string | null;
  /** Keep exact kernel addresses in the profile (it is then readable by its owner only). */
  kernelAddresses: boolean;
  /** Record off-CPU time too: waits of at least this many µs; null: CPU samples only. */
  offCpuMinUs: number | null;
  /** Probes (`-e`) to count instead of sampling CPUs; empty: CPU samples. */
  probes: ProbeSpec[];
}

export const RECORD_USAGE = `Usage: omniprof record [options] [-- COMMAND [ARGS...]]

Samples stacks (kernel + user) on every CPU and writes a profile.

With -- COMMAND, starts COMMAND and records it and every process it starts. COMMAND runs in a session
of its own (it keeps the terminal as input and output, but cannot open /dev/tty): Ctrl-C, SIGTERM and
SIGHUP sent to omniprof are passed on to it. When COMMAND exits, -d ends or omniprof is stopped, whatever
of it still runs gets SIGTERM (or the signal omniprof got), then SIGKILL 2 s later; the profile is then
written, and omniprof exits with COMMAND's status if COMMAND failed (128+N when signal N ended it).
After Ctrl-C, another Ctrl-C kills COMMAND at once; one while symbolizing writes the profile with
addresses for the names not found yet.

Options:
  -d, --duration SECONDS   stop after SECONDS, and stop COMMAND then (default: until Ctrl-C, or until
                           COMMAND exits; at most 2147483)
  -F, --frequency HZ       samples per second per CPU (default 99)
  -p, --pid PID            only this process and its threads (repeatable); stops when all have exited
  -o, --output FILE        where to write (default profile.pb.gz; - for standard output, as folded
                           stacks unless --format says otherwise)
      --format FORMAT      pprof, folded, html or speedscope (default: from the extension: .pb.gz/.pb
                           pprof, .folded folded, .html an interactive flamegraph, .speedscope.json
                           speedscope)
      --demo               profile the built-in demo workload (5 s unless -d)
      --idle               also record idle CPUs
      --off-cpu            also record off-CPU time: for every thread in scope, the time from being
                           switched out (blocked on a lock, disk, socket or sleep, or waiting for a
                           CPU) to running again, charged to the stack it waited in. Folded output is
                           then in microseconds of wall time (CPU samples weigh the sampling period);
                           pprof gets an off_cpu/nanoseconds value; HTML switches between on-CPU,
                           off-CPU and both
      --off-cpu-min US     with --off-cpu, leave out waits shorter than US microseconds, in the
                           kernel (default ${DEFAULT_OFF_CPU_MIN_US})
  -e, --event EVENT        count EVENT, with the full stack of the thread at each hit, instead of sampling
                           CPUs (repeatable, at most 8; -p and -- COMMAND filter them as they do
                           samples): uprobe:PATH:SYMBOL (a function's entry; PATH without a slash is
                           looked up in PATH and the library folders), uretprobe:PATH:SYMBOL (its
                           return), tracepoint:CATEGORY:NAME (a kernel tracepoint; tracefs is mounted
                           for the session if it is not), kprobe:FUNCTION (a kernel function, where the
                           kernel allows kprobes). Outputs count hits; with several events, folded lines
                           start with the event and pprof samples carry an "event" label
      --stats FILE         also write the session's counters (samples, lost, BPF metrics) as JSON
      --kernel-addresses   keep exact kernel addresses (pprof locations, unnamed kernel frames); they
                           reveal where the kernel is loaded (KASLR), so the file is then made readable
                           by its owner only (0600). Default: kernel frames are function names only
  -h, --help               show this help

Output: FILE is replaced atomically by a complete new file (0644, less the umask), which belongs to the
user who ran sudo when run with sudo. If FILE is changed while recording (say a link is put there), it is
left alone and the profile is kept beside it under a new name, which omniprof prints. A link at FILE is
followed only when it belongs to you or root. A FIFO waits up to 10 s for a reader.
`;

/** Infers the format from a file name, or null when the extension says nothing. */
export function formatFromPath(path: string): OutputFormat | null {
  if (/\.pb(\.gz)?$/.test(path) || /\.pprof$/.test(path)) return "pprof";
  if (/\.(folded|collapsed)$/.test(path) || /\.txt$/.test(path)) return "folded";
  if (/\.html?$/.test(path)) return "html";
  if (/\.speedscope\.json$/.test(path)) return "speedscope";
  return null;
}

/** Parses `record`'s arguments (without the word "record"). Throws UsageError. */
export function parseRecordArgs(argv: string[]): RecordArgs {
  const separator = argv.indexOf("--");
  const own = separator < 0 ? argv : argv.slice(0, separator);
  const command = separator < 0 ? [] : argv.slice(separator + 1);
  let parsed;
  try {
    parsed = parseOptions(
      own,
      {
        duration: { type: "string", short: "d" },
        frequency: { type: "string", short: "F" },
        pid: { type: "string", short: "p", multiple: true },
        output: { type: "string", short: "o" },
        format: { type: "string" },
        demo: { type: "boolean" },
        idle: { type: "boolean" },
        stats: { type: "string" },
        "kernel-addresses": { type: "boolean" },
        "off-cpu": { type: "boolean" },
        "off-cpu-min": { type: "string" },
        event: { type: "string", short: "e", multiple: true },
        help: { type: "boolean", short: "h" },
      },
    );
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
  const values = parsed.values;
  if (values.help) throw new UsageError("");

  const durationSeconds = values.duration === undefined ? null : parseSeconds(values.duration, "-d");
  const frequencyHz = values.frequency === undefined ? 99 : parseFrequency(values.frequency, "-F");
  const pids = (values.pid ?? []).map((text) => parsePid(text, "-p"));
  const demo = values.demo ?? false;
  if (command.length > 0 && command[0] === "") throw new UsageError("-- must be followed by a command");
  if (separator >= 0 && command.length === 0) throw new UsageError("-- must be followed by a command");
  if ([demo, pids.length > 0, command.length > 0].filter(Boolean).length > 1) {
    throw new UsageError("choose one of -p, --demo and -- COMMAND");
  }
  const offCpuMinUs = parseOffCpuMinUs(values["off-cpu"] ?? false, values["off-cpu-min"]);
  let probes: ProbeSpec[];
  try {
    probes = (values.event ?? []).map(parseProbe);
  } catch (error) {
    if (error instanceof ProbeError) throw new UsageError(error.message);
    throw error;
  }
  if (probes.length > MAX_EVENTS) throw new UsageError(`-e: at most ${MAX_EVENTS} events in one recording`);
  if (probes.length > 0 && offCpuMinUs !== null) throw new UsageError("choose one of -e and --off-cpu");
  const output = values.output ?? "profile.pb.gz";
  let format: OutputFormat;
  if (values.format !== undefined) {
    const named = FORMATS.find((known) => known === values.format);
    if (named === undefined) {
      throw new UsageError(`--format ${values.format}: use ${FORMATS.join(", ")}`);
    }
    format = named;
  } else {
    // Standard output feeds a pipe (flamegraph.pl, grep): text, one stack per line.
    const inferred = output === STDOUT_PATH ? "folded" : formatFromPath(output);
    if (inferred === null) {
      throw new UsageError(
        `cannot tell the format of ${output}: name it .pb.gz, .folded, .html or .speedscope.json, or pass --format`,
      );
    }
    format = inferred;
  }
  return {
    durationSeconds: durationSeconds ?? (demo ? 5 : null),
    frequencyHz,
    pids,
    output,
    format,
    command,
    demo,
    idle: values.idle ?? false,
    statsPath: values.stats ?? null,
    kernelAddresses: values["kernel-addresses"] ?? false,
    offCpuMinUs,
    probes,
  };
}
