/**
 * Test support for the CPython plug-in: which Python installations this machine has (the system
 * `python3` and each pyenv version 3.8-3.13), test scripts that know their own line numbers, starting
 * them, stopping them briefly for a consistent read, and attaching the plug-in to them the way the
 * process manager will (find the interpreter file among the mappings, compute its bias, load, attach).
 *
 * @example
 * ```ts ignore
 * import { chainScript, pythonInstalls, startPython } from "./test_processes.ts";
 * const installs = pythonInstalls();
 * for (const install of installs.found) {
 *   await using python = await startPython(install.executable, chainScript().source);
 * }
 * skipForMissingPythons(installs, (label) => `${label} runs the chain script`);
 * ```
 *
 * @module
 */
import { statFields } from "../../process/proc_stat.ts";
import { asPid, type Pid } from "../../types.ts";
import { FileRegistry } from "../../process/file_registry.ts";
import type { ResolvedMapping } from "../../process/mapped_file.ts";
import { ProcessManager } from "../../process/process_manager.ts";
import { LoaderInfo } from "../interpreter.ts";
import { MemoryEbpfHandler } from "../memory_ebpf_handler.ts";
import { mappingBias } from "../process_libraries.ts";
import { RemoteMemory } from "../remote_memory.ts";
import type { PythonData } from "./data.ts";
import type { PythonInstance } from "./instance.ts";
import { pythonLoader } from "./loader.ts";
import { bootstrapped, optional, type Requirement, requiring } from "../../testing/requirements.ts";
import { isFile } from "../../sys/files.ts";

/** A Python to test against. */
export interface PythonInstall {
  /** "system 3.11" or "pyenv 3.12.1". */
  readonly label: string;
  readonly executable: string;
}

/** A Python the tests want that is not here. */
export interface MissingPython {
  /** "system python3" or "pyenv 3.12". */
  readonly label: string;
  readonly reason: string;
}

/** The installs found, and the wanted ones that are missing with why. */
export interface PythonInstalls {
  readonly found: readonly PythonInstall[];
  readonly missing: readonly MissingPython[];
}

/** Debian's python3 (package python3), which bootstrap installs for the tests. */
export const SYSTEM_PYTHON = "/usr/bin/python3";

/** {@linkcode SYSTEM_PYTHON}, for the tests that run it. */
export function systemPython(): Requirement {
  return bootstrapped(
    isFile(SYSTEM_PYTHON) ? null : `${SYSTEM_PYTHON} is not installed (apt-get install python3)`,
  );
}

const decoder = new TextDecoder();
const SYSTEM_LABEL = "system python3";
const WANTED_MINORS = [8, 9, 10, 11, 12, 13];

function run(command: string, args: string[]): string | null {
  try {
    const out = new Deno.Command(command, { args, stdout: "piped", stderr: "null" }).outputSync();
    return out.success ? decoder.decode(out.stdout).trim() : null;
  } catch {
    return null;
  }
}

/** Debian's python3-config (package python3-dev, which bootstrap installs), to build embedding programs. */
export const SYSTEM_PYTHON_CONFIG = "/usr/bin/python3-config";

/** {@linkcode SYSTEM_PYTHON_CONFIG}, for the tests that build against the system Python. */
export function systemPythonDev(): Requirement {
  return bootstrapped(
    isFile(SYSTEM_PYTHON_CONFIG)
      ? null
      : `${SYSTEM_PYTHON_CONFIG} is not installed (apt-get install python3-dev)`,
  );
}

/**
 * How a test program gets the system's interpreter: from the shared libpython (the file named
 * `libpython3.X.so.1.0`), or linked into the program itself from the static one (a program named like
 * nothing Python, whose symbols stay in its `.symtab`: it does not export them).
 */
export type LibpythonLink = "shared" | "static";

