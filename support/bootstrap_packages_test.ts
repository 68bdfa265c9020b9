/**
 * The check that a fresh Debian machine has what the build and the tests use once bootstrap ran: every
 * header the BPF sources include, and every program and library the code runs, belongs to a package that
 * support/bootstrap_packages.txt lists (or that a minimal Debian system with git and sudo has, or that
 * one of those depends on), as dpkg says. Programs that may legitimately be missing are listed below with
 * the reason; a new program call, anywhere, fails here until its package is listed or it is.
 *
 * Which packages a use may rely on follows from where it is: code the build or `deno task record` runs
 * (build.ts, main.ts and what they import) may rely only on what bootstrap always installs; the tests
 * (every *_test.ts and what it imports) also on the test packages; other tasks' code (bench, kernels,
 * fresh-machine) on any of them, or on a program listed as optional.
 *
 * @module
 */
import assert from "node:assert/strict";
import { bpfIncludeArgs } from "../build.ts";
import { REPO_ROOT } from "../tests/helpers.ts";
import { dependencyClosure, type InstalledPackage, installedPackages, packagesOwning } from "./dpkg.ts";
import { MINIMAL_SYSTEM_PACKAGES } from "./fresh_machine/debian_root.ts";
import { type DynamicUse, type NamedUse, type ProgramScan, scanPrograms } from "./program_calls.ts";
import { BOOTSTRAP_PROGRAMS, bootstrapped, requiring } from "../lib/testing/requirements.ts";

/** When bootstrap installs a package (the first column of support/bootstrap_packages.txt). */
type When = "always" | "no-npm" | "test" | "peers";
const WHENS: readonly When[] = ["always", "no-npm", "test", "peers"];

/** What installs the packages a module's uses may come from, weakest last. */
type Role = "always" | "test" | "tool";
const STRENGTH: Record<Role, number> = { always: 3, test: 2, tool: 1 };
const ROLE_NAMES: Record<Role, string> = {
  always: "every run (WHEN always)",
  test: "the tests (WHEN always or test)",
  tool: "any task",
};

/** Programs (by name or path) and libraries a fresh machine may lack, and why that is fine. */
const OPTIONAL: Record<string, string> = {
  bpftool: "a second opinion for the BTF tests, not needed to build or run omniprof; a distribution's " +
    "bpftool may predate the running kernel's BTF. The tests that compare with it skip, saying so.",
  rustc: "builds the Rust symbols the Rust demangling tests read; a large toolchain nothing else needs. " +
    "Those tests skip, saying so.",
  pyenv: "Python versions besides the system's for the Python tests; not a Debian package.",
  perf: "a peer profiler of `deno task bench`: OMNIPROF_PEERS=1 installs it (WHEN peers).",
  bpftrace: "a peer profiler of `deno task bench`: OMNIPROF_PEERS=1 installs it (WHEN peers).",
  "profile-bpfcc": "a peer profiler of `deno task bench`: OMNIPROF_PEERS=1 installs it (WHEN peers).",
  "/usr/sbin/offcputime":
    "the off-CPU peer of `deno task bench --workload offcpu` (bcc's, built on libbpf: " +
    "libbpf-tools): OMNIPROF_PEERS=1 installs it (WHEN peers).",
  "offcputime-bpfcc": "the off-CPU peer of `deno task bench --workload offcpu` (bcc's, from bpfcc-tools): " +
    "OMNIPROF_PEERS=1 installs it (WHEN peers).",
  "qemu-system-x86_64": "`deno task test-kernel` boots other kernels in it; .ci/run installs it.",
  make: "`deno task build-kernel` builds a kernel from source; kernels/README.md says what that needs. " +
    "`deno task bench --workload build` builds with it: OMNIPROF_PEERS=1 installs it (WHEN peers).",
  "scripts/kconfig/merge_config.sh": "a script of the kernel source tree `deno task build-kernel` builds.",
  zstd: "decompresses zstd kernel images for `deno task fetch-kernel`; .ci/run installs it.",
  bzip2: "decompresses bzip2 kernel images (none of Debian's); the error names the package.",
  lz4: "decompresses lz4 kernel images (none of Debian's); the error names the package.",
  lzop: "decompresses lzo kernel images (none of Debian's); the error names the package.",
  mmdebstrap: "`deno task fresh-machine` builds its Debian root with it; .ci/run installs it.",
  java: "runs the HotSpot tests' workloads: the JDKs under /usr/lib/jvm (Debian 12's openjdk-17, " +
    "Debian 13 has other releases); machines of this kind often have one. The HotSpot tests skip " +
    "without a JDK, saying so.",
  javac: "compiles the HotSpot tests' workloads (tests/workloads/java/); part of a JDK, as java.",
  "/opt/jre/bin/java": "the qemu guest's Java runtime, made with the host JDK's jlink " +
    "(kernels/test_kernel.ts); the guest's JVM check skips without it, saying so.",
  javap: "lists the class files' methods and line tables the HotSpot method test compares with; part of " +
    "a JDK, as java.",
};

