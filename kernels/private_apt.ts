/**
 * apt with a configuration of its own (sources, package lists, downloads under one folder), so that
 * fetching kernels of other Debian releases never touches the system's sources or state. The archive
 * hosts are taken from the system's sources (one-line `sources.list` as on Debian 12, or deb822
 * `*.sources` as on Debian 13), the suites are every Debian release that ships kernels.
 *
 * @example
 * ```ts ignore
 * import { PrivateApt } from "./private_apt.ts";
 * const apt = PrivateApt.create("kernels/cache/apt/");
 * await apt.update();
 * const names = await apt.searchNames("^linux-image-6\\.1\\.");
 * ```
 *
 * @module
 */

/** One enabled `deb` source of the system. */
export interface AptSource {
  uri: string;
  suites: string[];
  components: string[];
  signedBy: string | null;
}

/** Parses one-line sources (`deb [signed-by=K] URI SUITE COMPONENT...`); deb-src and comments are skipped. */
export function parseOneLineSources(text: string): AptSource[] {
  const sources: AptSource[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.replace(/#.*/, "").trim();
    if (!line.startsWith("deb ") && !line.startsWith("deb\t")) continue;
    let rest = line.slice(3).trim();
    let signedBy: string | null = null;
    if (rest.startsWith("[")) {
      const end = rest.indexOf("]");
      if (end < 0) continue;
      signedBy = rest.slice(1, end).match(/signed-by=(\S+)/)?.[1] ?? null;
      rest = rest.slice(end + 1).trim();
    }
    const [uri, suite, ...components] = rest.split(/\s+/);
    if (!uri || !suite) continue;
    sources.push({ uri, suites: [suite], components, signedBy });
  }
  return sources;
}

/** Parses deb822 sources (paragraphs of `Types:`, `URIs:`, `Suites:`, ...); disabled ones are skipped. */
export function parseDeb822Sources(text: string): AptSource[] {
  const sources: AptSource[] = [];
  for (const paragraph of text.split(/\n\s*\n/)) {
    const fields = new Map<string, string>();
    let last: string | null = null;
    for (const raw of paragraph.split("\n")) {
      if (raw.startsWith("#")) continue;
      if (/^\s/.test(raw) && last !== null) {
        // A continuation line (e.g. an inline key block) belongs to the previous field.
        fields.set(last, `${fields.get(last)}\n${raw.trim()}`);
        continue;
      }
      const match = raw.match(/^([A-Za-z-]+):\s*(.*)$/);
      if (!match) continue;
      last = match[1]!.toLowerCase();
      fields.set(last, match[2]!.trim());
    }
    const types = (fields.get("types") ?? "").split(/\s+/);
    if (!types.includes("deb") || /^(no|false)$/i.test(fields.get("enabled") ?? "")) continue;
    const words = (name: string) => (fields.get(name) ?? "").split(/\s+/).filter(Boolean);
    const signedBy = fields.get("signed-by") ?? null;
    for (const uri of words("uris")) {
      sources.push({
        uri,
        suites: words("suites"),
        components: words("components"),
        // An inline key cannot be written into a one-line sources.list; apt's trusted keys serve then.
        signedBy: signedBy && !signedBy.includes("\n") ? signedBy : null,
      });
    }
  }
  return sources;
}

/** Reads the system's enabled sources from both formats. */
export function systemSources(etc = "/etc/apt/"): AptSource[] {
  const sources: AptSource[] = [];
  const read = (path: string) => {
    try {
      return Deno.readTextFileSync(path);
    } catch {
      return null;
    }
  };
  const list = read(`${etc}sources.list`);
  if (list) sources.push(...parseOneLineSources(list));
  let entries: Deno.DirEntry[] = [];
  try {
    entries = [...Deno.readDirSync(`${etc}sources.list.d`)].sort((a, b) => a.name.localeCompare(b.name));
  } catch {
    // no sources.list.d
  }
  for (const entry of entries) {
    const text = read(`${etc}sources.list.d/${entry.name}`);
    if (text === null) continue;
    if (entry.name.endsWith(".list")) sources.push(...parseOneLineSources(text));
    if (entry.name.endsWith(".sources")) sources.push(...parseDeb822Sources(text));
  }
  return sources;
}

/** The Debian archive and security archive to use, and the keyring the system trusts them with. */
export interface DebianHosts {
  archive: string;
  security: string;
  signedBy: string | null;
}

const CODENAMES = /^(buster|bullseye|bookworm|trixie|forky|duke|sid|unstable|testing|stable|oldstable)\b/;

/**
 * The hosts of the system's Debian sources: the URI serving a Debian suite, and the one serving its
 * `-security` suite (derived from the archive's when the system has none). Defaults to deb.debian.org.
 */
export function debianHosts(sources: AptSource[]): DebianHosts {
  const debian = sources.filter((source) => source.suites.some((suite) => CODENAMES.test(suite)));
  const archive = debian.find((source) => source.suites.some((suite) => !suite.endsWith("-security")));
  const security = debian.find((source) => source.suites.some((suite) => suite.endsWith("-security")));
  const archiveUri = (archive?.uri ?? "http://deb.debian.org/debian").replace(/\/+$/, "");
  const securityUri = (security?.uri ?? archiveUri.replace(/\/debian$/, "/debian-security")).replace(
    /\/+$/,
    "",
  );
  return { archive: archiveUri, security: securityUri, signedBy: archive?.signedBy ?? null };
}

/** Debian suites that carry kernel images, oldest first: each release, its updates, security and backports. */
export const KERNEL_SUITES: { suite: string; security: boolean }[] = [
  { suite: "bullseye", security: false },
  { suite: "bullseye-security", security: true },
  { suite: "bookworm", security: false },
  { suite: "bookworm-updates", security: false },
  { suite: "bookworm-security", security: true },
  { suite: "bookworm-backports", security: false },
  { suite: "trixie", security: false },
  { suite: "trixie-updates", security: false },
  { suite: "trixie-security", security: true },
  { suite: "trixie-backports", security: false },
  { suite: "sid", security: false },
  { suite: "experimental", security: false },
];

/** The private sources.list: every kernel suite on the system's hosts, main only. */
export function privateSourcesList(hosts: DebianHosts): string {
  const options = hosts.signedBy ? ` [signed-by=${hosts.signedBy}]` : "";
  return KERNEL_SUITES.map(({ suite, security }) =>
    `deb${options} ${security ? hosts.security : hosts.archive} ${suite} main`
  ).join("\n") + "\n";
}

/** A package as the private lists describe it. */
export interface PackageRecord {
  name: string;
  version: string;
  size: number;
}

/** apt-get and apt-cache confined to one folder. */
export class PrivateApt {
  readonly dir: string;

  private constructor(dir: string) {
    this.dir = dir;
  }

  /** Prepares `dir` (sources.list from the system's hosts, empty state folders). */
  static create(dir: string, hosts: DebianHosts = debianHosts(systemSources())): PrivateApt {
    for (const sub of ["lists/partial", "cache/archives/partial", "debs", "empty"]) {
      Deno.mkdirSync(`${dir}${sub}`, { recursive: true });
    }
    // Rewritten only when it changes: apt rebuilds its cache when the sources list is newer.
    const sources = privateSourcesList(hosts);
    let current = "";
    try {
      current = Deno.readTextFileSync(`${dir}sources.list`);
    } catch {
      // first use
    }
    if (current !== sources) Deno.writeTextFileSync(`${dir}sources.list`, sources);
    try {
      Deno.statSync(`${dir}status`);
    } catch {
      Deno.writeTextFileSync(`${dir}status`, "");
    }
    return new PrivateApt(dir);
  }

  /** The `-o` options that point apt at this folder only (the system's pins and state do not apply). */
  options(): string[] {
    const d = this.dir;
    return [
      `Dir::Etc::sourcelist=${d}sources.list`,
      `Dir::Etc::sourceparts=${d}empty`,
      `Dir::Etc::preferences=${d}empty/none`,
      `Dir::Etc::preferencesparts=${d}empty`,
      `Dir::State::Lists=${d}lists`,
      // Nothing is installed from here. (Not /dev/null: its times change with every write, which makes apt
      // rebuild its cache on each call.)
      `Dir::State::status=${d}status`,
      `Dir::Cache=${d}cache`,
      // Some images switch the binary caches off; without them every query re-reads all the lists.
      "Dir::Cache::pkgcache=pkgcache.bin",
      "Dir::Cache::srcpkgcache=srcpkgcache.bin",
      // Kernel images for the x86-64 guest, whatever the host's architectures.
      "APT::Architecture=amd64",
      "APT::Architectures=amd64",
      "Acquire::Languages=none",
      // Downloads land in a folder of ours, which apt's unprivileged download user cannot write.
      "APT::Sandbox::User=root",
    ].flatMap((option) => ["-o", option]);
  }

  /** Age of the package lists in hours, or Infinity before the first update. */
  listsAgeHours(): number {
    let newest = 0;
    try {
      for (const entry of Deno.readDirSync(`${this.dir}lists`)) {
        if (!/_Packages(\.\w+)?$/.test(entry.name)) continue;
        newest = Math.max(newest, Deno.statSync(`${this.dir}lists/${entry.name}`).mtime?.getTime() ?? 0);
      }
    } catch {
      return Infinity;
    }
    return newest === 0 ? Infinity : (Date.now() - newest) / 3_600_000;
  }

  /**
   * Downloads the package lists. Suites that fail (a release moved off the mirror) are reported in the
   * returned warnings; it throws only when no list at all could be had (no network).
   */
  async update(): Promise<string[]> {
    const result = await this.#run("apt-get", ["-q", "update"]);
    const warnings = result.stderr.split("\n").filter((line) => /^(E|W|Err):?/.test(line.trim()));
    if (this.listsAgeHours() === Infinity) {
      throw new Error(
        `Cannot download Debian's package lists:\n${result.stderr.trim() || result.stdout.trim()}`,
      );
    }
    return result.success ? [] : warnings;
  }

  /**
   * Names of the packages that start with `prefix` and can be downloaded (have a candidate version), with
   * that version. Reads only apt's binary cache, so it takes a fraction of a second.
   */
  async available(prefix: string): Promise<Map<string, string>> {
    const listed = await this.#run("apt-cache", ["pkgnames", prefix]);
    if (!listed.success) throw new Error(`Cannot list packages: ${listed.stderr.trim()}`);
    // pkgnames also lists names only mentioned by other packages; policy tells which have a candidate.
    const names = listed.stdout.split("\n").map((line) => line.trim()).filter(Boolean).sort();
    const found = new Map<string, string>();
    for (let i = 0; i < names.length; i += 500) {
      const policy = await this.#run("apt-cache", ["policy", ...names.slice(i, i + 500)]);
      if (!policy.success) throw new Error(`Cannot read package versions: ${policy.stderr.trim()}`);
      for (const match of policy.stdout.matchAll(/^(\S+):\n\s+Installed: .*\n\s+Candidate: (\S+)$/gm)) {
        if (match[2] !== "(none)") found.set(match[1]!, match[2]!);
      }
    }
    return found;
  }

  /** The candidate record of a package, or null when apt has none. */
  async show(name: string): Promise<PackageRecord | null> {
    const result = await this.#run("apt-cache", ["show", "--no-all-versions", name]);
    if (!result.success) return null;
    const field = (key: string) => result.stdout.match(new RegExp(`^${key}: (.*)$`, "m"))?.[1]?.trim();
    const version = field("Version");
    if (!version) return null;
    return { name, version, size: Number(field("Size") ?? 0) };
  }

  /** Downloads a package's .deb into `debs/` and returns its path. */
  async download(name: string): Promise<string> {
    const debs = `${this.dir}debs/`;
    for (const entry of Deno.readDirSync(debs)) Deno.removeSync(`${debs}${entry.name}`);
    const result = await this.#run("apt-get", ["-q", "download", name], debs);
    const files = [...Deno.readDirSync(debs)].filter((entry) => entry.name.endsWith(".deb"));
    if (!result.success || files.length !== 1) {
      throw new Error(`Cannot download ${name}:\n${result.stderr.trim() || result.stdout.trim()}`);
    }
    return `${debs}${files[0]!.name}`;
  }

  async #run(command: string, args: string[], cwd?: string) {
    let output: Deno.CommandOutput;
    try {
      output = await new Deno.Command(command, {
        args: [...this.options(), ...args],
        cwd,
        stdout: "piped",
        stderr: "piped",
        env: { DEBIAN_FRONTEND: "noninteractive" },
      }).output();
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) {
        throw new Error(`Cannot run ${command}: not installed (Debian's apt)`);
      }
      throw error;
    }
    const decoder = new TextDecoder();
    return {
      success: output.success,
      stdout: decoder.decode(output.stdout),
      stderr: decoder.decode(output.stderr),
    };
  }
}
