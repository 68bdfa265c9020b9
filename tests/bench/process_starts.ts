/**
 * How many processes a build starts, known before it runs: make's commands (`make -n` in a clean tree)
 * and, for each gcc command, the programs the driver starts (`gcc -###` lists them without running them:
 * cc1 and as for a compile, collect2 for a link, and collect2 then starts ld). So a profiler's CPU can be
 * told per 1,000 process starts without tracing the build.
 *
 * @example
 * ```ts ignore
 * import { buildProcessStarts } from "./process_starts.ts";
 * const { starts, commands } = await buildProcessStarts("/tmp/project"); // make, then 3 per gcc command
 * ```
 *
 * @module
 */

/**
 * The processes one gcc command starts, from its `gcc -###` printout: the driver itself, each program line
 * (a line that starts with a space and a path or program name), and ld under collect2.
 */
export function gccPlanStarts(printout: string): number {
  const programs = printout.split("\n").filter((line) => /^ ("?)[^\s"]+\1( |$)/.test(line));
  const linker = programs.some((line) => /^ "?\S*\/collect2"?( |$)/.test(line)) ? 1 : 0;
  return 1 + programs.length + linker;
}

/** The commands `make -n` prints: one a line, split at spaces (the generated Makefile quotes nothing). */
export function makeCommands(printout: string): string[][] {
  return printout.split("\n").map((line) => line.trim()).filter((line) =>
    line !== "" && !line.startsWith("make")
  )
    .map((line) => line.split(/\s+/));
}

async function output(
  program: string,
  args: string[],
  cwd: string,
): Promise<{ stdout: string; stderr: string }> {
  const result = await new Deno.Command(program, {
    args,
    cwd,
    stdout: "piped",
    stderr: "piped",
    stdin: "null",
  })
    .output();
  const decoder = new TextDecoder();
  const text = { stdout: decoder.decode(result.stdout), stderr: decoder.decode(result.stderr) };
  if (!result.success) throw new Error(`${program} ${args.join(" ")} failed: ${text.stderr.slice(-300)}`);
  return text;
}

/** The process starts of `make -j2` in the clean tree `dir`: make itself and each command's. */
export async function buildProcessStarts(dir: string): Promise<{ starts: number; commands: number }> {
  const commands = makeCommands((await output("make", ["-n"], dir)).stdout);
  let starts = 1;
  for (const [program, ...args] of commands) {
    if (program !== "gcc") throw new Error(`make -n: a command other than gcc: ${program}`);
    starts += gccPlanStarts((await output("gcc", ["-###", ...args], dir)).stderr);
  }
  return { starts, commands: commands.length };
}
