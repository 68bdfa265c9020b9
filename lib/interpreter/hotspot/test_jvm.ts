/**
 * Java workloads for the HotSpot tests: compiles `tests/workloads/java/NAME.java` with `javac` (once, while
 * the source is unchanged) and starts it, waiting until its `libjvm.so` has filled the introspection
 * tables. Test support only.
 *
 * @module
 */
import { REPO_ROOT } from "../../../tests/helpers.ts";
import { ElfFile } from "../../elf/elf_file.ts";
import { mappingBias, parseProcMaps } from "../../process/proc_maps.ts";
import { delay } from "../../sys/timer.ts";
import { asPid, type Pid } from "../../types.ts";

const SOURCES = `${REPO_ROOT}tests/workloads/java/`;
const CLASSES = `${REPO_ROOT}tests/.build/java/`;
/** The class file release the workloads are compiled for: the oldest JDK the HotSpot support reads. */
const OLDEST_RELEASE = 17;

/** A JDK of the machine: its home and its feature release (17, 21, 25). */
export interface TestJdk {
  home: string;
  release: number;
}

/**
 * The JDKs under /usr/lib/jvm (each once, by real path) that have `java` and `jhsdb`, oldest first; the
 * workloads are compiled by the `javac` on PATH for the oldest release, so that every one runs them.
 */
export function installedJdks(): TestJdk[] {
  const homes = new Set<string>();
  try {
    for (const entry of Deno.readDirSync("/usr/lib/jvm")) {
      try {
        const home = Deno.realPathSync(`/usr/lib/jvm/${entry.name}`);
        Deno.statSync(`${home}/bin/java`);
        Deno.statSync(`${home}/bin/jhsdb`);
        homes.add(home);
      } catch {
        // not a JDK with the debugger
      }
    }
  } catch {
    return [];
  }
  const jdks: TestJdk[] = [];
  for (const home of homes) {
    const release = /^JAVA_VERSION="(\d+)/m.exec(readOrEmpty(`${home}/release`));
    if (release) jdks.push({ home, release: Number(release[1]) });
  }
  return jdks.sort((a, b) => a.release - b.release);
}

function readOrEmpty(path: string): string {
  try {
    return Deno.readTextFileSync(path);
  } catch {
    return "";
  }
}

/**
 * Builds `tests/workloads/java/NAME.c` into `libNAME.so` beside the compiled classes (for
 * `System.loadLibrary`), with the JNI headers of `jdk`; returns the directory.
 */
export async function buildJniLibrary(name: string, jdk: TestJdk): Promise<string> {
  Deno.mkdirSync(CLASSES, { recursive: true });
  const result = await new Deno.Command("gcc", {
    args: [
      "-shared",
      "-fPIC",
      "-O2",
      `-I${jdk.home}/include`,
      `-I${jdk.home}/include/linux`,
      `${SOURCES}${name}.c`,
      "-o",
      `${CLASSES}lib${name}.so`,
    ],
    stderr: "piped",
  }).output();
  if (!result.success) throw new Error(`gcc ${name}: ${new TextDecoder().decode(result.stderr)}`);
  return CLASSES;
}

/**
 * Runs `commands` (one a line) in the JDK's own debugger, `jhsdb clhsdb`, attached to `pid` (which it stops
 * while attached); returns what it printed.
 */
export async function clhsdb(jdk: TestJdk, pid: number, commands: string[]): Promise<string> {
  const child = new Deno.Command(`${jdk.home}/bin/jhsdb`, {
    args: ["clhsdb", "--pid", String(pid)],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(`${[...commands, "quit"].join("\n")}\n`));
  await writer.close();
  return new TextDecoder().decode((await child.output()).stdout);
}

/** A running JVM of a test, and where its `libjvm.so` is. */
export interface TestJvm extends AsyncDisposable {
  pid: Pid;
  child: Deno.ChildProcess;
  libjvm: string;
  /** Load bias of `libjvm.so` in the process. */
  bias: number;
  /**
   * Reads the JVM's standard output on until `done` holds for all of it so far (from its start), or
   * `timeoutMs` passed; returns it.
   */
  readOutput(done: (text: string) => boolean, timeoutMs: number): Promise<string>;
}

/** Compiles `NAME.java` into tests/.build/java/ unless its class is newer; returns the class directory. */
export async function compileJava(name: string): Promise<string> {
  const source = `${SOURCES}${name}.java`;
  const built = `${CLASSES}${name}.class`;
  try {
    if ((Deno.statSync(built).mtime?.getTime() ?? 0) > (Deno.statSync(source).mtime?.getTime() ?? 0)) {
      return CLASSES;
    }
  } catch {
    // not built yet
  }
  Deno.mkdirSync(CLASSES, { recursive: true });
  const result = await new Deno.Command("javac", {
    args: ["--release", String(OLDEST_RELEASE), "-d", CLASSES, source],
    stderr: "piped",
  }).output();
  if (!result.success) throw new Error(`javac ${name}: ${new TextDecoder().decode(result.stderr)}`);
  return CLASSES;
}

/**
 * Starts `java -cp CLASSES NAME ARGS` (a workload that prints `ready` first, from its main method) and
 * resolves once it has printed it: the JVM has started. Kill it by disposing of the result.
 */
export async function startJvm(
  name: string,
  args: string[],
  options: { jdk?: TestJdk; javaOptions?: string[] } = {},
): Promise<TestJvm> {
  const classes = await compileJava(name);
  const javaOptions = options.javaOptions ?? [];
  const child = new Deno.Command(options.jdk ? `${options.jdk.home}/bin/java` : "java", {
    args: [...javaOptions, "-cp", classes, name, ...args],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const pid = asPid(child.pid);
  const reader = child.stdout.getReader();
  const stop = async () => {
    try {
      child.kill("SIGKILL");
    } catch {
      // already gone
    }
    await child.status;
    await reader.cancel().catch(() => {});
  };
  let text = "";
  const decoder = new TextDecoder();
  const readOutput = async (done: (text: string) => boolean, timeoutMs: number) => {
    const timeout = delay(timeoutMs).then(() => null);
    while (!done(text)) {
      const chunk = await Promise.race([reader.read(), timeout]);
      if (chunk === null || chunk.done) break;
      text += decoder.decode(chunk.value, { stream: true });
    }
    return text;
  };
  try {
    await readOutput((output) => /^ready$/m.test(output), 10_000);
    if (!/^ready$/m.test(text)) throw new Error(`java ${name} did not print ready within 10 s`);
    const found = findLibjvm(pid);
    if (found === null) throw new Error(`java ${name} (pid ${pid}) maps no libjvm.so`);
    return { pid, child, ...found, readOutput, [Symbol.asyncDispose]: stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Where `libjvm.so` is mapped in `pid`, or null while it is not. */
function findLibjvm(pid: Pid): { libjvm: string; bias: number } | null {
  let text: string;
  try {
    text = Deno.readTextFileSync(`/proc/${pid}/maps`);
  } catch {
    return null;
  }
  const mapping = parseProcMaps(text).find((m) => m.path.endsWith("/libjvm.so"));
  if (mapping === undefined) return null;
  using elf = ElfFile.open(mapping.path);
  const bias = mappingBias(mapping, elf.loadSegments);
  return bias === null ? null : { libjvm: mapping.path, bias };
}
