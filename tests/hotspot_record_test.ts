// `record -p` of Java programs run plainly (no agent, no JVM flag for the profiler): interpreted and
// compiled frames named in order with their files and lines, inlined calls expanded, under the JVM's own
// native frames. For every JDK under /usr/lib/jvm with `java` and `jhsdb` (17 and 25 here). Needs root
// and BTF.
import assert from "node:assert/strict";
import { decodePprof } from "../lib/output/pprof_reader.ts";
import type { Profile } from "../lib/profile/profile.ts";
import { optional, programs, requiring } from "../lib/testing/requirements.ts";
import {
  buildJniLibrary,
  compileJava,
  installedJdks,
  startJvm,
  type TestJdk,
} from "../lib/interpreter/hotspot/test_jvm.ts";
import { REPO_ROOT, tempDir, tracing } from "./helpers.ts";
import { cpuBetween, recordWatchingCpu } from "./recording_window.ts";
import { assertSampleCount, reportedLost } from "./sample_bounds.ts";

const SOURCES = `${REPO_ROOT}tests/workloads/java/`;

/** The lines a workload marks `// @line NAME`, by name. */
function markedLines(name: string): Map<string, number> {
  const lines = new Map<string, number>();
  Deno.readTextFileSync(`${SOURCES}${name}.java`).split("\n").forEach((text, i) => {
    const mark = /\/\/ @line (\w+)$/.exec(text)?.[1];
    if (mark !== undefined) lines.set(mark, i + 1);
  });
  return lines;
}

interface Frame {
  kind: string;
  name: string;
  file: string;
  line: number;
  inlined: boolean;
}

/** One stack of a thread, frames root first, and how often it was sampled. */
interface Sample {
  tid: number;
  frames: Frame[];
  count: number;
}

function samplesOf(profile: Profile, pid: number): Sample[] {
  return profile.samples.filter((sample) => sample.pid === pid).map((sample) => ({
    tid: sample.tid,
    count: sample.count,
    frames: sample.locations.map((index) => {
      const location = profile.locations[index]!;
      return {
        kind: location.kind,
        name: location.functionName,
        file: location.sourceFile,
        line: location.line,
        inlined: location.inlined ?? false,
      };
    }).reverse(),
  }));
}

/**
 * `record -p PID -d 5` of the JVM into `output` (pprof): the recording must log no problem, and its sample
 * count fit the CPU time the JVM (all its threads) used meanwhile.
 */
async function recordJvm(pid: number, output: string): Promise<Sample[]> {
  const { result, start, end, steal } = await recordWatchingCpu(
    ["record", "-p", String(pid), "-d", "5", "-o", output],
    [{ pid }],
  );
  assert.equal(result.code, 0, result.stderr);
  assert.doesNotMatch(result.stderr, /error|warn/i, `the recording logs no problem:\n${result.stderr}`);
  assert.ok(end[0], `the JVM ${pid} ran throughout the recording`);
  const samples = samplesOf(decodePprof(Deno.readFileSync(output)), pid);
  const total = samples.reduce((sum, sample) => sum + sample.count, 0);
  assertSampleCount(total, cpuBetween(start[0]!, end[0]), 99, steal, "the JVM");
  return samples;
}

/** The index in `frames` where `chain` (names) starts as consecutive frames, or -1. */
function chainAt(frames: Frame[], chain: string[]): number {
  for (let i = 0; i + chain.length <= frames.length; i++) {
    if (chain.every((name, j) => frames[i + j]!.name === name)) return i;
  }
  return -1;
}

/** The samples of the thread that ran `method` (the program's main thread), and their total. */
function threadOf(samples: Sample[], method: string): { samples: Sample[]; total: number } {
  const tid = samples.find((s) => s.frames.some((f) => f.name === method))?.tid;
  assert.ok(tid !== undefined, `a thread ran ${method}`);
  const mine = samples.filter((s) => s.tid === tid);
  return { samples: mine, total: mine.reduce((sum, s) => sum + s.count, 0) };
}

