/**
 * `omniprof agent`: continuous whole-system profiling for fleets. Checks everything that can fail before
 * sampling starts (privileges, libbpf, the endpoint URL, the pprof folder), then runs the agent until
 * SIGTERM or SIGINT, after which it sends what it holds and exits 0.
 *
 * @module
 */
import { libbpf } from "../bpf/libbpf.ts";
import { configureLogging } from "../log/logger.ts";
import { runAgent } from "../agent/agent.ts";
import {
  createExporter,
  type OtlpProtocol,
  parseEndpoint,
  type ProfileExporter,
} from "../agent/otlp_exporter.ts";
import { OutputDirectory } from "../record/output_directory.ts";
import { currentCapabilities, missingTracingCapabilities } from "../sys/capabilities.ts";
import { parseOptions } from "./options.ts";
import { CommandError } from "./record_command.ts";
import { UsageError } from "./record_args.ts";
import denoConfig from "../../deno.json" with { type: "json" };

/** A validated `agent` invocation. */
export interface AgentArgs {
  endpoint: string | null;
  protocol: OtlpProtocol;
  frequencyHz: number;
  intervalSeconds: number;
  pprofDir: string | null;
  bufferLimit: number;
  shutdownTimeoutSeconds: number;
  requestTimeoutSeconds: number;
  headers: Record<string, string>;
  idle: boolean;
}

export const AGENT_USAGE = `Usage: omniprof agent (--otlp-endpoint URL | --pprof-dir DIR) [options]

Samples every CPU continuously and, every interval, exports the interval's profile as OpenTelemetry
profiles (OTLP, gzip) and/or writes it as a pprof file. Retries with backoff while the endpoint is down,
holding at most --buffer-limit profiles (the oldest are dropped first). On SIGTERM or SIGINT it sends
what it holds, for at most --shutdown-timeout seconds, and exits.

Options:
      --otlp-endpoint URL      collector to export to, e.g. http://localhost:4318 (HTTP: the path
                               /v1development/profiles is added when the URL has none) or
                               http://localhost:4317 with --protocol grpc; https:// uses TLS
      --protocol P             http or grpc (default http)
      --header NAME=VALUE      extra request header, e.g. for authentication (repeatable)
  -F, --frequency HZ           samples per second per CPU (default 20)
      --interval SECONDS       length of each exported profile (default 60)
      --pprof-dir DIR          also (or instead) write each interval to DIR as a pprof file
      --buffer-limit N         most unsent profiles held in memory (default 30)
      --timeout SECONDS        longest wait for one export request (default 10)
      --shutdown-timeout SECONDS
                               longest time spent sending what is held when stopping (default 10)
      --idle                   also record idle CPUs
  -h, --help                   show this help
`;

/** Parses `agent`'s arguments (without the word "agent"). Throws UsageError. */
export function parseAgentArgs(argv: string[]): AgentArgs {
  let parsed;
  try {
    parsed = parseOptions(
      argv,
      {
        "otlp-endpoint": { type: "string" },
        protocol: { type: "string" },
        header: { type: "string", multiple: true },
        frequency: { type: "string", short: "F" },
        interval: { type: "string" },
        "pprof-dir": { type: "string" },
        "buffer-limit": { type: "string" },
        timeout: { type: "string" },
        "shutdown-timeout": { type: "string" },
        idle: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    );
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
  const values = parsed.values;
  if (values.help) throw new UsageError("");
  const endpoint = values["otlp-endpoint"] ?? null;
  const pprofDir = values["pprof-dir"] ?? null;
  if (endpoint === null && pprofDir === null) {
    throw new UsageError("give --otlp-endpoint URL, --pprof-dir DIR, or both");
  }
  if (endpoint !== null) {
    try {
      parseEndpoint(endpoint);
    } catch (error) {
      throw new UsageError(`--otlp-endpoint: ${error instanceof Error ? error.message : error}`);
    }
  }
  const protocol = values.protocol ?? "http";
  if (protocol !== "http" && protocol !== "grpc") {
    throw new UsageError(`--protocol ${protocol}: use http or grpc`);
  }
  const frequencyHz = values.frequency === undefined ? 20 : positiveNumber(values.frequency, "-F");
  if (!Number.isInteger(frequencyHz) || frequencyHz > 20000) {
    throw new UsageError(`-F ${values.frequency}: the frequency must be a whole number from 1 to 20000 Hz`);
  }
  const intervalSeconds = values.interval === undefined ? 60 : positiveNumber(values.interval, "--interval");
  if (intervalSeconds < 0.1) throw new UsageError(`--interval ${values.interval}: at least 0.1 s`);
  const bufferLimit = values["buffer-limit"] === undefined
    ? 30
    : positiveNumber(values["buffer-limit"], "--buffer-limit");
  if (!Number.isInteger(bufferLimit)) {
    throw new UsageError(`--buffer-limit ${values["buffer-limit"]}: a whole number of profiles`);
  }
  const headers: Record<string, string> = {};
  for (const header of values.header ?? []) {
    const match = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+)=(.*)$/.exec(header);
    if (match === null) throw new UsageError(`--header ${header}: expected NAME=VALUE`);
    headers[match[1]!.toLowerCase()] = match[2]!;
  }
  return {
    endpoint,
    protocol,
    frequencyHz,
    intervalSeconds,
    pprofDir,
    bufferLimit,
    shutdownTimeoutSeconds: values["shutdown-timeout"] === undefined
      ? 10
      : positiveNumber(values["shutdown-timeout"], "--shutdown-timeout"),
    requestTimeoutSeconds: values.timeout === undefined ? 10 : positiveNumber(values.timeout, "--timeout"),
    headers,
    idle: values.idle ?? false,
  };
}

function positiveNumber(text: string, flag: string): number {
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0) {
    throw new UsageError(`${flag} ${text}: expected a positive number`);
  }
  return value;
}

