/**
 * Mounts below a folder: binding the host's /proc, /sys and /dev into a root, finding what is mounted
 * there (/proc/self/mountinfo), and taking it all down again without touching the host's own mounts.
 *
 * A recursive bind of /sys shares its submounts (tracefs, debugfs, bpf) with the host's: unmounting one of
 * them in the bind would unmount it on the host too. So every bind is made a slave (`--make-rslave`)
 * right away, and again before it is unmounted, so that nothing propagates back.
 *
 * @module
 */

/** One line of /proc/self/mountinfo: the mount point, with its id and its parent's. */
export interface MountEntry {
  id: number;
  parentId: number;
  point: string;
}

/** Mount points escape space, tab, newline and backslash as octal (`\040`). */
function unescapeMountPoint(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/** Parses /proc/self/mountinfo. */
export function parseMountinfo(text: string): MountEntry[] {
  const entries: MountEntry[] = [];
  for (const line of text.split("\n")) {
    const fields = line.split(" ");
    if (fields.length < 5) continue;
    entries.push({
      id: Number(fields[0]),
      parentId: Number(fields[1]),
      point: unescapeMountPoint(fields[4]!),
    });
  }
  return entries;
}

/** Whether `path` is `dir` or inside it. */
function isWithin(path: string, dir: string): boolean {
  return path === dir || path.startsWith(`${dir.replace(/\/+$/, "")}/`);
}

/** The mount points at or below `dir`, in the order they were mounted. */
export function mountsBelow(
  dir: string,
  mountinfo = Deno.readTextFileSync("/proc/self/mountinfo"),
): string[] {
  return parseMountinfo(mountinfo).map((entry) => entry.point).filter((point) => isWithin(point, dir));
}

/** Of `points`, those not inside another one: unmounting them recursively takes down all. */
export function topMounts(points: string[]): string[] {
  return [...new Set(points)].filter((point) =>
    !points.some((other) => other !== point && isWithin(point, other))
  );
}

async function mountCommand(command: string, args: string[]): Promise<void> {
  const output = await new Deno.Command(command, { args, stdout: "piped", stderr: "piped" }).output();
  if (!output.success) {
    throw new Error(`${command} ${args.join(" ")} failed: ${new TextDecoder().decode(output.stderr).trim()}`);
  }
}

/** Binds `source` (with its submounts) on `target` and makes the copy a slave of the host's. */
export async function bindSlave(source: string, target: string): Promise<void> {
  await mountCommand("mount", ["--rbind", source, target]);
  // Should this fail, the bind stays shared and unmountAllBelow() will leave it mounted: unmounting it
  // could unmount the host's submounts.
  await mountCommand("mount", ["--make-rslave", target]);
}

/**
 * Unmounts everything mounted at or below `dir`, deepest trees last mounted first. Each tree is made a
 * slave before it goes (a mount left shared by someone else must not take the host's with it); a tree
 * that stays busy is detached (`--lazy`). Returns what is still mounted there (empty on success).
 */
export async function unmountAllBelow(dir: string): Promise<{ remaining: string[]; errors: string[] }> {
  const errors: string[] = [];
  for (const point of topMounts(mountsBelow(dir)).reverse()) {
    try {
      await mountCommand("mount", ["--make-rslave", point]);
    } catch (error) {
      errors.push(`left mounted, could not make it a slave first: ${(error as Error).message}`);
      continue;
    }
    try {
      await mountCommand("umount", ["--recursive", point]);
    } catch {
      await mountCommand("umount", ["--recursive", "--lazy", point]).catch((error: Error) =>
        errors.push(error.message)
      );
    }
  }
  return { remaining: mountsBelow(dir), errors };
}
