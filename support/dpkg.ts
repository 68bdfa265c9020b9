/**
 * What dpkg knows about this machine's Debian packages: which package owns a file, and which packages
 * come with which (Depends and Pre-Depends, as apt installs them without Recommends).
 *
 * @example
 * ```ts
 * import { dependencyClosure, installedPackages, packageOwning } from "./dpkg.ts";
 * const installed = installedPackages();
 * packageOwning("/usr/bin/gcc"); // "gcc"
 * dependencyClosure(["gcc"], installed).has("cpp"); // true
 * ```
 *
 * @module
 */

/** An installed package as dpkg's status file describes it. */
export interface InstalledPackage {
  name: string;
  /** Essential: yes (every Debian system has it). */
  essential: boolean;
  priority: string;
  /** Virtual packages it provides. */
  provides: string[];
  /** Its Pre-Depends and Depends, each a list of alternatives (package or virtual names). */
  depends: string[][];
}

const decoder = new TextDecoder();

/** A package name without version constraint or architecture qualifier ("perl:any (>= 5)" -> "perl"). */
function bareName(relation: string): string {
  return relation.trim().split(/[\s(\[]/)[0]!.split(":")[0]!;
}

/** A Depends field as lists of alternatives. */
function parseRelations(field: string): string[][] {
  return field.split(",").map((clause) => clause.split("|").map(bareName).filter(Boolean))
    .filter((alternatives) => alternatives.length > 0);
}

/** Every package dpkg lists as installed, by name. */
export function installedPackages(): Map<string, InstalledPackage> {
  const format = "${Package}\\t${db:Status-Abbrev}\\t${Essential}\\t${Priority}\\t${Provides}\\t" +
    "${Pre-Depends}\\t${Depends}\\n";
  const output = new Deno.Command("dpkg-query", {
    args: ["-W", `-f=${format}`],
    stdout: "piped",
    stderr: "piped",
  })
    .outputSync();
  if (!output.success) throw new Error(`Cannot list packages: dpkg-query: ${decoder.decode(output.stderr)}`);
  const packages = new Map<string, InstalledPackage>();
  for (const line of decoder.decode(output.stdout).split("\n")) {
    const [name, status, essential, priority, provides, preDepends, depends] = line.split("\t");
    if (!name || !status?.startsWith("ii")) continue;
    packages.set(name, {
      name,
      essential: essential === "yes",
      priority: priority ?? "",
      provides: (provides ?? "").split(",").map(bareName).filter(Boolean),
      depends: [...parseRelations(preDepends ?? ""), ...parseRelations(depends ?? "")],
    });
  }
  return packages;
}

/**
 * `roots` and every installed package they depend on, directly or not. Of a choice of alternatives, the
 * first one installed counts; a virtual name stands for the installed packages providing it.
 */
export function dependencyClosure(
  roots: Iterable<string>,
  installed: Map<string, InstalledPackage>,
): Set<string> {
  const providers = new Map<string, string[]>();
  for (const pkg of installed.values()) {
    for (const name of pkg.provides) providers.set(name, [...(providers.get(name) ?? []), pkg.name]);
  }
  const closure = new Set<string>();
  const pending = [...roots];
  while (pending.length > 0) {
    const name = pending.pop()!;
    if (closure.has(name)) continue;
    closure.add(name);
    // A name no installed package has is satisfied by those that provide it (nodejs provides npm).
    if (!installed.has(name)) pending.push(...(providers.get(name) ?? []));
    for (const alternatives of installed.get(name)?.depends ?? []) {
      // apt takes the first alternative it can; the first one installed here is the one it took.
      for (const alternative of alternatives) {
        const satisfying = installed.has(alternative) ? [alternative] : providers.get(alternative) ?? [];
        if (satisfying.length === 0) continue;
        pending.push(...satisfying);
        break;
      }
    }
  }
  return closure;
}

/** The forms dpkg may have recorded `path` under: as given, and across the /usr merge. */
function recordedForms(path: string): string[] {
  const forms = [path];
  const merged = /^\/usr\/(bin|sbin|lib|lib64)\//.exec(path);
  if (merged) forms.push(path.slice(4));
  else if (/^\/(bin|sbin|lib|lib64)\//.test(path)) forms.push(`/usr${path}`);
  return forms;
}

/**
 * The package that installed each of `paths` (tried as given, then with its links resolved), or null
 * when no package owns it. Diversions are not owners. One dpkg-query for all: each reads every file list.
 */
export function packagesOwning(paths: string[]): Map<string, string | null> {
  const forms = new Map<string, string[]>();
  for (const path of paths) {
    let real = path;
    try {
      real = Deno.realPathSync(path);
    } catch {
      // a dangling or missing path: only its own name can be asked about
    }
    forms.set(path, [...new Set([...recordedForms(path), ...recordedForms(real)])]);
  }
  const asked = [...new Set([...forms.values()].flat())];
  const owners = new Map<string, string>();
  if (asked.length > 0) {
    // Exits 1 when some path has no owner, and still lists the others.
    const output = new Deno.Command("dpkg-query", { args: ["-S", ...asked], stdout: "piped", stderr: "null" })
      .outputSync();
    for (const line of decoder.decode(output.stdout).split("\n")) {
      if (line.startsWith("diversion by ")) continue;
      const separator = line.lastIndexOf(": ");
      if (separator <= 0) continue;
      owners.set(line.slice(separator + 2), bareName(line.slice(0, separator).split(",")[0]!));
    }
  }
  return new Map(
    paths.map((path) => [path, forms.get(path)!.map((form) => owners.get(form)).find(Boolean) ?? null]),
  );
}

/** The package that installed `path`, or null; see packagesOwning(). */
export function packageOwning(path: string): string | null {
  return packagesOwning([path]).get(path) ?? null;
}
