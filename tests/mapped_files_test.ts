// Files a process maps are read through the process, never by trusting the path in /proc/PID/maps: a
// C workload dlopens a library from a temporary folder, then the test puts something else at that path
// (a FIFO, another file) or runs the workload in its own mount namespace, and checks what omniprof
// reads. tests/read_mapped_file.ts reads the process in a process of its own, so that a hang shows as a
// timeout, and so that it can run without CAP_SYS_ADMIN, which /proc/PID/map_files needs: then the path
// inside the process's root is the only way left, the one that used to open whatever was there.
import assert from "node:assert/strict";
import {
  buildWorkload,
  DENO_RUN_ENV,
  omniprofArgs,
  parseFolded,
  REPO_ROOT,
  tempDir,
  tracing,
} from "./helpers.ts";
import { run } from "../lib/testing/commands.ts";
import { bootstrapped, programs, type Requirement, requiring } from "../lib/testing/requirements.ts";
import type { MappedFileReport } from "./read_mapped_file.ts";
import { privateMountNamespaces } from "../lib/testing/mount_namespaces.ts";

/** setpriv arguments that drop what /proc/PID/map_files needs, keeping what BPF and perf need. */
const WITHOUT_MAP_FILES = [
  "--inh-caps=-sys_admin,-checkpoint_restore",
  "--bounding-set=-sys_admin,-checkpoint_restore",
];
/** A reader that has not answered by then hangs (a Deno start on a busy machine takes seconds). */
const TIMEOUT_MS = 90_000;

const needs = [
  bootstrapped(Deno.uid() !== 0 ? "needs root (map_files, mount namespaces, dropping capabilities)" : null),
  programs("gcc", "setpriv", "unshare", "mkfifo", "strip", "objcopy", "readelf", "nm"),
];

function rootTest(name: string, fn: () => Promise<void>, ...more: Requirement[]): Deno.TestDefinition {
  return requiring([...needs, ...more], { name, fn, sanitizeResources: false, sanitizeOps: false });
}

interface Plugin {
  main: string;
  /** The library the host sees. */
  plugin: string;
  /** The same library with its static function renamed namespace_plugin_step. */
  namespacePlugin: string;
}

async function workloads(): Promise<Plugin> {
  const flags = ["-O2", "-fomit-frame-pointer", "-shared", "-fPIC", "-Wl,--build-id=sha1"];
  return {
    main: await buildWorkload("dlopen_main", ["-O2", "-fomit-frame-pointer"]),
    plugin: await buildWorkload("dlopen_plugin", flags, ".so"),
    namespacePlugin: await buildWorkload(
      "dlopen_plugin",
      [...flags, "-Dplugin_step=namespace_plugin_step"],
      ".ns.so",
    ),
  };
}

/** A running workload; `stop` kills it and waits for it. */
interface Workload {
  pid: number;
  stop(): Promise<void>;
}