/** A program call whose program the source does not spell, read by a person: what it runs. */
interface ReviewedDynamicUse {
  file: RegExp;
  expression: RegExp;
  /** The programs (or libraries) it runs: each is checked like a named one. Empty: nothing installed. */
  runs: string[];
  why: string;
}

const REVIEWED_DYNAMIC: ReviewedDynamicUse[] = [
  {
    file: /^lib\/interpreter\/hotspot\/test_jvm\.ts$/,
    expression: /^`\$\{jdk\.home\}\/bin\/jhsdb`$/,
    runs: [],
    why: "the JDK's own debugger (jhsdb, part of each JDK under /usr/lib/jvm that has it), the reference",
  },
  {
    file: /^kernels\/test_kernel\.ts$/,
    expression: /^`\$\{jdk\.home\}\/bin\/jlink`$/,
    runs: [],
    why: "jlink of a JDK under /usr/lib/jvm, which makes the qemu guest's small Java runtime",
  },
  {
    file: /^lib\/interpreter\/hotspot\/test_jvm\.ts$/,
    expression: /^`\$\{options\.jdk\.home\}\/bin\/java`$/,
    runs: ["java"],
    why: "java of a JDK under /usr/lib/jvm, or the one on PATH",
  },
  {
    file: /^kernels\/bzimage\.ts$/,
    expression: /^tool\.command$/,
    runs: ["gzip", "xz", "zstd", "bzip2", "lz4", "lzop"],
    why: "DECOMPRESSORS, one per kernel image compression",
  },
  {
    file: /^lib\/bpf\/libbpf\.ts$/,
    expression: /^Deno\.env\.get\("OMNIPROF_LIBBPF"\)$/,
    runs: [],
    why: "a libbpf the user names with OMNIPROF_LIBBPF instead of the system's",
  },
  {
    file: /^tests\/helpers\.ts$/,
    expression: /\.tools\/nodes\//,
    runs: [],
    why: "a Node.js release bootstrap installs from npm for the V8 tests (support/test_node_versions.txt)",
  },
  {
    file: /^tests\/v8_record_test\.ts$/,
    expression: /^runtime\.program$/,
    runs: ["node"],
    why: "a node of testNodes(): the machine's, or a release bootstrap installs from npm",
  },
  {
    file: /^tests\/helpers\.ts$/,
    expression: /^compiler$/,
    runs: ["gcc", "g++"],
    why: "gcc for C, g++ for C++",
  },
  {
    file: /^(lib\/interpreter\/python\/|tests\/python_record_test\.ts)/,
    expression: /^(install|first!)\.executable$/,
    runs: ["/usr/bin/python3"],
    why: "a Python of pythonInstalls(): the system's python3, or pyenv's (optional)",
  },
  {
    file: /^lib\/interpreter\/python\/test_processes\.ts$/,
    expression: /\/bin\/python3`$/,
    runs: ["pyenv"],
    why: "the python3 of a pyenv install",
  },
  {
    file: /./,
    expression: /^await (buildWorkload|buildGoWorkload|compileWorkload)\(/,
    runs: [],
    why: "a workload the test compiled (with gcc, g++ or go, checked where they are named)",
  },
  {
    file:
      /^(lib\/btf\/testdata\/compile|lib\/interpreter\/python\/offsets_test|lib\/symbolize\/native_test)\.ts$/,
    expression: /^(`\$\{dir\}\/(host|offsets)`|full|linked)$/,
    runs: [],
    why: "a program the test compiled",
  },
  {
    file: /^lib\/interpreter\/python\/test_processes\.ts$/,
    expression: /^`\$\{dir\}\/\$\{name\}-\$\{link\}`$/,
    runs: [],
    why: "a program the test compiled against the system's libpython",
  },
  {
    file: /^tests\/python_record_test\.ts$/,
    expression: /^`\$\{dir\}\/not-a-snake`$/,
    runs: ["/usr/bin/python3"],
    why: "a copy of the system's python3 under another name",
  },
  {
    file: /^lib\/symbolize\/perf_map_file_test\.ts$/,
    expression: /^prefix\[0\]$/,
    runs: ["setpriv"],
    why: "sleep, run as another user through setpriv (a prefix the tests spell)",
  },
  {
    file: /^lib\/cli\/record_command\.ts$/,
    expression: /^(args\.command\[0\]|words\[0\]|words\.slice\(1\)\.find\(.*\))$/,
    runs: [],
    why: "the user's command (`record -- COMMAND`)",
  },
  {
    file: /^tests\/tracer_test\.ts$/,
    expression: /^path \(no caller found\)$/,
    runs: [],
    why: "a workload the test compiled with buildWorkload()",
  },
  {
    file: /^lib\/process\/command_group\.ts$/,
    expression: /^program \(no caller found\)$/,
    runs: [],
    why:
      "the user's command (`record -- COMMAND`) or the demo workload from its memfd, in a session of its own",
  },
  {
    file: /^lib\/symbolize\/gnu_demangle\.ts$/,
    expression: /^best\.path$/,
    runs: [],
    why: "binutils' libbfd (installed with binutils), the newest of the system's library folder",
  },
  {
    file: /^tests\/helpers\.ts$/,
    expression: /^program$/,
    runs: ["setpriv"],
    why: "deno itself, or setpriv (util-linux) running it without the tracing capabilities",
  },
  {
    file: /^tests\/mapped_files_test\.ts$/,
    expression: /^(command|argv)\[0\]$/,
    runs: ["setpriv", "unshare"],
    why: "a compiled workload, deno, or setpriv/unshare (util-linux) in front of them",
  },
  {
    file: /^lib\/probe\/probe_spec\.ts$/,
    expression: /^spec\.path$/,
    runs: [],
    why: "not run: the file a uprobe names, opened to read its symbols",
  },
  {
    file: /^tests\/kernel\/guest_(checks|suite)\.ts$/,
    expression: /^`(\$\{(context\.)?workloads\}\/(chain|sleeper|calls)|\/usr\/bin\/\$\{entry\.name\})`$/,
    runs: [],
    why: "runs inside the qemu guest of `deno task test-kernel`, from its initramfs",
  },
  {
    file: /^support\/bootstrap_packages_test\.ts$/,
    expression: /./,
    runs: [],
    why: "this check's own lookups of the programs it found",
  },
];

const decoder = new TextDecoder();

/** The packages of support/bootstrap_packages.txt by WHEN, checking the file's form. */
function bootstrapPackages(): Map<When, string[]> {
  const packages = new Map<When, string[]>(WHENS.map((when) => [when, []]));
  const seen = new Set<string>();
  for (const line of Deno.readTextFileSync(`${REPO_ROOT}support/bootstrap_packages.txt`).split("\n")) {
    if (line.trim() === "" || line.startsWith("#")) continue;
    const [when, name, ...why] = line.trim().split(/\s+/);
    assert.ok(WHENS.includes(when as When), `bootstrap_packages.txt: unknown WHEN in "${line}"`);
    assert.ok(
      /^[a-z0-9][a-z0-9+.-]+$/.test(name ?? ""),
      `bootstrap_packages.txt: bad package name in "${line}"`,
    );
    assert.ok(why.length > 0, `bootstrap_packages.txt: ${name} says not why it is needed`);
    assert.ok(!seen.has(name!), `bootstrap_packages.txt: ${name} is listed twice`);
    seen.add(name!);
    packages.get(when as When)!.push(name!);
  }
  return packages;
}

/** The repository's TypeScript modules, as paths from its root. */
function repositoryModules(): string[] {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of Deno.readDirSync(`${REPO_ROOT}${dir}`)) {
      if (entry.name.startsWith(".") || entry.name === "node_modules") continue;
      if (dir === "kernels/" && entry.name === "cache") continue;
      if (entry.isDirectory) walk(`${dir}${entry.name}/`);
      else if (entry.isFile && entry.name.endsWith(".ts")) files.push(`${dir}${entry.name}`);
    }
  };
  walk("");
  return files.sort();
}

/** Each module's role: the strongest of the deno tasks that run it (directly or through imports). */
function moduleRoles(modules: string[], imports: Map<string, string[]>): Map<string, Role> {
  const tasks =
    (JSON.parse(Deno.readTextFileSync(`${REPO_ROOT}deno.json`)) as { tasks: Record<string, string> })
      .tasks;
  const roles = new Map<string, Role>();
  const visit = (file: string, role: Role) => {
    const current = roles.get(file);
    if (current !== undefined && STRENGTH[current] >= STRENGTH[role]) return;
    roles.set(file, role);
    for (const imported of imports.get(file) ?? []) visit(imported, role);
  };
  for (const [name, command] of Object.entries(tasks)) {
    const role: Role = name === "build" || name === "record" ? "always" : name === "test" ? "test" : "tool";
    const entries = [...command.matchAll(/(?:^|\s)([\w./-]+\.ts)(?=\s|$)/g)].map((match) => match[1]!);
    if (/\bdeno test\b/.test(command)) {
      entries.push(...modules.filter((file) => /(^|\/)(\w+_)?test\.ts$/.test(file)));
    }
    for (const entry of entries) visit(entry.replace(/^\.\//, ""), role);
  }
  return roles;
}

/** Where `name` is found: a program as Deno.Command finds it (PATH, or its own path), or a library ldconfig knows. */
function locate(kind: NamedUse["kind"], name: string): string | null {
  if (kind === "library") {
    const output = new Deno.Command("ldconfig", { args: ["-p"], stdout: "piped" }).outputSync();
    const line = decoder.decode(output.stdout).split("\n").find((l) => l.trim().startsWith(`${name} `));
    return line?.split(" => ")[1]?.trim() ?? null;
  }
  const candidates = name.includes("/")
    ? [name]
    : (Deno.env.get("PATH") ?? "").split(":").filter(Boolean).map((dir) => `${dir}/${name}`);
  for (const candidate of candidates) {
    try {
      const info = Deno.statSync(candidate);
      if (info.isFile && ((info.mode ?? 0) & 0o111) !== 0) return candidate;
    } catch {
      // not there
    }
  }
  return null;
}

/** What the scan found and what each module may rely on; computed once for the tests below. */
interface Findings {
  scan: ProgramScan;
  roles: Map<string, Role>;
  installed: Map<string, InstalledPackage>;
  /** Packages of a minimal Debian system with git and sudo, before bootstrap. */
  base: Set<string>;
  /** Packages on a fresh machine once bootstrap ran for each role. */
  provided: Record<Role, Set<string>>;
}

let findings: Findings | undefined;
function getFindings(): Findings {
  if (findings) return findings;
  const modules = repositoryModules();
  const scan = scanPrograms(REPO_ROOT, modules);
  const installed = installedPackages();
  const lists = bootstrapPackages();
  // mmdebstrap's minbase: the Essential and required packages, and apt (whose own control file may call it
  // important, which is what dpkg records).
  const minimal = [...installed.values()].filter((pkg) => pkg.essential || pkg.priority === "required")
    .map((pkg) => pkg.name).concat("apt");
  const with_ = (previous: Set<string>, roots: string[]) =>
    new Set([...previous, ...dependencyClosure(roots, installed)]);
  const base = with_(new Set(), [...minimal, ...MINIMAL_SYSTEM_PACKAGES]);
  const always = with_(base, [...lists.get("always")!, ...lists.get("no-npm")!]);
  const test = with_(always, lists.get("test")!);
  const tool = with_(test, lists.get("peers")!);
  findings = {
    scan,
    roles: moduleRoles(modules, scan.imports),
    installed,
    base,
    provided: { always, test, tool },
  };
  return findings;
}

const noDpkg = (() => {
  try {
    return new Deno.Command("dpkg-query", { args: ["--version"], stdout: "null" }).outputSync().success
      ? null
      : "dpkg-query does not run";
  } catch {
    return "not a Debian system (no dpkg-query)";
  }
})();

/** The problems with `uses` (each with the role of its module): missing, unowned, or not installed by bootstrap. */
function checkUses(uses: [NamedUse, Role][], f: Findings): string[] {
  const problems: string[] = [];
  const located = uses.map(([use, role]) => ({ use, role, path: locate(use.kind, use.name) }));
  const owners = packagesOwning(located.flatMap(({ path }) => path === null ? [] : [path]));
  for (const { use, role, path } of located) {
    const where = `${use.name} (${use.file}:${use.line})`;
    if (path === null) {
      problems.push(
        `${where} is not installed here: after \`support/bootstrap.sh deno task test\` it should be ` +
          `(add its package to support/bootstrap_packages.txt, or list it in OPTIONAL with the reason)`,
      );
      continue;
    }
    const pkg = owners.get(path);
    if (!pkg) problems.push(`${where}: no Debian package owns ${path}`);
    else if (!f.provided[role].has(pkg)) {
      problems.push(
        `${where} comes from ${pkg}, which bootstrap does not install for ${ROLE_NAMES[role]}: add it to ` +
          `support/bootstrap_packages.txt, or list the program in OPTIONAL with the reason`,
      );
    }
  }
  return problems;
}

