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
import {
  HeaderError,
  OTLP_HEADER_VARIABLES,
  parseHeaderAssignment,
  parseHeaderFile,
  parseOtlpHeadersVariable,
} from "../agent/otlp_headers.ts";
import { InputFileError, readInputFile } from "../sys/input_file.ts";
import { OutputDirectory } from "../output/output_directory.ts";
import { currentCapabilities, missingTracingCapabilities } from "../sys/capabilities.ts";
import { parseOptions } from "./options.ts";
import { CommandError } from "./command_error.ts";
import { UsageError } from "./usage_error.ts";
import { MAX_COUNT, parseFrequency, parseSeconds, parseWholeNumber } from "./numbers.ts";
import { parseOffCpuMinUs } from "./off_cpu_option.ts";
import { DEFAULT_OFF_CPU_MIN_US } from "../record/off_cpu.ts";
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
  /** Headers of `--header`, names lowercased. */
  headers: Record<string, string>;
  /** `--header-file`: more headers, read when the agent starts. */
  headerFile: string | null;
  /** `--ca-file`: PEM certificates of authorities to trust for an https endpoint. */
  caFile: string | null;
  idle: boolean;
  /** `--off-cpu`: the minimum wait recorded, µs; null without it. */
  offCpuMinUs: number | null;
}

/** The largest header file read: a few tokens of a few kilobytes each. */
const MAX_HEADER_FILE_BYTES = 64 << 10;
/** The largest CA file read: a bundle of every public root CA is about 200 KB. */
const MAX_CA_FILE_BYTES = 1 << 20;

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
      --header NAME=VALUE      extra request header (repeatable); every user can read a command line,
                               so pass secrets with --header-file or the environment instead
      --header-file FILE       extra request headers, one NAME=VALUE a line (# starts a comment), e.g.
                               Authorization=Bearer TOKEN in a file only root can read
      --ca-file FILE           also trust the certificate authorities of this PEM file (https only)
  -F, --frequency HZ           samples per second per CPU (default 20)
      --interval SECONDS       length of each exported profile (default 60)
      --pprof-dir DIR          also (or instead) write each interval to DIR as a pprof file
      --buffer-limit N         most unsent profiles held in memory (default 30)
      --timeout SECONDS        longest wait for one export request (default 10)
      --shutdown-timeout SECONDS
                               longest time spent sending what is held when stopping (default 10)
      --idle                   also record idle CPUs
      --off-cpu                also record off-CPU time: for every thread, the time from being switched
                               out to running again, charged to the stack it waited in; each profile
                               then carries off_cpu/nanoseconds beside the CPU samples (OTLP: a second
                               profile per scope). Every context switch of the machine is unwound: on
                               a busy machine (tens of thousands a second) that costs a few % of a CPU
      --off-cpu-min US         with --off-cpu, leave out waits shorter than US microseconds, in the
                               kernel (default ${DEFAULT_OFF_CPU_MIN_US})
  -h, --help                   show this help

Environment: OTEL_EXPORTER_OTLP_HEADERS and OTEL_EXPORTER_OTLP_PROFILES_HEADERS add request headers as
OpenTelemetry SDKs read them (key=value,key2=value2, values percent-encoded); --header-file then
--header override them. A URL with credentials (user:password@) is refused: send them as a header.
Redirects are not followed, and a collector's answer is read up to 1 MiB. Kernel frames are exported by
name only: their addresses would give away where the kernel is loaded (KASLR).
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
        "header-file": { type: "string" },
        "ca-file": { type: "string" },
        frequency: { type: "string", short: "F" },
        interval: { type: "string" },
        "pprof-dir": { type: "string" },
        "buffer-limit": { type: "string" },
        timeout: { type: "string" },
        "shutdown-timeout": { type: "string" },
        idle: { type: "boolean" },
        "off-cpu": { type: "boolean" },
        "off-cpu-min": { type: "string" },
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
  const frequencyHz = values.frequency === undefined ? 20 : parseFrequency(values.frequency, "-F");
  const intervalSeconds = values.interval === undefined
    ? 60
    : parseSeconds(values.interval, "--interval", 0.1);
  const bufferLimit = values["buffer-limit"] === undefined
    ? 30
    : parseWholeNumber(values["buffer-limit"], "--buffer-limit", { min: 1, max: MAX_COUNT });
  const headers: Record<string, string> = {};
  for (const header of values.header ?? []) {
    try {
      const [name, value] = parseHeaderAssignment(header, `--header ${header.split("=")[0]}`);
      headers[name] = value;
    } catch (error) {
      throw new UsageError(error instanceof Error ? error.message : String(error));
    }
  }
  const caFile = values["ca-file"] ?? null;
  if (caFile !== null && !endpoint?.startsWith("https://")) {
    throw new UsageError(`--ca-file ${caFile}: only for an https:// --otlp-endpoint`);
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
      : parseSeconds(values["shutdown-timeout"], "--shutdown-timeout"),
    requestTimeoutSeconds: values.timeout === undefined ? 10 : parseSeconds(values.timeout, "--timeout"),
    headers,
    headerFile: values["header-file"] ?? null,
    caFile,
    idle: values.idle ?? false,
    offCpuMinUs: parseOffCpuMinUs(values["off-cpu"] ?? false, values["off-cpu-min"]),
  };
}