/** Starts `command` and waits until its maps show `library` (the dlopen happened). */
async function start(command: string[], library: string): Promise<Workload> {
  const child = new Deno.Command(command[0]!, { args: command.slice(1), stdout: "null", stderr: "inherit" })
    .spawn();
  const stop = async () => {
    try {
      child.kill("SIGKILL");
    } catch {
      // already gone
    }
    await child.status;
  };
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    try {
      if (Deno.readTextFileSync(`/proc/${child.pid}/maps`).includes(library)) return { pid: child.pid, stop };
    } catch {
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await stop();
  throw new Error(`${command.join(" ")} did not map ${library}`);
}

/** The device and inode of `library` as the kernel's maps line gives them ("fd:00 1234"). */
function mapsIdentity(pid: number, library: string): string {
  const line = Deno.readTextFileSync(`/proc/${pid}/maps`).split("\n").find((l) => l.includes(library));
  const fields = line?.split(/\s+/);
  assert.ok(fields !== undefined && fields.length >= 6, `no maps line of ${library}`);
  return `${fields[3]} ${fields[4]}`;
}

/** Runs `argv`, failing the test when it has not exited after TIMEOUT_MS; returns its standard output. */
async function runWithin(
  argv: string[],
  options: {
    stdin?: (child: Deno.ChildProcess, stdout: ReadableStreamDefaultReader<Uint8Array>) => Promise<void>;
  } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = new Deno.Command(argv[0]!, {
    args: argv.slice(1),
    cwd: REPO_ROOT,
    env: DENO_RUN_ENV,
    stdin: options.stdin ? "piped" : "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<"timeout">((resolve) =>
    timer = setTimeout(() => resolve("timeout"), TIMEOUT_MS)
  );
  const finished = (async () => {
    const reader = child.stdout.getReader();
    let out = "";
    if (options.stdin) await options.stdin(child, reader).catch(() => {});
    const decoder = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      out += decoder.decode(value, { stream: true });
    }
    const stderr = new TextDecoder().decode(await new Response(child.stderr).arrayBuffer());
    const status = await child.status;
    return { code: status.code, stdout: out, stderr };
  })();
  const result = await Promise.race([finished, timeout]);
  clearTimeout(timer);
  if (result === "timeout") {
    child.kill("SIGKILL");
    await finished.catch(() => {});
    assert.fail(`${argv.join(" ")} did not end within ${TIMEOUT_MS / 1000} s: it hangs`);
  }
  return result;
}

/** Reads the mapped file whose path holds `library` of `pid`, in a process of its own. */
async function readMappedFile(
  pid: number,
  library: string,
  withoutMapFiles: boolean,
): Promise<MappedFileReport> {
  const deno = [Deno.execPath(), "run", "-A", `${REPO_ROOT}tests/read_mapped_file.ts`, String(pid), library];
  const result = await runWithin(withoutMapFiles ? ["setpriv", ...WITHOUT_MAP_FILES, ...deno] : deno);
  assert.equal(result.code, 0, result.stderr);
  return JSON.parse(result.stdout.trim().split("\n").at(-1)!) as MappedFileReport;
}

/**
 * A writer waiting at `fifo`: it goes on only when someone opens the FIFO for reading, so while it
 * waits, nobody did. (Opening with O_PATH, as omniprof's checks do, does not count.)
 */
function fifoWriter(fifo: string): { stillWaiting(): Promise<boolean>; stop(): Promise<void> } {
  const child = new Deno.Command("sh", { args: ["-c", `echo written > '${fifo}'`], stdout: "null" }).spawn();
  let exited = false;
  const status = child.status.then(() => {
    exited = true;
  });
  return {
    async stillWaiting() {
      await new Promise((resolve) => setTimeout(resolve, 300));
      return !exited;
    },
    async stop() {
      if (!exited) child.kill("SIGKILL");
      await status;
    },
  };
}

/** A library in a fresh folder, mapped by a running workload, that `replace` then swaps at its path. */
async function withReplacedLibrary(
  replace: (path: string, original: string) => void,
  body: (pid: number, path: string, identity: string) => Promise<void>,
): Promise<void> {
  const { main, plugin } = await workloads();
  const dir = tempDir();
  const path = `${dir}/libplugin.so`;
  Deno.copyFileSync(plugin, path);
  const workload = await start([main, path, "0", "120"], path);
  try {
    const identity = mapsIdentity(workload.pid, path);
    Deno.removeSync(path);
    replace(path, plugin);
    await body(workload.pid, path, identity);
  } finally {
    await workload.stop();
    Deno.removeSync(dir, { recursive: true });
  }
}

Deno.test(
  rootTest(
    "a library whose path became a FIFO is read through map_files; the FIFO is never opened",
    async () => {
      await withReplacedLibrary((path) => run("mkfifo", path), async (pid, path, identity) => {
        const writer = fifoWriter(path);
        try {
          const report = await readMappedFile(pid, path, false);
          assert.equal(report.readable, true);
          assert.equal(report.key, identity);
          assert.ok(report.symbols.includes("plugin_step"), `symbols: ${report.symbols.join(", ")}`);
          assert.ok(await writer.stillWaiting(), "the FIFO was opened for reading");
        } finally {
          await writer.stop();
        }
      });
    },
  ),
);

Deno.test(
  rootTest("without map_files, a FIFO at the path is refused at once, counted and never opened", async () => {
    await withReplacedLibrary((path) => run("mkfifo", path), async (pid, path) => {
      const writer = fifoWriter(path);
      try {
        const report = await readMappedFile(pid, path, true);
        assert.equal(report.found, true);
        assert.equal(report.readable, false);
        assert.equal(report.refusal, "not-regular");
        assert.equal(report.filesRefused["not-regular"], 1);
        assert.ok(await writer.stillWaiting(), "the FIFO was opened for reading");
      } finally {
        await writer.stop();
      }
    });
    // And with nobody writing, where a blocking open would wait forever.
    await withReplacedLibrary((path) => run("mkfifo", path), async (pid, path) => {
      const report = await readMappedFile(pid, path, true);
      assert.equal(report.refusal, "not-regular");
    });
  }),
);

Deno.test(
  rootTest("without map_files, another file put at the path (new inode, same bytes) is refused", async () => {
    await withReplacedLibrary((path, original) => Deno.copyFileSync(original, path), async (pid, path) => {
      const report = await readMappedFile(pid, path, true);
      assert.equal(report.readable, false);
      assert.equal(report.refusal, "replaced");
      assert.equal(report.filesRefused.replaced, 1);
      assert.deepEqual(report.symbols, []);
    });
  }),
);

const mountNamespaces = privateMountNamespaces();

/**
 * Runs the workload in a mount namespace of its own where `path` is `namespaceLibrary` (bind-mounted),
 * while on the host `path` is `hostLibrary`; `setup` adds shell commands run in the namespace first.
 */
async function inNamespace(
  path: string,
  hostLibrary: string,
  namespaceLibrary: string,
  setup: string,
): Promise<Workload> {
  const { main } = await workloads();
  Deno.copyFileSync(hostLibrary, path);
  const script = `${setup}mount --bind '${namespaceLibrary}' '${path}' && exec '${main}' '${path}' 0.3 120`;
  return await start(["unshare", "-m", "--propagation", "private", "sh", "-c", script], path);
}

Deno.test(
  rootTest(
    "a process in its own mount namespace is read through its root: its library, not the host's",
    async () => {
      const { plugin, namespacePlugin } = await workloads();
      for (const withoutMapFiles of [false, true]) {
        const dir = tempDir();
        const path = `${dir}/libplugin.so`;
        const workload = await inNamespace(path, plugin, namespacePlugin, "");
        try {
          const report = await readMappedFile(workload.pid, path, withoutMapFiles);
          const how = withoutMapFiles ? "through its root" : "through map_files";
          assert.equal(report.readable, true, how);
          assert.equal(report.key, mapsIdentity(workload.pid, path), how);
          assert.ok(report.symbols.includes("namespace_plugin_step"), `${how}: ${report.symbols.join(", ")}`);
          assert.ok(!report.symbols.includes("plugin_step"), how);
        } finally {
          await workload.stop();
          Deno.removeSync(dir, { recursive: true });
        }
      }
    },
    mountNamespaces,
  ),
);

Deno.test(
  rootTest(
    "the debug file of a library is found in its process's root, after the process exited",
    async () => {
      const { namespacePlugin } = await workloads();
      const dir = tempDir();
      try {
        const stripped = `${dir}/stripped.so`;
        const debug = `${dir}/plugin.debug`;
        run("objcopy", "--only-keep-debug", namespacePlugin, debug);
        run("strip", "--strip-all", "-o", stripped, namespacePlugin);
        const buildId = run("readelf", "-n", stripped).match(/Build ID: ([0-9a-f]+)/)?.[1];
        assert.ok(buildId !== undefined);
        const vaddr = run("nm", namespacePlugin).split("\n").find((line) =>
          / namespace_plugin_step$/.test(line)
        )
          ?.split(" ")[0];
        assert.ok(vaddr !== undefined, "nm lists no namespace_plugin_step");
        // The namespace gets its own /usr/lib/debug holding the debug file; the host's stays as it is.
        const inDebug = `/usr/lib/debug/.build-id/${buildId.slice(0, 2)}`;
        const setup = `mount -t tmpfs omniprof-test /usr/lib/debug && mkdir -p ${inDebug} && ` +
          `cp '${debug}' ${inDebug}/${buildId.slice(2)}.debug && `;
        const path = `${dir}/libplugin.so`;
        const workload = await inNamespace(path, stripped, stripped, setup);
        let stopped = false;
        const deno = [Deno.execPath(), "run", "-A", `${REPO_ROOT}tests/read_mapped_file.ts`];
        const result = await runWithin([...deno, String(workload.pid), path, vaddr], {
          async stdin(child, stdout) {
            // Once the mappings are read ("ready"), the process and its namespace go away.
            const { value } = await stdout.read();
            assert.match(new TextDecoder().decode(value), /ready/);
            await workload.stop();
            stopped = true;
            const writer = child.stdin.getWriter();
            await writer.write(new TextEncoder().encode("\n"));
            await writer.close();
          },
        });
        if (!stopped) await workload.stop();
        assert.equal(result.code, 0, result.stderr);
        const report = JSON.parse(result.stdout.trim().split("\n").at(-1)!) as MappedFileReport;
        assert.equal(report.symbolized, "namespace_plugin_step");
      } finally {
        Deno.removeSync(dir, { recursive: true });
      }
    },
    mountNamespaces,
  ),
);

Deno.test(
  rootTest("record of a process whose library became a FIFO ends on time, that library unnamed", async () => {
    await withReplacedLibrary((path) => run("mkfifo", path), async (pid) => {
      const dir = tempDir();
      try {
        const args = [
          "record",
          "-p",
          String(pid),
          "-d",
          "2",
          "--stats",
          `${dir}/stats.json`,
          "-o",
          `${dir}/out.folded`,
        ];
        const result = await runWithin([
          "setpriv",
          ...WITHOUT_MAP_FILES,
          Deno.execPath(),
          ...omniprofArgs(args),
        ]);
        assert.equal(result.code, 0, result.stderr);
        const stats = JSON.parse(Deno.readTextFileSync(`${dir}/stats.json`));
        assert.equal(stats.processes.filesRefused["not-regular"], 1);
        const stacks = parseFolded(Deno.readTextFileSync(`${dir}/out.folded`)).filter((s) =>
          s.comm === "dlopen_main"
        );
        assert.ok(stacks.length > 0, "no samples of the workload");
        const inPlugin = stacks.filter((s) => s.frames.some((frame) => frame.startsWith("[libplugin.so+0x")));
        assert.ok(
          inPlugin.length > 0,
          `no unnamed frames of the library: ${JSON.stringify(stacks.slice(0, 3))}`,
        );
        assert.ok(!stacks.some((s) => s.frames.some((frame) => /^plugin_/.test(frame))));
      } finally {
        Deno.removeSync(dir, { recursive: true });
      }
    });
  }, tracing()),
);
