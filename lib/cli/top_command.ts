/**
 * `omniprof top`: a live view of the hottest functions, system-wide or of some processes, like `perf top`.
 * On a terminal it takes the whole screen (alternate screen, raw keyboard, hidden cursor), refreshes every
 * interval and quits on `q` or Ctrl-C, giving the terminal back as it was whatever happens (errors
 * included). When standard output is not a terminal (a pipe, a log file) it prints the same table as
 * plain-text snapshots instead, one per interval, like `top -b`: a live screen would only fill the file
 * with escape sequences, and snapshots are what a script or a log wants.
 *
 * @module
 */
import { libbpf } from "../bpf/libbpf.ts";
import { Recorder } from "../record/recorder.ts";
import { currentCapabilities, missingTracingCapabilities } from "../sys/capabilities.ts";
import { FullScreen } from "../terminal/full_screen.ts";
import { renderTopFrame, type TopHeader } from "../terminal/top_screen.ts";
import { TopWindow } from "../terminal/top_window.ts";
import type { Pid } from "../types.ts";
import { parseOptions } from "./options.ts";
import { MAX_COUNT, parseFrequency, parsePid, parseSeconds, parseWholeNumber } from "./numbers.ts";
import { UsageError } from "./usage_error.ts";
import { CommandError } from "./command_error.ts";
import { processRunning, runningProcess } from "../process/liveness.ts";
import type { ProcessKey } from "../process/process_key.ts";

/** q, Q, Ctrl-C (a byte, not a signal, in raw mode) and Ctrl-D. */
const QUIT_KEYS = new Set(["q", "Q", "\x03", "\x04"]);

/** A validated `top` invocation. */
export interface TopArgs {
  pids: Pid[];
  frequencyHz: number;
  /** Rows of functions to show; null: as many as the terminal has room for (20 for snapshots). */
  rows: number | null;
  intervalSeconds: number;
  /** Stop after this many refreshes; null: until q, Ctrl-C or SIGTERM. */
  count: number | null;
  idle: boolean;
}

export const TOP_USAGE = `Usage: omniprof top [options]

Shows the hottest functions, live: self% (running in the function) and total% (the function on the
stack), over a window in which older samples fade (half-life 3 s). Kernel functions are marked [k].
Keys: q or Ctrl-C quits. When the output is not a terminal, prints a snapshot every interval instead.

Options:
  -p, --pid PID            only this process and its threads (repeatable; default: the whole system)
  -F, --frequency HZ       samples per second per CPU (default 99)
  -n, --rows N             rows of functions (default: what fits the terminal; 20 for snapshots)
  -i, --interval SECONDS   refresh interval (default 1)
  -c, --count N            quit after N refreshes
      --idle               also count idle CPUs
  -h, --help               show this help
`;

