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

/** The executable file `tool` names in the first directory of PATH that has one, or null. */
export function toolPath(tool: string): string | null {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    if (dir === "") continue;
    try {
      const info = Deno.statSync(`${dir}/${tool}`);
      if (info.isFile && ((info.mode ?? 0o111) & 0o111) !== 0) return `${dir}/${tool}`;
    } catch {
      // Not in this directory.
    }
  }
  return null;
}

/** Whether `tool` is an executable file in a directory of PATH. */
export function hasTool(tool: string): boolean {
  return toolPath(tool) !== null;
}