/** The system's static libpython, and what a program that links it needs besides. */
export interface StaticLibpython {
  /** `libpython3.X.a`. */
  archive: string;
  /** The libraries its built-in modules need (`-lz`, ...), as sysconfig's MODLIBS, LIBS and SYSLIBS say. */
  libraries: string[];
  /** The directory of the archive (sysconfig's LIBPL), which holds `config.c` and the Setup files. */
  libpl: string;
  /** Built-in modules whose code is not all installed, and so cannot be linked in (see below). */
  unlinkable: string[];
}

/**
 * The system's static libpython and the libraries its built-in modules need, or a reason it is not here.
 * Debian compiles it position-dependent, so a program that links it is too (`-no-pie`).
 *
 * A built-in module whose Setup line (in LIBPL) names an archive that is not installed cannot be linked:
 * CPython 3.12 and 3.13 build the HACL* SHA-2 code of `_sha2` into `Modules/_hacl/libHacl_Hash_SHA2.a`,
 * a file of their build tree that MODLIBS names and no Debian package installs (python/cpython#131298).
 * Such modules are listed in `unlinkable`, and their archives left out of `libraries`.
 */
export function systemStaticLibpython(): StaticLibpython | string {
  const code = "import sysconfig as s; v = s.get_config_var; print(v('LIBPL')); print(v('LIBRARY')); " +
    "print(' '.join([v('MODLIBS'), v('LIBS'), v('SYSLIBS')]))";
  const out = run(SYSTEM_PYTHON, ["-c", code]);
  if (out === null) return `${SYSTEM_PYTHON} does not run`;
  const [libpl = "", library = "", libraries = ""] = out.split("\n");
  const archive = `${libpl}/${library}`;
  if (!isFile(archive)) return `${SYSTEM_PYTHON} has no static library (${archive} is missing)`;
  const missing = new Map<string, string[]>();
  for (const setup of ["Setup.bootstrap", "Setup.stdlib", "Setup.local"]) {
    for (const [module, archives] of staticSetupArchives(`${libpl}/${setup}`)) {
      // A relative path is one of CPython's build tree.
      const absent = archives.filter((path) => !path.startsWith("/") || !isFile(path));
      if (absent.length > 0) missing.set(module, absent);
    }
  }
  const absent = new Set([...missing.values()].flat());
  return {
    archive,
    libraries: libraries.split(/\s+/).filter((flag) => flag !== "" && !absent.has(flag)),
    libpl,
    unlinkable: [...missing.keys()],
  };
}

/**
 * The archives (`*.a`) each module line of a makesetup Setup file names, by module, for the modules it
 * builds into libpython: those of its `*static*` sections, the default until a `*shared*` or
 * `*disabled*` one.
 */