/** Checks that need no BPF: fail before anything starts. Returns the pprof folder, held open. */
function preflight(args: AgentArgs): OutputDirectory | null {
  const missing = missingTracingCapabilities(currentCapabilities());
  if (missing.length > 0) {
    throw new CommandError(
      `omniprof needs ${missing.join(" and ")} (or CAP_SYS_ADMIN) to load BPF programs and open perf ` +
        `events: run the agent as root, e.g. sudo omniprof agent ...`,
    );
  }
  if (args.pprofDir !== null) {
    let isDirectory = false;
    try {
      isDirectory = Deno.statSync(args.pprofDir).isDirectory;
    } catch {
      throw new CommandError(`--pprof-dir ${args.pprofDir}: no such folder`);
    }
    if (!isDirectory) throw new CommandError(`--pprof-dir ${args.pprofDir}: not a folder`);
  }
  let pprofDir: OutputDirectory | null = null;
  try {
    if (args.pprofDir !== null) pprofDir = OutputDirectory.open(args.pprofDir);
    libbpf();
  } catch (error) {
    pprofDir?.close();
    throw error;
  }
  return pprofDir;
}

/** Runs `agent` with its arguments; returns the exit code. */
export async function agentCommand(argv: string[]): Promise<number> {
  let args: AgentArgs;
  try {
    args = parseAgentArgs(argv);
  } catch (error) {
    if (error instanceof UsageError) {
      if (error.message) console.error(`omniprof agent: ${error.message}\n`);
      console.error(AGENT_USAGE);
      return error.message ? 2 : 0;
    }
    throw error;
  }
  using pprofDir = preflight(args);
  // A service logs what it does: its start, each interval, each failed export (OMNIPROF_LOG still rules).
  if (Deno.env.get("OMNIPROF_LOG") === undefined) configureLogging({ level: "info" });

  const exporter: ProfileExporter | null = args.endpoint === null ? null : createExporter({
    endpoint: args.endpoint,
    protocol: args.protocol,
    timeoutMs: args.requestTimeoutSeconds * 1000,
    headers: args.headers,
    userAgent: `omniprof/${denoConfig.version}`,
  });
  const stop = new AbortController();
  const onSignal = () => {
    if (!stop.signal.aborted) return stop.abort();
    // A second signal while the held profiles are being sent: the user does not want to wait.
    console.error("omniprof agent: interrupted again, exiting without sending the rest");
    Deno.exit(130);
  };
  Deno.addSignalListener("SIGTERM", onSignal);
  Deno.addSignalListener("SIGINT", onSignal);
  try {
    await runAgent({
      frequencyHz: args.frequencyHz,
      intervalMs: args.intervalSeconds * 1000,
      exporter,
      pprofDir,
      bufferLimit: args.bufferLimit,
      shutdownTimeoutMs: args.shutdownTimeoutSeconds * 1000,
      signal: stop.signal,
      sampleIdle: args.idle,
    });
  } finally {
    Deno.removeSignalListener("SIGTERM", onSignal);
    Deno.removeSignalListener("SIGINT", onSignal);
  }
  return 0;
}
