/**
 * Shared by the integration tests: building the C workloads, deciding whether privileged tests can run
 * here (and saying why not), and running the omniprof CLI as a user would.
 *
 * @module
 */
import { currentCapabilities, missingTracingCapabilities } from "../lib/sys/capabilities.ts";

const root = new URL("..", import.meta.url).pathname;
const buildDir = `${root}tests/.build/`;

/** The repository root, with a trailing slash. */
export const REPO_ROOT = root;

/**
 * Compiles tests/workloads/NAME.c with gcc and `flags` into tests/.build/ (reused while the source is
 * unchanged) and returns the binary's path.
 */
export async function buildWorkload(name: string, flags: string[], variant = ""): Promise<string> {
  const source = `${root}tests/workloads/${name}.c`;
  const output = `${buildDir}${name}${variant}`;
  Deno.mkdirSync(buildDir, { recursive: true });
  try {
    const built = Deno.statSync(output).mtime?.getTime() ?? 0;
    if (built > (Deno.statSync(source).mtime?.getTime() ?? 0)) return output;
  } catch {
    // not built yet
  }
  const result = await new Deno.Command("gcc", { args: [...flags, source, "-o", output], stderr: "piped" })
    .output();
  if (!result.success) throw new Error(`gcc ${name}: ${new TextDecoder().decode(result.stderr)}`);
  return output;
}

/**
 * Why tracing tests cannot run here, or null when they can. Printed by the tests that skip, so a skip is
 * never silent.
 */
export function tracingUnavailable(): string | null {
  const missing = missingTracingCapabilities(currentCapabilities());
  if (missing.length > 0) return `needs root (missing ${missing.join(", ")})`;
  try {
    Deno.statSync("/sys/kernel/btf/vmlinux");
  } catch {
    return "the kernel has no BTF (/sys/kernel/btf/vmlinux)";
  }
  return null;
}

/** Options for tests that need the kernel path; prints the reason when they are skipped. */
export function tracingTest(name: string, fn: () => Promise<void>): Deno.TestDefinition {
  const reason = tracingUnavailable();
  if (reason) console.log(`SKIP ${name}: ${reason}`);
  return { name, ignore: reason !== null, fn, sanitizeResources: false, sanitizeOps: false };
}

/** Output of a CLI run. */
export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `deno run -A main.ts ARGS` from the repository root. */
export async function runCli(args: string[], options: { env?: Record<string, string>; uid?: number } = {}) {
  const command = options.uid === undefined
    ? new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", `${root}main.ts`, ...args],
      cwd: root,
      env: options.env,
      stdout: "piped",
      stderr: "piped",
    })
    : new Deno.Command("setpriv", {
      args: [
        `--reuid=${options.uid}`,
        `--regid=${options.uid}`,
        "--clear-groups",
        Deno.execPath(),
        "run",
        "-A",
        `${root}main.ts`,
        ...args,
      ],
      cwd: root,
      env: options.env,
      stdout: "piped",
      stderr: "piped",
    });
  const output = await command.output();
  const decoder = new TextDecoder();
  return {
    code: output.code,
    stdout: decoder.decode(output.stdout),
    stderr: decoder.decode(output.stderr),
  } satisfies CliResult;
}
