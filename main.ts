/**
 * omniprof: a whole-system CPU profiler for Linux (BPF sampling, host-side symbolization).
 *
 *   omniprof record [options] [-- COMMAND ...]   record a profile
 *   omniprof report FILE                         top functions of a pprof profile
 *   omniprof check                               what works on this machine
 *
 * @module
 */
import { configureLogging, LOG_LEVELS, parseLogLevel } from "./lib/log/logger.ts";
import { CommandError } from "./lib/cli/command_error.ts";

const USAGE = `Usage: omniprof COMMAND [options]

Commands:
  record   sample stacks on every CPU and write a profile (omniprof record --help)
  report   print the top functions of a pprof profile
  diff     compare two pprof profiles (--html OUT: differential flamegraph)
  top      live view of the hottest functions, like perf top (omniprof top --help)
  agent    profile continuously and export OpenTelemetry profiles or pprof files (omniprof agent --help)
  check    tell what works on this machine

Environment: OMNIPROF_LOG=debug|info|warning|error sets the log level (default warning).
`;

async function main(argv: string[]): Promise<number> {
  const levelText = Deno.env.get("OMNIPROF_LOG");
  if (levelText !== undefined && levelText !== "") {
    const level = parseLogLevel(levelText);
    if (level === null) {
      console.error(`omniprof: OMNIPROF_LOG=${levelText} is not a level (${LOG_LEVELS.join(", ")})`);
      return 2;
    }
    configureLogging({ level });
  }
  const [command, ...rest] = argv;
  // Each command loads only its own modules: starting costs CPU time in every short run.
  switch (command) {
    case "record":
      return await (await import("./lib/cli/record_command.ts")).recordCommand(rest);
    case "report":
      return await (await import("./lib/cli/report_command.ts")).reportCommand(rest);
    case "check":
      return (await import("./lib/cli/check_command.ts")).checkCommand();
    case "diff":
      return await (await import("./lib/cli/diff_command.ts")).diffCommand(rest);
    case "top":
      return await (await import("./lib/cli/top_command.ts")).topCommand(rest);
    case "agent":
      return await (await import("./lib/cli/agent_command.ts")).agentCommand(rest);
    case undefined:
    case "help":
    case "-h":
    case "--help":
      console.log(USAGE);
      return command === undefined ? 2 : 0;
    default:
      console.error(`omniprof: unknown command ${command}\n\n${USAGE}`);
      return 2;
  }
}

/**
 * Whether `error` is one of libbpf's. The module is imported here, not at the top, so that a command that
 * loads no BPF (`report`, `diff`) does not load lib/bpf/ either; a libbpf error can only come from a command
 * that has loaded it already.
 */
async function isLibbpfError(error: unknown): Promise<boolean> {
  const { LibbpfError, LibbpfMissingError } = await import("./lib/bpf/libbpf.ts");
  return error instanceof LibbpfMissingError || error instanceof LibbpfError;
}

if (import.meta.main) {
  let code: number;
  try {
    code = await main(Deno.args);
  } catch (error) {
    if (error instanceof CommandError) {
      console.error(`omniprof: ${error.message}`);
      code = error.exitCode;
    } else if (error instanceof Error && await isLibbpfError(error)) {
      console.error(`omniprof: ${error.message}`);
      code = 1;
    } else if (error instanceof Error && /^Cannot /.test(error.message)) {
      console.error(`omniprof: ${error.message}`);
      code = 1;
    } else {
      console.error("omniprof: internal error:", error);
      code = 70;
    }
  }
  Deno.exit(code);
}
