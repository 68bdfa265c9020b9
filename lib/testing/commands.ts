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

/** Whether `tool` is an executable file in a directory of PATH. */
export function hasTool(tool: string): boolean {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    if (dir === "") continue;
    try {
      const info = Deno.statSync(`${dir}/${tool}`);
      if (info.isFile && ((info.mode ?? 0o111) & 0o111) !== 0) return true;
    } catch {
      // Not in this directory.
    }
  }
  return false;
}