Deno.test({
  name: "support/bootstrap_packages.txt lists each package once, with when and why",
  fn() {
    const packages = bootstrapPackages();
    assert.ok(packages.get("always")!.includes("libbpf-dev"));
    assert.ok(packages.get("always")!.includes("libbpf1"));
  },
});

Deno.test(requiring([bootstrapped(noDpkg)], {
  name: "every header the BPF sources include comes from a package bootstrap always installs",
  async fn() {
    const f = getFindings();
    const includes = await bpfIncludeArgs();
    const sources = [...Deno.readDirSync(`${REPO_ROOT}bpf`)].filter((e) => e.name.endsWith(".bpf.c")).map((
      e,
    ) => e.name);
    assert.ok(sources.length > 0);
    // The same compiler and include paths as build.ts; -M lists every header, system ones included, as
    // one make rule per source ("x.o: x.c a.h \\" continued).
    const output = new Deno.Command("clang", {
      args: [
        "-target",
        "bpf",
        ...includes,
        "-M",
        ...sources.sort().map((source) => `${REPO_ROOT}bpf/${source}`),
      ],
      stdout: "piped",
      stderr: "piped",
    }).outputSync();
    assert.ok(output.success, `clang -M: ${decoder.decode(output.stderr)}`);
    const headers = new Map<string, string>();
    for (const rule of decoder.decode(output.stdout).replace(/\\\n/g, " ").split("\n")) {
      const prerequisites = rule.split(/:\s/)[1]?.trim().split(/\s+/) ?? [];
      const source = prerequisites[0]?.slice(`${REPO_ROOT}bpf/`.length);
      for (const path of prerequisites) {
        if (path.endsWith(".h") && !path.startsWith(REPO_ROOT) && !headers.has(path)) {
          headers.set(path, source!);
        }
      }
    }
    assert.ok(
      [...headers.keys()].some((path) => path.endsWith("/bpf/bpf_helpers.h")),
      "libbpf's headers are used",
    );
    const problems: string[] = [];
    const owners = packagesOwning([...headers.keys()]);
    for (const [header, source] of headers) {
      const pkg = owners.get(header);
      if (!pkg) problems.push(`${header} (bpf/${source}): no Debian package owns it`);
      else if (!f.provided.always.has(pkg)) {
        problems.push(`${header} (bpf/${source}) comes from ${pkg}, which bootstrap does not always install`);
      }
    }
    console.log(`${headers.size} system headers of ${sources.length} BPF sources checked`);
    assert.deepEqual(problems, []);
  },
}));

