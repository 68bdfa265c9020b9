import assert from "node:assert/strict";
import { ElfFile } from "../elf/elf_file.ts";
import { fileCrc32, findDebugFile } from "./debug_file.ts";
import { RootDirectory } from "../sys/root_directory.ts";
import { run } from "../testing/commands.ts";
import { programs, requiring } from "../testing/requirements.ts";
import { parentDir } from "../sys/path.ts";

const tools = programs("gcc", "objcopy", "strip", "readelf");

interface Build {
  dir: string;
  /** Stripped binary with a build ID and a debuglink to `functions.debug`. */
  linked: string;
  /** Stripped binary with a debuglink but no build ID. */
  linkedNoId: string;
  /** Debug file of `linked`. */
  debug: string;
  /** Debug file of `linkedNoId`. */
  debugNoId: string;
  buildId: string;
}

let built: Build | undefined;
function build(): Build {
  if (built !== undefined) return built;
  const dir = Deno.makeTempDirSync({ prefix: "omniprof_debug_test_" });
  globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
  const source = new URL("./testdata/functions.c", import.meta.url).pathname;
  const make = (name: string, buildIdFlag: string) => {
    const full = `${dir}/${name}.full`;
    run("gcc", "-O1", "-g", buildIdFlag, "-o", full, source);
    // The debug file keeps the name the link will record.
    mkdirp(`${dir}/${name}.d`);
    const debug = `${dir}/${name}.d/functions.debug`;
    run("objcopy", "--only-keep-debug", full, debug);
    run("strip", "--strip-all", "-o", `${dir}/${name}.stripped`, full);
    run("objcopy", `--add-gnu-debuglink=${debug}`, `${dir}/${name}.stripped`, `${dir}/${name}`);
    return { linked: `${dir}/${name}`, debug };
  };
  const withId = make("with_id", "-Wl,--build-id=sha1");
  const withoutId = make("without_id", "-Wl,--build-id=none");
  const buildId = run("readelf", "-n", withId.linked).match(/Build ID: ([0-9a-f]+)/)?.[1] ?? "";
  assert.notEqual(buildId, "");
  built = {
    dir,
    linked: withId.linked,
    linkedNoId: withoutId.linked,
    debug: withId.debug,
    debugNoId: withoutId.debug,
    buildId,
  };
  return built;
}

function mkdirp(path: string): void {
  Deno.mkdirSync(path, { recursive: true });
}

/** Lays out a fake root with the binary at /opt/app/functions and returns the root. */
function rootWith(binary: string, files: Record<string, string>): string {
  const root = Deno.makeTempDirSync({ dir: build().dir, prefix: "root_" });
  mkdirp(`${root}/opt/app`);
  Deno.copyFileSync(binary, `${root}/opt/app/functions`);
  for (const [inRoot, from] of Object.entries(files)) {
    mkdirp(`${root}${parentDir(inRoot)}`);
    Deno.copyFileSync(from, `${root}${inRoot}`);
  }
  return root;
}

/** The name of the debug file found for /opt/app/functions in `root`, or null. */
function find(root: string, options: { debugDirs?: string[]; host?: boolean } = {}): string | null {
  using elf = ElfFile.open(`${root}/opt/app/functions`);
  using directory = RootDirectory.open(root);
  using debug = findDebugFile(elf, "/opt/app/functions", { root: directory, ...options });
  return debug?.name ?? null;
}

Deno.test(requiring([tools], {
  name: "findDebugFile() finds the debug file by build ID",
  fn() {
    const b = build();
    const inRoot = `/usr/lib/debug/.build-id/${b.buildId.slice(0, 2)}/${b.buildId.slice(2)}.debug`;
    const root = rootWith(b.linked, { [inRoot]: b.debug });
    assert.equal(find(root), `${root}${inRoot}`);
    using debug = ElfFile.open(`${root}${inRoot}`);
    assert.ok(debug.hasSymtab);
  },
}));

Deno.test(requiring([tools], {
  name: "findDebugFile() refuses a build-ID path holding another file's debug info",
  fn() {
    const b = build();
    const inRoot = `/usr/lib/debug/.build-id/${b.buildId.slice(0, 2)}/${b.buildId.slice(2)}.debug`;
    assert.equal(find(rootWith(b.linked, { [inRoot]: b.debugNoId })), null);
  },
}));

