// Python frames end to end: real CPython processes (Debian's python3 and each pyenv 3.8-3.13 found) are
// recorded, and the profile must show their Python functions with file and line in true order among the
// native interpreter frames. Needs root and BTF.
import assert from "node:assert/strict";
import { decodePprof } from "../lib/output/pprof_reader.ts";
import type { Profile } from "../lib/profile/profile.ts";
import {
  anyPython,
  buildAgainstSystemPython,
  chainScript,
  type LibpythonLink,
  type PythonInstall,
  pythonInstalls,
  type PythonProcess,
  skipForMissingPythons,
  startPython,
  SYSTEM_PYTHON,
  systemPython,
  systemPythonDev,
  systemStaticLibpython,
  type TestScript,
  twoThreadScript,
  withMarkers,
} from "../lib/interpreter/python/test_processes.ts";
import { bootstrapped, programs } from "../lib/testing/requirements.ts";
import { buildWorkload, runCli, tempDir, tracingTest } from "./helpers.ts";
import { cpuBetween, type CpuTarget, recordWatchingCpu } from "./recording_window.ts";
import { assertSampleCount, type CpuSpan, reportedCpuSeconds, StealMeter } from "./sample_bounds.ts";
import { parsePidStatCpu } from "./bench/system_cpu.ts";

const installs = pythonInstalls();
// Each test records every Python here at once; a missing one counts as a skipped test of its own.
skipForMissingPythons(
  installs,
  (label) => `record: main;pa;pb;pc as Python frames with file:line, for ${label}`,
  (label) => `record: two Python threads are each attributed to their own function, for ${label}`,
  (label) => `record: Python -> ctypes -> qsort -> Python comparator, in order, for ${label}`,
);
const somePython = anyPython(installs);

/** One frame as the profile names it. */
interface Frame {
  kind: string;
  name: string;
  file: string;
  line: number;
}

/** A sample's frames root first, with its thread and count. */
interface Sample {
  pid: number;
  tid: number;
  frames: Frame[];
  count: number;
}

function samplesOf(profile: Profile): Sample[] {
  return profile.samples.map((sample) => ({
    pid: sample.pid,
    tid: sample.tid,
    count: sample.count,
    frames: sample.locations.map((index) => {
      const location = profile.locations[index]!;
      return {
        kind: location.kind,
        name: location.functionName,
        file: location.sourceFile,
        line: location.line,
      };
    }).reverse(),
  }));
}

/**
 * The samples of a recording of `pids`, and the CPU time each target used while it was sampled. It lasts
 * until every target has had `stop.cpuSeconds` of CPU (a busy machine makes the recording longer, not
 * poorer), or `stop.seconds` as `record -d` counts them.
 */
async function record(
  pids: number[],
  targets: CpuTarget[],
  stop: { cpuSeconds: number } | { seconds: number },
  dir: string,
): Promise<{ samples: Sample[]; cpu: CpuSpan[]; steal: number }> {
  const output = `${dir}/python.pb.gz`;
  const args = ["record", "-o", output, ...pids.flatMap((pid) => ["-p", String(pid)])];
  if ("seconds" in stop) args.push("-d", String(stop.seconds));
  const { result, start, end, steal } = await recordWatchingCpu(
    args,
    targets,
    "cpuSeconds" in stop ? { interruptAfterCpuSeconds: stop.cpuSeconds } : {},
  );
  assert.equal(result.code, 0, result.stderr);
  assert.doesNotMatch(result.stderr, /error|warn/i, `the recording logs no problem:\n${result.stderr}`);
  const cpu = targets.map((target, i) => {
    assert.ok(end[i], `${target.pid} ran throughout the recording`);
    return cpuBetween(start[i]!, end[i]);
  });
  return { samples: samplesOf(decodePprof(Deno.readFileSync(output))), cpu, steal };
}

function sum(samples: readonly Sample[]): number {
  return samples.reduce((total, sample) => total + sample.count, 0);
}

/** The sample's Python frames of `script`, root first, as `name:line`. */
function pythonFrames(sample: Sample, script: string): string[] {
  return sample.frames.filter((frame) => frame.kind === "python" && frame.file === script)
    .map((frame) => `${frame.name}:${frame.line}`);
}

/** Whether the first Python frame sits above (is called by) the native eval loop. */
function belowEvalLoop(sample: Sample): boolean {
  const firstPython = sample.frames.findIndex((frame) => frame.kind === "python");
  const evalLoop = sample.frames.findIndex((frame) => frame.name === "_PyEval_EvalFrameDefault");
  return evalLoop >= 0 && evalLoop < firstPython;
}

/**
 * One Python of this machine, what it printed before "ready", the samples of its process, and the CPU
 * time each of its targets used while sampled.
 */