function chainTest(jdk: TestJdk): () => Promise<void> {
  return async () => {
    const lines = markedLines("Chain");
    const dir = tempDir();
    try {
      await using jvm = await startJvm("Chain", ["60"], { jdk });
      const samples = await recordJvm(jvm.pid, `${dir}/chain.pb.gz`);
      const main = threadOf(samples, "Chain.main");
      // main -> a -> b -> c under the JVM's call stub, each at the line of its call, c somewhere in its body.
      const chain = ["Chain.main", "Chain.a", "Chain.b", "Chain.c"];
      let shown = 0;
      for (const { frames, count } of main.samples) {
        const at = chainAt(frames, chain);
        if (at < 0) continue;
        const [m, a, b, c] = frames.slice(at, at + 4);
        const c0 = lines.get("c_first")!;
        const c1 = lines.get("c_last")!;
        const right = [m, a, b, c].every((f) => f!.kind === "hotspot" && f!.file === "Chain.java") &&
          m!.line === lines.get("main") && a!.line === lines.get("a") && b!.line === lines.get("b") &&
          c!.line >= c0 && c!.line <= c1 &&
          // Below main: the JVM's native frames that called it (the call stub into Java, then libjvm.so).
          at > 0 && frames.slice(0, at).some((f) => f.name.startsWith("JavaCalls::call"));
        if (right) shown += count;
      }
      console.log(
        `JDK ${jdk.release}: ${shown}/${main.total} samples of the main thread show ${chain.join(";")}`,
      );
      assert.ok(shown >= 0.9 * main.total, `${shown}/${main.total} with the chain, files and lines`);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  };
}

function inlinedTest(jdk: TestJdk): () => Promise<void> {
  return async () => {
    const lines = markedLines("Inline");
    const dir = tempDir();
    try {
      await using jvm = await startJvm("Inline", [], {
        jdk,
        javaOptions: [
          "-XX:+PrintCompilation",
          "-XX:+UnlockDiagnosticVMOptions",
          "-XX:+PrintInlining",
          "-XX:CompileCommand=quiet",
          "-XX:CompileCommand=dontinline,Inline::leaf",
        ],
      });
      // C2 (level 4) compiled c, not only for on-stack replacement, inlining mix and step into it.
      const compiled = /^\s*\d+\s+\d+\s+4\s+Inline::c \(\d+ bytes\)$/m;
      const output = await jvm.readOutput((text) => compiled.test(text), 30_000);
      assert.match(output, compiled, "PrintCompilation shows C2's code of Inline::c");
      assert.match(output, /Inline::mix \(\d+ bytes\)\s+inline/, "PrintInlining shows mix inlined");
      assert.match(output, /Inline::step \(\d+ bytes\)\s+inline/, "PrintInlining shows step inlined");
      const samples = await recordJvm(jvm.pid, `${dir}/inline.pb.gz`);
      const main = threadOf(samples, "Inline.main");
      // In leaf: main -> c -> mix -> step -> leaf, mix and step inlined into c's code (one recorded frame
      // expanded), each at the line of its call.
      const chain = ["Inline.main", "Inline.c", "Inline.mix", "Inline.step", "Inline.leaf"];
      let inLeaf = 0;
      let shown = 0;
      for (const { frames, count } of main.samples) {
        if (!frames.some((f) => f.name === "Inline.leaf")) continue;
        inLeaf += count;
        const at = chainAt(frames, chain);
        if (at < 0) continue;
        const [m, c, mix, step] = frames.slice(at, at + 4);
        const right = m!.line === lines.get("main") && c!.line === lines.get("c") &&
          mix!.line === lines.get("mix") && step!.line === lines.get("step") && mix!.inlined &&
          step!.inlined && !c!.inlined && frames.slice(at, at + 5).every((f) => f.file === "Inline.java");
        if (right) shown += count;
      }
      console.log(
        `JDK ${jdk.release}: ${inLeaf}/${main.total} samples of the main thread in leaf; ${shown} show ` +
          `${chain.join(";")} with mix and step inlined`,
      );
      assert.ok(inLeaf >= 0.1 * main.total, `${inLeaf}/${main.total} samples in leaf`);
      assert.ok(shown >= 0.9 * inLeaf, `${shown}/${inLeaf} with the inlined chain at its lines`);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  };
}

function jniTest(jdk: TestJdk): () => Promise<void> {
  return async () => {
    const lines = markedLines("Jni");
    const dir = tempDir();
    try {
      const library = await buildJniLibrary("jni_callback", jdk);
      await using jvm = await startJvm("Jni", [], { jdk, javaOptions: [`-Djava.library.path=${library}`] });
      const samples = await recordJvm(jvm.pid, `${dir}/jni.pb.gz`);
      const main = threadOf(samples, "Jni.main");
      // Java (main, then the native method viaC), C (its JNI function and the helper that calls back), the
      // JVM's JNI call into Java, then Java again (spin), in that order.
      let shown = 0;
      for (const { frames, count } of main.samples) {
        // Each after the one before: the JVM's JNI call into Java is also below main.
        const steps: ((f: Frame) => boolean)[] = [
          (f) => f.name === "Jni.main" && f.kind === "hotspot" && f.line === lines.get("main"),
          (f) => f.name === "Jni.viaC" && f.kind === "hotspot",
          (f) => f.name === "Java_Jni_viaC" && f.kind !== "hotspot",
          (f) => f.name === "call_spin" && f.kind !== "hotspot",
          (f) => f.name.startsWith("JavaCalls::call"),
          (f) => f.name === "Jni.spin" && f.file === "Jni.java" && f.line === lines.get("spin"),
        ];
        let at = -1;
        const inOrder = steps.every((step) => {
          at = frames.findIndex((f, i) => i > at && step(f));
          return at >= 0;
        });
        if (inOrder) shown += count;
      }
      console.log(
        `JDK ${jdk.release}: ${shown}/${main.total} samples of the main thread show ` +
          "Jni.main;Jni.viaC;Java_Jni_viaC;call_spin;...;Jni.spin",
      );
      assert.ok(shown >= 0.9 * main.total, `${shown}/${main.total} with Java, C and Java in order`);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  };
}

function startupTest(jdk: TestJdk): () => Promise<void> {
  return async () => {
    const classes = await compileJava("Chain");
    const dir = tempDir();
    try {
      // From the JVM's first instruction: its samples count while its tables are not set up yet too.
      const out = `${dir}/startup.pb.gz`;
      const { result, childrenCpu, steal } = await recordWatchingCpu(
        ["record", "-o", out, "--", `${jdk.home}/bin/java`, "-cp", classes, "Chain", "3"],
        [],
      );
      assert.equal(result.code, 0, result.stderr);
      assert.equal(reportedLost(result.stderr), 0, result.stderr);
      const profile = decodePprof(Deno.readFileSync(out));
      const pids = new Set(profile.samples.map((sample) => sample.pid));
      assert.equal(pids.size, 1, "one JVM");
      const samples = samplesOf(profile, [...pids][0]!);
      const total = samples.reduce((sum, sample) => sum + sample.count, 0);
      assertSampleCount(total, childrenCpu, 99, steal, "the JVM from its start", 0);
      const main = threadOf(samples, "Chain.main");
      const chain = ["Chain.main", "Chain.a", "Chain.b", "Chain.c"];
      const shown = main.samples.filter((s) => chainAt(s.frames, chain) >= 0).reduce(
        (n, s) => n + s.count,
        0,
      );
      console.log(
        `JDK ${jdk.release}: ${total} samples from the JVM's start, none lost; ${shown}/${main.total} of the ` +
          "main thread's show main;a;b;c",
      );
      // The chain burns 3 s of CPU: most of the main thread's samples, whatever the start-up took.
      assert.ok(shown >= 0.5 * main.total, `${shown}/${main.total} with the chain`);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  };
}

const jdks = installedJdks();
for (const jdk of jdks) {
  Deno.test(requiring([tracing()], {
    name:
      `record -p of a JDK ${jdk.release} JVM run plainly shows its main thread's main;a;b;c with files and lines`,
    fn: chainTest(jdk),
  }));
  Deno.test(requiring([tracing()], {
    name: `record -p of a JDK ${jdk.release} JVM shows the calls C2 inlined, at their lines`,
    fn: inlinedTest(jdk),
  }));
  Deno.test(requiring([tracing()], {
    name: `record -- java of a JDK ${jdk.release} JVM counts every sample from its start, none lost`,
    fn: startupTest(jdk),
  }));
  Deno.test(requiring([tracing(), programs("gcc")], {
    name: `record -p of a JDK ${jdk.release} JVM shows Java calling C calling Java back, in order`,
    fn: jniTest(jdk),
  }));
}
if (jdks.length === 0) {
  for (
    const name of [
      "shows its main thread's main;a;b;c",
      "shows the calls C2 inlined",
      "shows Java calling C calling Java back",
      "counts every sample from its start, none lost",
    ]
  ) {
    Deno.test(requiring([optional("no JDK with java and jhsdb under /usr/lib/jvm")], {
      name: `record -p of a JVM ${name}`,
      fn: () => {
        throw new Error("unreachable: ignored without a JDK");
      },
    }));
  }
}