Deno.test(requiring([bootstrapped(noDpkg)], {
  name: "every program call whose program the source does not spell has been read by a person",
  fn() {
    const { scan } = getFindings();
    const unreviewed = scan.dynamic.filter((use) => reviewOf(use) === undefined)
      .map((use) => `${use.file}:${use.line}: ${use.kind} \`${use.expression}\``);
    assert.deepEqual(unreviewed, [], "add these to REVIEWED_DYNAMIC, saying what they run");
    const unused = REVIEWED_DYNAMIC.filter((review) => !scan.dynamic.some((use) => reviewOf(use) === review));
    assert.deepEqual(unused.map((review) => review.why), [], "REVIEWED_DYNAMIC entries that match nothing");
  },
}));

function reviewOf(use: DynamicUse): ReviewedDynamicUse | undefined {
  return REVIEWED_DYNAMIC.find((review) =>
    review.file.test(use.file) && review.expression.test(use.expression)
  );
}

Deno.test(requiring([bootstrapped(noDpkg)], {
  name: "every program and library the build and the tests run comes from a package bootstrap installs",
  fn() {
    const f = getFindings();
    const uses: NamedUse[] = [...f.scan.named];
    for (const use of f.scan.dynamic) {
      for (const name of reviewOf(use)?.runs ?? []) {
        uses.push({ kind: use.kind, name, file: use.file, line: use.line });
      }
    }
    assert.ok(
      uses.some((use) => use.name === "clang" && use.file === "build.ts"),
      "the scan finds build.ts's clang",
    );
    const checked = new Map<string, [NamedUse, Role]>();
    const optionalSeen = new Set<string>();
    for (const use of uses) {
      if (use.name in OPTIONAL) {
        optionalSeen.add(use.name);
        continue;
      }
      const role = f.roles.get(use.file) ?? "tool";
      const key = `${use.kind}:${use.name}:${role}`;
      if (!checked.has(key)) checked.set(key, [use, role]);
    }
    const problems = checkUses([...checked.values()], f);
    const names = [...new Set([...checked.values()].map(([use]) => use.name))].sort();
    console.log(`checked: ${names.join(", ")}`);
    console.log(`optional: ${[...optionalSeen].sort().join(", ")}`);
    assert.deepEqual(problems, []);
    const stale = Object.keys(OPTIONAL).filter((name) => !optionalSeen.has(name));
    assert.deepEqual(stale, [], "OPTIONAL entries no code uses any more");
  },
}));