interface RecordedPython {
  install: PythonInstall;
  process: PythonProcess;
  samples: Sample[];
  cpu: CpuSpan[];
  steal: number;
}

/**
 * Runs `script` under every Python found and records them all together until each of their `targets`
 * (the whole process unless told which threads) has had `cpuSeconds` of CPU; stops them, and hands back
 * each one's samples.
 */
async function recordEveryPython(
  script: TestScript,
  cpuSeconds: number,
  targets: (process: PythonProcess) => CpuTarget[] = (process) => [{ pid: process.pid }],
): Promise<RecordedPython[]> {
  assert.ok(installs.found.length > 0, "at least the system python3 runs");
  const started: { install: PythonInstall; process: PythonProcess }[] = [];
  const dir = tempDir();
  try {
    for (const install of installs.found) {
      started.push({ install, process: await startPython(install.executable, script.source) });
    }
    const perPython = started.map(({ process }) => targets(process));
    const recorded = await record(
      started.map(({ process }) => process.pid),
      perPython.flat(),
      { cpuSeconds },
      dir,
    );
    let next = 0;
    return started.map(({ install, process }, i) => {
      const cpu = recorded.cpu.slice(next, next + perPython[i]!.length);
      next += cpu.length;
      return {
        install,
        process,
        samples: recorded.samples.filter((sample) => sample.pid === process.pid),
        cpu,
        steal: recorded.steal,
      };
    });
  } finally {
    for (const { process } of started) await process.kill();
    Deno.removeSync(dir, { recursive: true });
  }
}

Deno.test(
  tracingTest("record: main;pa;pb;pc as Python frames with file:line, for every Python here", async () => {
    const script = chainScript();
    const { lines } = script;
    for (const { install, process, samples: ours, cpu, steal } of await recordEveryPython(script, 1.5)) {
      const total = sum(ours);
      const expected = [
        `<module>:${lines.CALL_MAIN}`,
        `main:${lines.CALL_PA}`,
        `pa:${lines.CALL_PB}`,
        `pb:${lines.CALL_PC}`,
        `pc:${lines.SPIN}`,
      ];
      const complete = sum(
        ours.filter((sample) =>
          pythonFrames(sample, process.scriptPath).join(";") === expected.join(";") && belowEvalLoop(sample)
        ),
      );
      console.log(`${install.label}: ${complete}/${total} samples show ${expected.join(";")}`);
      assertSampleCount(total, cpu[0]!, 99, steal, install.label);
      assert.ok(complete / total >= 0.9, `${install.label}: ${complete}/${total} complete`);
    }
  }, somePython),
);

/**
 * Runs the chain script in `executable` (with `args` from the script's path), records it with
 * `record -p PID -d 3`, and checks that at least 90% of its samples, as many as its CPU time calls for,
 * show the chain's Python frames (named after the file `scriptFile` gives the code) in order above the
 * eval loop, and under `nativeRoot` when given (the C functions that run the interpreter).
 */