/**
 * The request headers of an `agent` invocation: those of the OpenTelemetry environment variables, then of
 * `--header-file`, then of `--header`, each overriding the ones before. Throws a CommandError naming the
 * variable, file or line at fault.
 */
export async function requestHeaders(
  args: AgentArgs,
  env: Readonly<Record<string, string | undefined>>,
): Promise<Record<string, string>> {
  const headers: Record<string, string> = {};
  try {
    for (const variable of OTLP_HEADER_VARIABLES) {
      Object.assign(headers, parseOtlpHeadersVariable(env[variable] ?? "", variable));
    }
    if (args.headerFile !== null) {
      const bytes = await readInputFile(args.headerFile, {
        maxBytes: MAX_HEADER_FILE_BYTES,
        kind: "header file",
      });
      Object.assign(headers, parseHeaderFile(new TextDecoder().decode(bytes), args.headerFile));
    }
  } catch (error) {
    if (error instanceof HeaderError || error instanceof InputFileError) {
      throw new CommandError(error.message);
    }
    throw error;
  }
  return Object.assign(headers, args.headers);
}

/** The PEM text of `--ca-file`, checked to hold a certificate; null without the option. */
export async function readCaFile(args: AgentArgs): Promise<string | null> {
  if (args.caFile === null) return null;
  let text: string;
  try {
    const bytes = await readInputFile(args.caFile, {
      maxBytes: MAX_CA_FILE_BYTES,
      kind: "CA certificate file",
    });
    text = new TextDecoder().decode(bytes);
  } catch (error) {
    throw new CommandError(error instanceof Error ? error.message : String(error));
  }
  if (!text.includes("-----BEGIN CERTIFICATE-----")) {
    throw new CommandError(
      `--ca-file ${args.caFile}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it`,
    );
  }
  return text;
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
  // Secrets and certificates are read before anything starts, so a mistake in them stops the agent at once.
  const headers = args.endpoint === null ? {} : await requestHeaders(args, Deno.env.toObject());
  const caCert = await readCaFile(args);
  using pprofDir = preflight(args);
  // A service logs what it does: its start, each interval, each failed export (OMNIPROF_LOG still rules).
  if (Deno.env.get("OMNIPROF_LOG") === undefined) configureLogging({ level: "info" });

  const exporter: ProfileExporter | null = args.endpoint === null ? null : createExporter({
    endpoint: args.endpoint,
    protocol: args.protocol,
    timeoutMs: args.requestTimeoutSeconds * 1000,
    headers,
    userAgent: `omniprof/${denoConfig.version}`,
    ...(caCert === null ? {} : { caCerts: [caCert] }),
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
      ...(args.offCpuMinUs === null ? {} : { offCpu: { minNs: args.offCpuMinUs * 1000 } }),
    });
  } finally {
    Deno.removeSignalListener("SIGTERM", onSignal);
    Deno.removeSignalListener("SIGINT", onSignal);
  }
  return 0;
}