Deno.test(requiring([tools], {
  name: "findDebugFile() follows .gnu_debuglink beside the binary, in .debug/ and under the debug dir",
  fn() {
    const b = build();
    for (const inRoot of ["/opt/app/functions.debug", "/opt/app/.debug/functions.debug"]) {
      const root = rootWith(b.linkedNoId, { [inRoot]: b.debugNoId });
      assert.equal(find(root), `${root}${inRoot}`);
    }
    const root = rootWith(b.linkedNoId, { "/usr/lib/debug/opt/app/functions.debug": b.debugNoId });
    assert.equal(find(root), `${root}/usr/lib/debug/opt/app/functions.debug`);
    assert.equal(find(root, { debugDirs: ["/nowhere"] }), null);
  },
}));

Deno.test(requiring([tools], {
  name: "findDebugFile() refuses a debuglink candidate whose CRC differs",
  fn() {
    const b = build();
    const root = rootWith(b.linkedNoId, { "/opt/app/functions.debug": b.debugNoId });
    const candidate = `${root}/opt/app/functions.debug`;
    const bytes = Deno.readFileSync(candidate);
    bytes[bytes.length - 1] = (bytes[bytes.length - 1] ?? 0) ^ 1;
    Deno.writeFileSync(candidate, bytes);
    assert.equal(find(root), null);
    assert.equal(find(rootWith(b.linkedNoId, {})), null);
  },
}));

Deno.test(requiring([tools], {
  name: "fileCrc32() matches the CRC objcopy stored and refuses what it cannot read",
  fn() {
    const b = build();
    using elf = ElfFile.open(b.linked);
    assert.equal(fileCrc32(b.debug), elf.debugLink()?.crc32);
    assert.equal(fileCrc32(b.debug, 100), null);
    assert.equal(fileCrc32(`${b.dir}/missing`), null);
    assert.equal(fileCrc32(b.dir), null);
    assert.equal(fileCrc32("/dev/zero"), null);
  },
}));

Deno.test(requiring([tools], {
  name: "findDebugFile() looks in the process's root first, then in the host's debug directories",
  fn() {
    const b = build();
    const buildIdPath = `/.build-id/${b.buildId.slice(0, 2)}/${b.buildId.slice(2)}.debug`;
    // The host's debug directory, as an absolute path of this machine; inside the root it does not exist.
    const hostDebug = Deno.makeTempDirSync({ dir: b.dir, prefix: "host_debug_" });
    mkdirp(parentDir(`${hostDebug}${buildIdPath}`));
    Deno.copyFileSync(b.debug, `${hostDebug}${buildIdPath}`);
    const empty = rootWith(b.linked, {});
    assert.equal(find(empty, { debugDirs: [hostDebug] }), `${hostDebug}${buildIdPath}`);
    assert.equal(find(empty, { debugDirs: [hostDebug], host: false }), null);
    const own = rootWith(b.linked, { [`${hostDebug}${buildIdPath}`]: b.debug });
    assert.equal(find(own, { debugDirs: [hostDebug] }), `${own}${hostDebug}${buildIdPath}`);
    // Beside the binary counts in its own root only: on the host, that folder is another system's.
    const hostApp = `${b.dir}/host_app`;
    mkdirp(hostApp);
    Deno.copyFileSync(b.linkedNoId, `${hostApp}/functions`);
    Deno.copyFileSync(b.debugNoId, `${hostApp}/functions.debug`);
    using elf = ElfFile.open(`${hostApp}/functions`);
    using hostFound = findDebugFile(elf, `${hostApp}/functions`, { debugDirs: ["/nowhere"] });
    assert.equal(hostFound?.name, `${hostApp}/functions.debug`);
    using directory = RootDirectory.open(empty);
    assert.equal(
      findDebugFile(elf, `${hostApp}/functions`, { root: directory, debugDirs: ["/nowhere"] }),
      null,
    );
  },
}));

Deno.test(requiring([tools], {
  name: "findDebugFile() skips a FIFO or device at a candidate path without blocking",
  fn() {
    const b = build();
    const root = rootWith(b.linkedNoId, {});
    run("mkfifo", `${root}/opt/app/functions.debug`);
    mkdirp(`${root}/opt/app/.debug`);
    Deno.symlinkSync("/dev/zero", `${root}/opt/app/.debug/functions.debug`);
    mkdirp(`${root}/usr/lib/debug/opt/app`);
    Deno.copyFileSync(b.debugNoId, `${root}/usr/lib/debug/opt/app/functions.debug`);
    const started = performance.now();
    assert.equal(find(root, { host: false }), `${root}/usr/lib/debug/opt/app/functions.debug`);
    assert.ok(performance.now() - started < 5000);
  },
}));
