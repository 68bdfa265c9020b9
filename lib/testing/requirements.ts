/**
 * What a test needs from the machine, checked when the test is registered, so that a test that cannot run
 * here is counted as skipped (never as passed) and says why. Every test that may skip goes through
 * {@linkcode requiring}:
 *
 * - a missing requirement registers the test as ignored, prints `SKIP <name>: <reason>` and, when
 *   `OMNIPROF_SKIP_LOG` names a file, appends the name and reason to it for the summary `.ci/run` prints;
 * - under `CI=true` a missing requirement that support/bootstrap.sh provides (its packages, and root on a
 *   kernel with BTF: CI machines run as root) fails the test instead, since a CI machine that lacks it
 *   would otherwise pass while testing less.
 *
 * @example
 * ```ts ignore
 * import { programs, requiring } from "./requirements.ts";
 * Deno.test(requiring([programs("gcc", "readelf")], { name: "reads what gcc wrote", fn() {} }));
 * ```
 *
 * @module
 */
import { hasTool } from "./commands.ts";

/** Something a test needs from the machine. */
export interface Requirement {
  /** Why the test cannot run here, or null when the requirement is met. */
  readonly missing: string | null;
  /** Whether support/bootstrap.sh provides it: then `CI=true` turns its absence into a failure. */
  readonly bootstrapped: boolean;
}

/** A requirement support/bootstrap.sh provides; `missing` says why it is not met here (null: it is). */
export function bootstrapped(missing: string | null): Requirement {
  return { missing, bootstrapped: true };
}

/** A requirement a fresh machine may lack for good; `missing` says why it is not met here (null: it is). */
export function optional(missing: string | null): Requirement {
  return { missing, bootstrapped: false };
}

/**
 * The programs support/bootstrap.sh provides, with the Debian package each comes from: one the script
 * names, a dependency of one (binutils of gcc, nodejs of npm), or an essential package every Debian system
 * has (coreutils, libc-bin). Kept in step with the script's package lists: a program not here is optional.
 */
export const BOOTSTRAP_PROGRAMS: ReadonlyMap<string, string> = new Map([
  ["clang", "clang"],
  ["llc", "llvm"],
  ["llvm-link", "llvm"],
  ["llvm-objcopy", "llvm"],
  ["gcc", "gcc"],
  ["g++", "g++"],
  ["readelf", "binutils"],
  ["nm", "binutils"],
  ["objcopy", "binutils"],
  ["objdump", "binutils"],
  ["strip", "binutils"],
  ["c++filt", "binutils"],
  ["ldd", "libc-bin"],
  ["ldconfig", "libc-bin"],
  ["mkfifo", "coreutils"],
  ["truncate", "coreutils"],
  ["setpriv", "util-linux"],
  ["unshare", "util-linux"],
  ["node", "nodejs"],
  ["tmux", "tmux"],
  ["chromium", "chromium"],
  ["openssl", "openssl"],
  ["time", "time"],
  ["python3", "python3"],
  ["cpio", "cpio"],
  ["xz", "xz-utils"],
  ["pahole", "pahole"],
  ["go", "golang-go"],
]);

/**
 * The programs `names` on PATH. When some are missing, the requirement is bootstrapped if bootstrap
 * installs any of the missing ones (so CI fails on it), optional otherwise.
 */
export function programs(...names: string[]): Requirement {
  const missing = names.filter((name) => !hasTool(name));
  if (missing.length === 0) return optional(null);
  const reason = `not on PATH: ${missing.join(", ")}`;
  return missing.some((name) => BOOTSTRAP_PROGRAMS.has(name)) ? bootstrapped(reason) : optional(reason);
}

/** Whether this run is CI's (`CI=true`), where a bootstrapped requirement may not be missing. */
function underCi(): boolean {
  return Deno.env.get("CI") === "true";
}

/** One skipped test as `OMNIPROF_SKIP_LOG` records it (a JSON object per line). */
export interface SkipRecord {
  name: string;
  reason: string;
  bootstrapped: boolean;
}

function recordSkip(record: SkipRecord): void {
  const log = Deno.env.get("OMNIPROF_SKIP_LOG");
  if (log) Deno.writeTextFileSync(log, `${JSON.stringify(record)}\n`, { append: true });
}

/**
 * `definition` when every requirement is met. Otherwise the test is ignored with its reason printed and
 * recorded, or, under `CI=true` when bootstrap provides a missing requirement, it fails with the reason.
 */
export function requiring(
  requirements: readonly Requirement[],
  definition: Omit<Deno.TestDefinition, "ignore">,
): Deno.TestDefinition {
  const missing = requirements.filter((requirement) => requirement.missing !== null);
  if (missing.length === 0) return definition;
  const reason = missing.map((requirement) => requirement.missing).join("; ");
  const isBootstrapped = missing.some((requirement) => requirement.bootstrapped);
  if (isBootstrapped && underCi()) {
    return {
      ...definition,
      fn: () => {
        throw new Error(
          `${reason} (a CI machine set up by support/bootstrap.sh has this, so under CI=true the test fails)`,
        );
      },
    };
  }
  console.log(`SKIP ${definition.name}: ${reason}`);
  recordSkip({ name: definition.name, reason, bootstrapped: isBootstrapped });
  return { ...definition, ignore: true };
}