/** Parses `top`'s arguments (without the word "top"). Throws UsageError. */
export function parseTopArgs(argv: string[]): TopArgs {
  let parsed;
  try {
    parsed = parseOptions(
      argv,
      {
        pid: { type: "string", short: "p", multiple: true },
        frequency: { type: "string", short: "F" },
        rows: { type: "string", short: "n" },
        interval: { type: "string", short: "i" },
        count: { type: "string", short: "c" },
        idle: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    );
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
  const values = parsed.values;
  if (values.help) throw new UsageError("");
  const pids = (values.pid ?? []).map((text) => parsePid(text, "-p"));
  const count = { min: 1, max: MAX_COUNT };
  return {
    pids,
    frequencyHz: values.frequency === undefined ? 99 : parseFrequency(values.frequency, "-F"),
    rows: values.rows === undefined ? null : parseWholeNumber(values.rows, "-n", count),
    intervalSeconds: values.interval === undefined ? 1 : parseSeconds(values.interval, "-i", 0.1),
    count: values.count === undefined ? null : parseWholeNumber(values.count, "-c", count),
    idle: values.idle ?? false,
  };
}

/** Checks that need no BPF: fail before the screen is taken. Returns the processes `-p` names. */
function preflight(args: TopArgs): ProcessKey[] {
  const missing = missingTracingCapabilities(currentCapabilities());
  if (missing.length > 0) {
    throw new CommandError(
      `omniprof needs ${missing.join(" and ")} (or CAP_SYS_ADMIN) to load BPF programs and open perf ` +
        `events: run it as root, e.g. sudo omniprof top`,
    );
  }
  const processes = args.pids.map((pid) => {
    const process = runningProcess(pid);
    if (process === null) throw new CommandError(`No process with PID ${pid}`);
    return process;
  });
  libbpf();
  return processes;
}

/** Runs `top` with its arguments; returns the exit code. */
export async function topCommand(argv: string[]): Promise<number> {
  let args: TopArgs;
  try {
    args = parseTopArgs(argv);
  } catch (error) {
    if (error instanceof UsageError) {
      if (error.message) console.error(`omniprof top: ${error.message}\n`);
      console.error(TOP_USAGE);
      return error.message ? 2 : 0;
    }
    throw error;
  }
  const processes = preflight(args);
  const live = Deno.stdout.isTerminal();
  // The screen is taken before sampling starts (which takes a moment) so that the user sees it start;
  // everything after this point runs under the finally that gives it back.
  const screen = live ? FullScreen.enter() : null;
  let recorder: Recorder | null = null;
  const { promise: quit, resolve: stop } = Promise.withResolvers<void>();
  const onSignal = () => stop();
  const signals = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
  for (const signal of signals) Deno.addSignalListener(signal, onSignal);
  const onResize = () => show();
  if (live) Deno.addSignalListener("SIGWINCH", onResize);
  let timer: ReturnType<typeof setTimeout> | undefined;

  const target = args.pids.length === 0 ? "all CPUs" : `PID ${args.pids.join(", ")}`;
  const window = new TopWindow();
  const header: TopHeader = {
    target,
    frequencyHz: args.frequencyHz,
    elapsedSeconds: 0,
    samplesPerSecond: 0,
    processes: 0,
    lost: 0,
    halfLifeSeconds: window.halfLifeSeconds,
    note: "starting",
  };
  const encoder = new TextEncoder();
  function show(): void {
    if (screen !== null) {
      const { columns, rows } = terminalSize();
      const height = args.rows === null ? rows : Math.min(rows, args.rows + 4);
      screen.draw(
        renderTopFrame(header, window.rows(height), {
          columns,
          rows: height,
          styled: true,
          interactive: true,
        }),
      );
    } else {
      const lines = renderTopFrame(header, window.rows(args.rows ?? 20), {
        columns: 120,
        rows: (args.rows ?? 20) + 4,
        styled: false,
        interactive: false,
      });
      Deno.stdout.writeSync(encoder.encode(lines.join("\n") + "\n\n"));
    }
  }

  try {
    if (screen !== null) {
      show();
      if (screen.raw) {
        (async () => {
          for await (const key of screen.keys()) {
            if ([...key].some((char) => QUIT_KEYS.has(char))) return stop();
          }
        })().catch(() => stop());
      }
    }
    recorder = Recorder.start({ frequencyHz: args.frequencyHz, pids: args.pids, sampleIdle: args.idle });
    const started = performance.now();
    let last = started;
    let refreshes = 0;
    header.note = "waiting for samples";
    if (screen !== null) show();
    const refresh = () => {
      const now = performance.now();
      const profile = recorder!.takeProfile({ reset: true });
      const elapsed = (now - last) / 1000;
      last = now;
      window.add(profile, elapsed);
      let samples = 0;
      const pids = new Set<number>();
      for (const sample of profile.samples) {
        samples += sample.count;
        pids.add(sample.pid);
      }
      const progress = recorder!.progress();
      header.elapsedSeconds = (now - started) / 1000;
      header.samplesPerSecond = elapsed > 0 ? samples / elapsed : 0;
      header.processes = pids.size;
      header.lost = progress.lost;
      // By start time too: the PID of one that exited may be another process's by now.
      const gone = processes.filter((process) => !processRunning(process)).map((process) => process.pid);
      header.note = gone.length > 0
        ? `PID ${gone.join(", ")} exited`
        : window.samples === 0
        ? "waiting for samples"
        : "";
      show();
      refreshes++;
      if (args.count !== null && refreshes >= args.count) stop();
    };
    // The first refresh comes early (the table fills within half a second), then one per interval, on a
    // fixed schedule so that slow refreshes do not make the view drift.
    const first = Math.min(500, args.intervalSeconds * 1000);
    let next = started + first;
    const schedule = () => {
      timer = setTimeout(() => {
        try {
          refresh();
        } catch (error) {
          stopWith(error);
          return;
        }
        // A refresh that overran (symbolizing a new binary, a busy machine) skips the ticks it missed
        // rather than following up with empty ones.
        const now = performance.now();
        do next += args.intervalSeconds * 1000; while (next <= now);
        schedule();
      }, Math.max(0, next - performance.now()));
    };
    let failure: unknown = null;
    const stopWith = (error: unknown) => {
      failure = error;
      stop();
    };
    schedule();
    await quit;
    if (failure !== null) throw failure;
    return 0;
  } finally {
    clearTimeout(timer);
    for (const signal of signals) Deno.removeSignalListener(signal, onSignal);
    if (live) Deno.removeSignalListener("SIGWINCH", onResize);
    try {
      recorder?.close();
    } finally {
      screen?.restore();
    }
  }
}

function terminalSize(): { columns: number; rows: number } {
  try {
    return Deno.consoleSize();
  } catch {
    return { columns: 80, rows: 24 };
  }
}
