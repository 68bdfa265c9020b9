/**
 * Running the system tools that tests compare against (gcc, readelf, nm, objcopy, ...), shared by the
 * tests beside the ELF, CFI and symbolization modules. Test-only.
 *
 * @module
 */

const decoder = new TextDecoder();

/** Runs `cmd` with `args` and returns its standard output; throws with its standard error on failure. */
export function run(cmd: string, ...args: string[]): string {
  const out = new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).outputSync();
  if (!out.success) throw new Error(`${cmd} ${args.join(" ")} failed: ${decoder.decode(out.stderr)}`);
  return decoder.decode(out.stdout);
}

/** Whether `tool` is on PATH. */
export function hasTool(tool: string): boolean {
  try {
    return new Deno.Command("sh", { args: ["-c", `command -v ${tool}`], stdout: "null" }).outputSync()
      .success;
  } catch {
    return false;
  }
}