function staticSetupArchives(path: string): Map<string, string[]> {
  const archives = new Map<string, string[]>();
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch {
    return archives;
  }
  let builtIn = true;
  for (const raw of text.split("\n")) {
    const line = raw.replace(/#.*/, "").trim();
    if (line.startsWith("*")) {
      builtIn = line === "*static*";
      continue;
    }
    // Variable assignments are no module lines.
    if (!builtIn || line === "" || /^[A-Za-z_][A-Za-z0-9_]*\s*=/.test(line)) continue;
    const [module, ...words] = line.split(/\s+/);
    const named = words.filter((word) => word.endsWith(".a"));
    if (module !== undefined && named.length > 0) archives.set(module, named);
  }
  return archives;
}

/**
 * The system's table of built-in modules (LIBPL's `config.c`, which the static libpython was built from)
 * without `modules`: a program that defines the table itself does not link the archive's, and so none
 * of the modules left out.
 */
function inittabWithout(libpl: string, modules: string[]): string {
  const initFunctions = new Set(modules.map((module) => `PyInit_${module}`));
  const lines = Deno.readTextFileSync(`${libpl}/config.c`).split("\n");
  const kept = lines.filter((line) =>
    ![...line.matchAll(/\bPyInit_\w+/g)].some(([f]) => initFunctions.has(f))
  );
  const removed = lines.length - kept.length;
  if (removed !== 2 * modules.length) {
    throw new Error(`${libpl}/config.c: ${removed} lines name ${[...initFunctions].join(", ")}, not 2 each`);
  }
  return kept.join("\n");
}

/**
 * Builds `testdata/NAME.c` against the system Python into `dir` (as `dir/NAME-LINK`), with
 * python3-config's flags, and returns its path. Linked with the static libpython, the program brings
 * its own table of built-in modules when some cannot be linked ({@linkcode systemStaticLibpython}).
 *
 * @throws {Error} when it does not build.
 */
export function buildAgainstSystemPython(
  name: "embed" | "imports_runtime",
  link: LibpythonLink,
  dir: string,
): string {
  const source = new URL(`./testdata/${name}.c`, import.meta.url).pathname;
  const output = `${dir}/${name}-${link}`;
  const config = (flag: string) =>
    (run(SYSTEM_PYTHON_CONFIG, ["--embed", flag]) ?? "").split(/\s+/).filter(Boolean);
  const sources = [source];
  let libraries: string[];
  if (link === "shared") {
    libraries = config("--ldflags");
  } else {
    const staticLibrary = systemStaticLibpython();
    if (typeof staticLibrary === "string") throw new Error(staticLibrary);
    if (staticLibrary.unlinkable.length > 0) {
      const inittab = `${dir}/${name}-config.c`;
      Deno.writeTextFileSync(inittab, inittabWithout(staticLibrary.libpl, staticLibrary.unlinkable));
      sources.push(inittab);
    }
    libraries = ["-no-pie", staticLibrary.archive, ...staticLibrary.libraries];
  }
  const args = [
    "-O2",
    "-fno-omit-frame-pointer",
    ...config("--cflags"),
    ...sources,
    "-o",
    output,
    ...libraries,
  ];
  const built = new Deno.Command("gcc", { args, stdout: "null", stderr: "piped" }).outputSync();
  if (!built.success) throw new Error(`gcc ${args.join(" ")}: ${decoder.decode(built.stderr)}`);
  return output;
}

/** The system `python3` and the newest pyenv install of each 3.8-3.13, with reasons for the missing. */
export function pythonInstalls(): PythonInstalls {
  const found: PythonInstall[] = [];
  const missing: MissingPython[] = [];
  const system = SYSTEM_PYTHON;
  const systemVersion = run(system, ["-c", "import sys; print('%d.%d' % sys.version_info[:2])"]);
  if (systemVersion === null) missing.push({ label: SYSTEM_LABEL, reason: `${system} does not run` });
  else found.push({ label: `system ${systemVersion}`, executable: system });

  const versions = run("pyenv", ["versions", "--bare"]);
  const listed = (versions ?? "").split("\n").map((v) => v.trim()).filter((v) => /^3\.\d+\.\d+$/.test(v));
  for (const minor of WANTED_MINORS) {
    const label = `pyenv 3.${minor}`;
    if (versions === null) {
      missing.push({ label, reason: "pyenv is not installed" });
      continue;
    }
    const candidates = listed.filter((v) => v.startsWith(`3.${minor}.`));
    const version = candidates.sort((a, b) => Number(b.split(".")[2]) - Number(a.split(".")[2]))[0];
    if (version === undefined) {
      missing.push({ label, reason: `pyenv has no 3.${minor}` });
      continue;
    }
    const prefix = run("pyenv", ["prefix", version]);
    const executable = prefix === null ? null : `${prefix}/bin/python3`;
    if (executable === null || run(executable, ["-c", "pass"]) === null) {
      missing.push({ label, reason: `the python3 of pyenv ${version} does not run` });
      continue;
    }
    found.push({ label: `pyenv ${version}`, executable });
  }
  return { found, missing };
}

/** `readelf` symbol values by name (defined symbols of both tables, version suffixes dropped). */
export function readelfSymbols(path: string): Map<string, { value: number; size: number }> {
  const text = run("readelf", ["-sW", path]) ?? "";
  const out = new Map<string, { value: number; size: number }>();
  for (const line of text.split("\n")) {
    const m = line.match(/^\s*\d+: ([0-9a-f]+)\s+(\d+|0x[0-9a-f]+)\s+\S+\s+\S+\s+\S+\s+(\S+)\s+(\S+)/);
    if (m === null || m[3] === "UND") continue;
    out.set((m[4] ?? "").replace(/@.*$/, ""), { value: parseInt(m[1] ?? "", 16), size: Number(m[2]) });
  }
  return out;
}

/** What a Python says of itself, and which file holds its interpreter. */
export interface InterpreterFile {
  /** `sys.version_info[:3]`. */
  readonly version: readonly [number, number, number];
  /** `sys.hexversion`. */
  readonly hexversion: number;
  /** The real path of `sys.executable`. */
  readonly executable: string;
  /** The real path of the file that defines `_PyRuntime` (readelf's word): the executable or libpython. */
  readonly path: string;
  /** The real path of the shared libpython, also when the executable does not use it; null when absent. */
  readonly library: string | null;
  /** Whether that is the executable (Debian links the interpreter in) rather than libpython. */
  readonly inExecutable: boolean;
}

/**
 * Asks the Python `executable` its version and where its interpreter lies.
 *
 * @throws {Error} when it does not run.
 */
export function interpreterFileOf(executable: string): InterpreterFile {
  const code = "import json, os, sys, sysconfig; v = sysconfig.get_config_var; " +
    "print(json.dumps({'version': list(sys.version_info[:3]), 'hexversion': sys.hexversion, " +
    "'executable': os.path.realpath(sys.executable), " +
    "'library': os.path.join(v('LIBDIR') or '', v('INSTSONAME') or '')}))";
  const out = run(executable, ["-c", code]);
  if (out === null) throw new Error(`${executable} does not run`);
  const facts = JSON.parse(out) as {
    version: [number, number, number];
    hexversion: number;
    executable: string;
    library: string;
  };
  // The interpreter is in the executable unless it links libpython (Debian links it in statically even
  // though it also ships the shared library).
  const inExecutable = readelfSymbols(facts.executable).has("_PyRuntime");
  const library = isFile(facts.library) ? Deno.realPathSync(facts.library) : null;
  if (!inExecutable && library === null) throw new Error(`${executable}: neither file holds the interpreter`);
  return {
    version: facts.version,
    hexversion: facts.hexversion,
    executable: facts.executable,
    path: inExecutable ? facts.executable : library!,
    library,
    inExecutable,
  };
}

/** Some Python to run, whichever: the tests that need one but not a particular one. */
export function anyPython(installs: PythonInstalls): Requirement {
  if (installs.found.length > 0) return optional(null);
  // None runs, so neither does the system's python3, which bootstrap installs.
  return bootstrapped(
    `no Python runs here (${installs.missing.map((p) => `${p.label}: ${p.reason}`).join("; ")})`,
  );
}

/**
 * Registers, for each wanted Python that is not here, the test each of `names` names for it, as skipped
 * with the reason: the tests registered per Python found then count a missing Python as skipped tests
 * rather than as nothing. (The system's python3 comes with bootstrap; pyenv's versions are optional.)
 */
export function skipForMissingPythons(
  installs: PythonInstalls,
  ...names: ((label: string) => string)[]
): void {
  for (const python of installs.missing) {
    for (const name of names) {
      Deno.test(
        requiring([python.label === SYSTEM_LABEL ? bootstrapped(python.reason) : optional(python.reason)], {
          name: name(python.label),
          fn() {},
        }),
      );
    }
  }
}

/** A script and the lines its markers are on. */
export interface TestScript {
  readonly source: string;
  /** Marker name -> 1-based line. */
  readonly lines: Readonly<Record<string, number>>;
}

/** Reads the `# @NAME` markers of `source` into line numbers. */
export function withMarkers(source: string): TestScript {
  const lines: Record<string, number> = {};
  source.split("\n").forEach((line, index) => {
    const match = /# @(\w+)/.exec(line);
    if (match?.[1] !== undefined) lines[match[1]] = index + 1;
  });
  return { source, lines };
}

/**
 * `main -> pa -> pb -> pc`, where pc prints "ready" and spins. Markers: SPIN (pc's loop), CALL_PC,
 * CALL_PB, CALL_PA, CALL_MAIN, and DEF_PC .. DEF_MAIN (first lines).
 */
export function chainScript(): TestScript {
  return withMarkers(`import sys


def pc():  # @DEF_PC
    sys.stdout.write("ready\\n")
    sys.stdout.flush()
    n = 0
    while True: n += 1  # @SPIN


def pb():  # @DEF_PB
    pc()  # @CALL_PC


def pa():  # @DEF_PA
    pb()  # @CALL_PB


def main():  # @DEF_MAIN
    pa()  # @CALL_PA


main()  # @CALL_MAIN
`);
}

/**
 * Two threads spinning in different methods of one class, the main thread sleeping. Prints
 * "A <ident> <native_id>", "B ...", then "ready". Markers: SPIN_A, SPIN_B, CALL_A, CALL_B, MAIN_WAIT,
 * CALL_MAIN.
 */
export function twoThreadScript(): TestScript {
  return withMarkers(`import sys
import threading
import time


class Worker:
    def spin_a(self, ready):
        ready.set()
        n = 0
        while True: n += 1  # @SPIN_A

    def spin_b(self, ready):
        ready.set()
        n = 0
        while True: n -= 1  # @SPIN_B


def ta(worker, ready):
    worker.spin_a(ready)  # @CALL_A


def tb(worker, ready):
    worker.spin_b(ready)  # @CALL_B


def main():
    worker = Worker()
    ready_a = threading.Event()
    ready_b = threading.Event()
    a = threading.Thread(target=ta, args=(worker, ready_a), daemon=True)
    b = threading.Thread(target=tb, args=(worker, ready_b), daemon=True)
    a.start()
    b.start()
    ready_a.wait()
    ready_b.wait()
    print("A %d %d" % (a.ident, a.native_id))
    print("B %d %d" % (b.ident, b.native_id))
    print("ready", flush=True)
    while True: time.sleep(0.05)  # @MAIN_WAIT


main()  # @CALL_MAIN
`);
}

/** A running test script. */
export interface PythonProcess extends AsyncDisposable {
  readonly pid: Pid;
  readonly scriptPath: string;
  /** Lines it printed before "ready". */
  readonly output: readonly string[];
  readonly child: Deno.ChildProcess;
  /** Kills it (SIGKILL) and waits for it. Idempotent. */
  kill(): Promise<void>;
}

/**
 * Starts `executable` on `source` (written to a temporary file) and waits until it prints "ready".
 * `args` gives its arguments from the script's path: by default `-u SCRIPT`, as `python3` takes it.
 *
 * @throws {Error} when it exits or stays silent for 20 s.
 */
export async function startPython(
  executable: string,
  source: string,
  args: (scriptPath: string) => string[] = (scriptPath) => ["-u", scriptPath],
): Promise<PythonProcess> {
  const dir = Deno.makeTempDirSync({ prefix: "omniprof_python_test_" });
  const scriptPath = `${dir}/workload.py`;
  Deno.writeTextFileSync(scriptPath, source);
  const child = new Deno.Command(executable, {
    args: args(scriptPath),
    stdout: "piped",
    stderr: "inherit",
    stdin: "null",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const output: string[] = [];
  let buffer = "";
  let killed = false;
  const kill = async () => {
    if (killed) return;
    killed = true;
    try {
      child.kill("SIGKILL");
    } catch {
      // already exited
    }
    await reader.cancel().catch(() => {});
    await child.status;
    Deno.removeSync(dir, { recursive: true });
  };
  const timeout = setTimeout(() => void kill(), 20_000);
  try {
    while (!output.includes("ready")) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`${executable} ${scriptPath} exited before printing "ready"`);
      buffer += value;
      const parts = buffer.split("\n");
      buffer = parts.pop() ?? "";
      output.push(...parts);
    }
  } catch (error) {
    clearTimeout(timeout);
    await kill();
    throw error;
  }
  clearTimeout(timeout);
  return { pid: asPid(child.pid), scriptPath, output, child, kill, [Symbol.asyncDispose]: kill };
}

/** The kernel's state letters of every thread of `pid`. */
function threadStates(pid: Pid): string[] {
  const out: string[] = [];
  for (const entry of Deno.readDirSync(`/proc/${pid}/task`)) {
    out.push(statFields(Deno.readTextFileSync(`/proc/${pid}/task/${entry.name}/stat`))?.[0] ?? "");
  }
  return out;
}

/**
 * Runs `read` while `pid` is stopped (SIGSTOP, wait until every thread is in state T, read, SIGCONT):
 * its frames cannot change under the read.
 */
export async function whileStopped<T>(pid: Pid, read: () => T): Promise<T> {
  Deno.kill(pid, "SIGSTOP");
  try {
    const deadline = performance.now() + 5000;
    while (!threadStates(pid).every((state) => state === "T")) {
      if (performance.now() > deadline) throw new Error(`process ${pid} did not stop`);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    return read();
  } finally {
    Deno.kill(pid, "SIGCONT");
  }
}

/** The plug-in attached to a process, with what it was built from. */
export interface AttachedPython extends Disposable {
  readonly data: PythonData;
  readonly instance: PythonInstance;
  readonly memory: RemoteMemory;
  readonly ebpf: MemoryEbpfHandler;
  /** The process's executable mappings, as the instance was given them. */
  readonly mappings: readonly ResolvedMapping[];
  /** The interpreter file's path in the process. */
  readonly path: string;
}

/**
 * Attaches the CPython plug-in to `pid` the way the process manager will: every executable mapping's
 * file is offered to the loader; the first that yields Data is attached with its mapping's bias.
 *
 * @throws {Error} when no mapping is a Python interpreter.
 */
export function attachPython(pid: Pid): AttachedPython {
  const ebpf = new MemoryEbpfHandler();
  const files = new FileRegistry();
  const processes = new ProcessManager({ files });
  const close = () => {
    processes.close();
    files.close();
  };
  try {
    processes.onExec(pid);
    const mappings = processes.mappingsOf(pid);
    const tried = new Set<string>();
    for (const mapping of mappings) {
      const file = mapping.file;
      if (file.fileId === null || !file.readable || tried.has(file.path)) continue;
      tried.add(file.path);
      using info = new LoaderInfo({ fileId: file.fileId, fileName: mapping.path, open: () => file.open() });
      let data: PythonData | null;
      try {
        data = pythonLoader(ebpf, info) as PythonData | null;
      } catch (error) {
        if (error instanceof RangeError) continue;
        throw error;
      }
      if (data === null) continue;
      const bias = mappingBias(mapping, info.getElf().loadSegments);
      if (bias === null) throw new Error(`Cannot compute the bias of ${mapping.path} in ${pid}`);
      const memory = RemoteMemory.open(pid);
      const instance = data.attach(ebpf, pid, bias, memory, mappings);
      return {
        data,
        instance,
        memory,
        ebpf,
        mappings,
        path: mapping.path,
        [Symbol.dispose]() {
          instance.detach(ebpf, pid);
          memory.close();
          close();
        },
      };
    }
    throw new Error(`No Python interpreter among the mappings of ${pid}: ${[...tried].join(", ")}`);
  } catch (error) {
    close();
    throw error;
  }
}