async function recordChainIn(
  label: string,
  executable: string,
  args: ((scriptPath: string) => string[]) | undefined,
  scriptFile: (scriptPath: string) => string,
  nativeRoot: string[] = [],
): Promise<void> {
  const script = chainScript();
  const { lines } = script;
  const dir = tempDir();
  try {
    await using process = await startPython(executable, script.source, args);
    const { samples, cpu, steal } = await record([process.pid], [{ pid: process.pid }], { seconds: 3 }, dir);
    const ours = samples.filter((sample) => sample.pid === process.pid);
    const expected = [
      `<module>:${lines.CALL_MAIN}`,
      `main:${lines.CALL_PA}`,
      `pa:${lines.CALL_PB}`,
      `pb:${lines.CALL_PC}`,
      `pc:${lines.SPIN}`,
    ];
    const file = scriptFile(process.scriptPath);
    const underRoot = (sample: Sample) => {
      const firstPython = sample.frames.findIndex((frame) => frame.kind === "python");
      const names = sample.frames.slice(0, firstPython).map((frame) => frame.name);
      let at = 0;
      for (const name of nativeRoot) {
        at = names.indexOf(name, at) + 1;
        if (at === 0) return false;
      }
      return true;
    };
    const total = sum(ours);
    const complete = sum(
      ours.filter((sample) =>
        pythonFrames(sample, file).join(";") === expected.join(";") && belowEvalLoop(sample) &&
        underRoot(sample)
      ),
    );
    const root = nativeRoot.length > 0 ? `${nativeRoot.join(";")};...;` : "";
    console.log(`${label}: ${complete}/${total} samples show ${root}${expected.join(";")}`);
    assertSampleCount(total, cpu[0]!, 99, steal, label);
    assert.ok(complete / total >= 0.9, `${label}: ${complete}/${total} complete`);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

Deno.test(tracingTest(
  "record -p -d 3: python3 copied under another name shows main;pa;pb;pc",
  async () => {
    const dir = tempDir();
    try {
      // The real file, not the python3 link: a copy named like no Python, so only its content tells.
      const copy = `${dir}/not-a-snake`;
      Deno.copyFileSync(Deno.realPathSync(SYSTEM_PYTHON), copy);
      Deno.chmodSync(copy, 0o755);
      await recordChainIn("not-a-snake", copy, undefined, (scriptPath) => scriptPath);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
  systemPython(),
));

const staticLibpython = systemStaticLibpython();
for (const link of ["shared", "static"] as LibpythonLink[]) {
  const hasStatic = link === "static"
    ? [bootstrapped(typeof staticLibpython === "string" ? staticLibpython : null)]
    : [];
  Deno.test(tracingTest(
    `record -p -d 3: a C program that embeds the ${link} libpython shows main;run_script, then main;pa;pb;pc`,
    async () => {
      const dir = tempDir();
      try {
        const program = buildAgainstSystemPython("embed", link, dir);
        // PyRun_SimpleString compiles the script as "<string>".
        await recordChainIn(`embed (${link})`, program, (scriptPath) => [scriptPath], () => "<string>", [
          "main",
          "run_script",
        ]);
      } finally {
        Deno.removeSync(dir, { recursive: true });
      }
    },
    systemPython(),
    systemPythonDev(),
    programs("gcc"),
    ...hasStatic,
  ));
}

/** The thread ids the two-thread script printed ("A <ident> <tid>", "B ..."), A first. */
function spinningThreads(process: PythonProcess): number[] {
  const tids = new Map<string, number>();
  for (const line of process.output) {
    const match = /^([AB]) \d+ (\d+)$/.exec(line);
    if (match) tids.set(match[1]!, Number(match[2]));
  }
  assert.ok(tids.has("A") && tids.has("B"), `both threads named: ${process.output.join(" | ")}`);
  return [tids.get("A")!, tids.get("B")!];
}

Deno.test(tracingTest("record: two Python threads are each attributed to their own function", async () => {
  const script = twoThreadScript();
  const threads = (process: PythonProcess) =>
    spinningThreads(process).map((tid) => ({ pid: process.pid, tid }));
  for (const { install, process, samples, cpu, steal } of await recordEveryPython(script, 1, threads)) {
    const [a, b] = spinningThreads(process);
    const tids = new Map([["A", a!], ["B", b!]]);
    for (const [i, [thread, spin]] of ([["A", "spin_a"], ["B", "spin_b"]] as const).entries()) {
      const ours = samples.filter((sample) => sample.pid === process.pid && sample.tid === tids.get(thread));
      const total = sum(ours);
      const right = sum(ours.filter((sample) => {
        const frames = pythonFrames(sample, process.scriptPath);
        return frames.length > 0 && frames[frames.length - 1]!.split(":")[0]!.endsWith(spin);
      }));
      const wrong = sum(
        samples.filter((sample) =>
          sample.pid === process.pid && sample.tid !== tids.get(thread) &&
          pythonFrames(sample, process.scriptPath).some((frame) => frame.split(":")[0]!.endsWith(spin))
        ),
      );
      console.log(`${install.label} thread ${thread}: ${right}/${total} in ${spin}, ${wrong} elsewhere`);
      assertSampleCount(total, cpu[i]!, 99, steal, `${install.label} thread ${thread}`);
      assert.ok(right / total >= 0.9, `${install.label} thread ${thread}: ${right}/${total} in ${spin}`);
      assert.equal(wrong, 0, `${install.label}: no other thread is named ${spin}`);
    }
  }
}, somePython));

/** Python calls libc's qsort through ctypes; qsort calls back into a Python comparator that burns CPU. */
function qsortScript(): TestScript {
  return withMarkers(`import ctypes
import ctypes.util

libc = ctypes.CDLL(ctypes.util.find_library("c"))
CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))


def compare(a, b):  # @DEF_COMPARE
    x = a[0]
    y = b[0]
    n = 0
    for i in range(3000): n += i  # @BURN
    return (x > y) - (x < y)


def sort_forever():
    values = (ctypes.c_int * 512)()
    callback = CMP(compare)
    print("ready", flush=True)
    while True:
        for i in range(512): values[i] = 512 - i
        libc.qsort(values, 512, ctypes.sizeof(ctypes.c_int), callback)  # @CALL_QSORT


sort_forever()
`);
}

Deno.test(tracingTest("record: Python -> ctypes -> qsort -> Python comparator, in order", async () => {
  const script = qsortScript();
  for (const { install, process, samples: ours, cpu, steal } of await recordEveryPython(script, 1.5)) {
    const total = sum(ours);
    const inOrder = sum(ours.filter((sample) => {
      const names = sample.frames.map((frame) =>
        frame.kind === "python" && frame.file === process.scriptPath
          ? `py:${frame.name}:${frame.line}`
          : frame.name
      );
      const caller = names.indexOf(`py:sort_forever:${script.lines.CALL_QSORT}`);
      const qsort = names.findIndex((name, i) => i > caller && /qsort/.test(name));
      const callback = names.findIndex((name, i) => i > qsort && name === `py:compare:${script.lines.BURN}`);
      return caller >= 0 && qsort > caller && callback > qsort;
    }));
    console.log(`${install.label}: ${inOrder}/${total} samples show sort_forever;...;qsort;...;compare`);
    assertSampleCount(total, cpu[0]!, 99, steal, install.label);
    assert.ok(inOrder / total >= 0.8, `${install.label}: ${inOrder}/${total} in order`);
  }
}, somePython));

Deno.test(
  tracingTest(
    "record: Python processes killed and started mid-recording lose nothing of others",
    async () => {
      const chain = await buildWorkload("chain", ["-O2", "-fno-omit-frame-pointer"], "-fp");
      const dir = tempDir();
      const python = installs.found[0]!.executable;
      const scriptPath = `${dir}/chain.py`;
      const script = chainScript();
      Deno.writeTextFileSync(scriptPath, script.source);
      // The command's tree: a native workload of 5 CPU s; a Python process killed after 1.5 s; another
      // started at 2.5 s, after the recording began, and stopped (its CPU time read) once the native one
      // is done.
      const shell = [
        `"${chain}" 5 > "${dir}/chain.out" &`,
        `"${python}" "${scriptPath}" > /dev/null & killed=$!`,
        `sleep 1.5; kill -9 $killed`,
        `sleep 1; "${python}" "${scriptPath}" > /dev/null & late=$!`,
        `echo $late > "${dir}/late.pid"`,
        // Shell built-ins only: a process that exits before the recorder has read it is reported.
        `wait %1; kill -STOP $late`,
        `while read -r stat < /proc/$late/stat; [[ $stat != *") T "* ]]; do :; done`,
        `printf '%s\\n' "$stat" > "${dir}/late.stat"; kill -9 $late; wait`,
      ].join("\n");
      // Enough samples of the native workload that a loss of a tenth shows (sample_bounds.ts).
      const hz = 499;
      try {
        const output = `${dir}/mixed.pb.gz`;
        const steal = new StealMeter();
        const result = await runCli([
          "record",
          "-F",
          String(hz),
          "-o",
          output,
          "--stats",
          `${dir}/stats.json`,
          "--",
          "bash",
          "-c",
          shell,
        ]);
        assert.equal(result.code, 0, result.stderr);
        assert.doesNotMatch(
          result.stderr,
          /error|warn/i,
          `no process's exit or start is a problem:\n${result.stderr}`,
        );
        const samples = samplesOf(decodePprof(Deno.readFileSync(output)));
        const late = Number(Deno.readTextFileSync(`${dir}/late.pid`).trim());
        const latePython = samples.filter((sample) => sample.pid === late);
        const lateComplete = sum(
          latePython.filter((sample) =>
            pythonFrames(sample, scriptPath).join(";").endsWith(
              `pb:${script.lines.CALL_PC};pc:${script.lines.SPIN}`,
            )
          ),
        );
        // chain prints the CPU seconds it used: every one of its samples must be there.
        const cpuSeconds = reportedCpuSeconds(Deno.readTextFileSync(`${dir}/chain.out`));
        const chainSamples = sum(
          samples.filter((sample) => sample.frames.some((frame) => frame.name === "c")),
        );
        // The late Python was sampled from its start to its stop, when its CPU time was read.
        const lateCpu = parsePidStatCpu(Deno.readTextFileSync(`${dir}/late.stat`));
        console.log(`started mid-recording: ${lateComplete}/${sum(latePython)} with Python frames`);
        const stats = JSON.parse(Deno.readTextFileSync(`${dir}/stats.json`));
        console.log(
          "counters:",
          JSON.stringify(
            Object.fromEntries(Object.entries(stats.bpf).filter(([key]) => key.startsWith("Python"))),
          ),
          JSON.stringify(stats.processes),
        );
        const stolen = steal.fraction();
        assertSampleCount(sum(latePython), { low: lateCpu, high: lateCpu + 0.02 }, hz, stolen, "late Python");
        assert.ok(lateComplete / sum(latePython) >= 0.9, `late: ${lateComplete}/${sum(latePython)}`);
        assertSampleCount(chainSamples, cpuSeconds, hz, stolen, "native workload beside them");
      } finally {
        Deno.removeSync(dir, { recursive: true });
      }
    },
    somePython,
  ),
);