Deno.test(requiring([bootstrapped(noDpkg)], {
  name: "requiring() counts as bootstrapped the programs the tests use that bootstrap installs",
  fn() {
    // Under CI=true a test fails rather than skips without a program of BOOTSTRAP_PROGRAMS: that list
    // must name each program bootstrap installs (beyond the minimal system) and nothing optional.
    const f = getFindings();
    const problems: string[] = [];
    for (const name of BOOTSTRAP_PROGRAMS.keys()) {
      if (name in OPTIONAL) problems.push(`${name} is both in BOOTSTRAP_PROGRAMS and optional here`);
    }
    const names = [
      ...new Set(
        f.scan.named.filter((use) =>
          use.kind === "program" && !use.name.includes("/") && !(use.name in OPTIONAL) &&
          f.roles.get(use.file) === "test"
        ).map((use) => use.name),
      ),
      ...BOOTSTRAP_PROGRAMS.keys(),
    ];
    const paths = new Map(names.map((name) => [name, locate("program", name)]));
    const owners = packagesOwning([...paths.values()].filter((path) => path !== null));
    for (const [name, path] of paths) {
      const owner = path === null ? undefined : owners.get(path);
      if (!owner) continue; // reported by the check of every program above
      const listed = BOOTSTRAP_PROGRAMS.get(name);
      if (listed === undefined && !f.base.has(owner)) {
        problems.push(`${name} comes from ${owner}, which bootstrap installs: add it to BOOTSTRAP_PROGRAMS`);
      } else if (listed !== undefined && !dependencyClosure([listed], f.installed).has(owner)) {
        problems.push(`BOOTSTRAP_PROGRAMS says ${name} comes with ${listed}, dpkg says from ${owner}`);
      }
    }
    assert.deepEqual(problems, []);
  },
}));
