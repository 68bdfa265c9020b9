// JIT frames end to end: a V8 program run with --perf-basic-prof names the machine code V8 generates in
// /tmp/perf-PID.map, and `record -p PID` must name the samples in that code with its JavaScript functions,
// the chain of calls in order. Each expectation is checked against what the test reads itself: the
// process's anonymous executable memory from /proc/PID/maps, the names from the map. Deno runs it: its V8
// has no introspection data, so its JIT code is named from the map (Node's V8 is unwound by the V8 runtime
// instead, tests/v8_record_test.ts). Needs root and BTF.
import assert from "node:assert/strict";
import { decodePprof } from "../lib/output/pprof_reader.ts";
import type { Profile } from "../lib/profile/profile.ts";
import {
  hasChain,
  type ReadyProcess,
  REPO_ROOT,
  runCli,
  startReadyProcess,
  tempDir,
  tracingTest,
} from "./helpers.ts";
import { cpuBetween, recordWatchingCpu } from "./recording_window.ts";
import { assertSampleCount } from "./sample_bounds.ts";

const WORKLOAD = `${REPO_ROOT}tests/workloads/perf_map_chain.js`;
const CHAIN = ["chainAlpha", "chainBravo", "chainCharlie", "chainLeaf"];
/**
 * V8 inlines small functions into their callers, which leaves one piece of code (and one frame) for the
 * whole chain: without inlining each function keeps its own.
 */
const BASE_FLAGS = ["--perf-basic-prof", "--no-turbo-inlining", "--no-maglev-inlining"];
/** Interpreted functions get a copy of the interpreter's entry in anonymous memory, named in the map. */
const INTERPRETED_FLAG = "--interpreted-frames-native-stack";

/** What `record` tells of a Deno process started without the perf flags: the flags, as Deno takes them. */
const ADVICE = "--v8-flags=--perf-basic-prof,--interpreted-frames-native-stack";

/** Starts the workload under Deno with V8 `flags` in `cwd` (V8 writes a log there). */
function startDeno(flags: string[], cwd: string): Promise<ReadyProcess> {
  return startReadyProcess(Deno.execPath(), ["run", "-A", `--v8-flags=${flags.join(",")}`, WORKLOAD, "600"], {
    cwd,
    env: { DENO_NO_UPDATE_CHECK: "1" },
  });
}

/** Stops the Deno processes `started`, removes the perf maps V8 wrote for them, and `dir`. */
async function stopAndClean(started: readonly ReadyProcess[], dir: string): Promise<void> {
  for (const process of started) {
    await process.stop();
    try {
      Deno.removeSync(`/tmp/perf-${process.pid}.map`);
    } catch {
      // not written
    }
  }
  Deno.removeSync(dir, { recursive: true });
}

/** The anonymous executable mappings of process `pid`, as [start, end) pairs. */
function anonymousCode(pid: number): [number, number][] {
  const ranges: [number, number][] = [];
  for (const line of Deno.readTextFileSync(`/proc/${pid}/maps`).split("\n")) {
    const [range, perms, , , inode, path = ""] = line.trim().split(/\s+/);
    if (range === undefined || !perms?.includes("x") || inode !== "0") continue;
    if (path !== "" && !path.startsWith("[anon")) continue;
    const [start, end] = range.split("-").map((hex) => parseInt(hex, 16));
    ranges.push([start!, end!]);
  }
  return ranges;
}

/** A lookup in the map as the test reads it: the last entry covering the address. */
function ownPerfMap(pid: number): (address: number) => string | null {
  const entries = Deno.readTextFileSync(`/tmp/perf-${pid}.map`).split("\n").flatMap((line) => {
    const match = /^([0-9a-f]+) ([0-9a-f]+) (.+)$/.exec(line);
    return match ? [{ start: parseInt(match[1]!, 16), size: parseInt(match[2]!, 16), name: match[3]! }] : [];
  });
  return (address) => {
    for (let i = entries.length - 1; i >= 0; i--) {
      const { start, size, name } = entries[i]!;
      if (address >= start && address < start + size) return name;
    }
    return null;
  };
}

/** A sample's frames root first: name, address and its mapping's file name. */
interface Frame {
  name: string;
  address: number;
  mapping: string;
  kernel: boolean;
}

function samplesOf(profile: Profile, pid: number): { frames: Frame[]; count: number }[] {
  return profile.samples.filter((sample) => sample.pid === pid).map((sample) => ({
    count: sample.count,
    frames: sample.locations.map((index) => {
      const location = profile.locations[index]!;
      return {
        name: location.functionName,
        address: location.address,
        mapping: profile.mappings[location.mapping]?.fileName ?? "",
        kernel: location.kind === "kernel",
      };
    }).reverse(),
  }));
}

/**
 * The tag V8 gives JavaScript code in a perf map: `JS:` since V8 11 (Node 20), `LazyCompile:`, `Function:`,
 * `InterpretedFunction:`, `Script:` or `Eval:` before (Node 18, Debian 12's).
 */
const JS_TAG = /^(?:JS|LazyCompile|Function|InterpretedFunction|Script|Eval):/;

/**
 * The function of a V8 map name (`JS:*name /file.js:1:2`; `~` interpreted, `^` baseline, `+` Maglev, `*`
 * TurboFan; V8 13 puts `o` before the tier of on-stack-replaced code and `'` after it for code specialised
 * to its context).
 */
function jsFunction(name: string): string | null {
  const tag = JS_TAG.exec(name);
  if (tag === null) return null;
  return /^o?[~^*+-]?'?(\S*)/.exec(name.slice(tag[0].length))?.[1] ?? null;
}

Deno.test(tracingTest(
  "record -p: a deno --perf-basic-prof program's JIT code is named from its perf map, the chain in order",
  async () => {
    const dir = tempDir();
    const variants = [
      { label: "--perf-basic-prof", flags: BASE_FLAGS },
      { label: `--perf-basic-prof ${INTERPRETED_FLAG}`, flags: [...BASE_FLAGS, INTERPRETED_FLAG] },
    ];
    const started: ReadyProcess[] = [];
    try {
      for (const variant of variants) started.push(await startDeno(variant.flags, dir));
      const output = `${dir}/jit.pb.gz`;
      const pids = started.map((process) => process.pid);
      // Until each has had 1.5 s of CPU (-d 60 at most): a busy machine makes the recording longer, not
      // poorer in samples.
      const args = ["record", ...pids.flatMap((pid) => ["-p", String(pid)]), "-d", "60", "-o", output];
      const { result, start, end, steal } = await recordWatchingCpu(
        [...args, "--stats", `${dir}/stats`],
        pids.map((pid) => ({ pid })),
        { interruptAfterCpuSeconds: 1.5 },
      );
      assert.equal(result.code, 0, result.stderr);
      assert.doesNotMatch(result.stderr, /error|warn/i, `the recording logs no problem:\n${result.stderr}`);
      assert.ok(!result.stderr.includes(ADVICE), `no advice to processes with the flags:\n${result.stderr}`);
      const profile = decodePprof(Deno.readFileSync(output));
      let framesInMap = 0;
      for (const [i, variant] of variants.entries()) {
        const pid = pids[i]!;
        const code = anonymousCode(pid);
        const lookup = ownPerfMap(pid);
        const samples = samplesOf(profile, pid);
        const total = samples.reduce((sum, sample) => sum + sample.count, 0);
        assert.ok(end[i], `${pid} ran throughout the recording`);
        assertSampleCount(total, cpuBetween(start[i]!, end[i]), 99, steal, variant.label);

        let inJit = 0;
        let named = 0;
        let inLeaf = 0;
        let chained = 0;
        let toTopLevel = 0;
        for (const { frames, count } of samples) {
          framesInMap += count * frames.filter((frame) => frame.mapping === "[perf-map]").length;
          const leaf = frames.findLast((frame) => !frame.kernel);
          // JIT code: an address in anonymous executable memory, not an address in a file.
          if (
            leaf === undefined || leaf.mapping.startsWith("/") ||
            !code.some(([from, to]) => leaf.address >= from && leaf.address < to)
          ) continue;
          inJit += count;
          const expected = lookup(leaf.address);
          if (expected !== null && JS_TAG.test(expected) && leaf.name === expected) named += count;
          if (jsFunction(leaf.name) !== "chainLeaf") continue;
          inLeaf += count;
          const functions = frames.map((frame) => jsFunction(frame.name)).filter((name) => name !== null);
          if (hasChain(functions, CHAIN)) chained += count;
          // The script's top level: a function without a name that V8 places at the script's start.
          if (frames.some((frame) => frame.name.endsWith(`${WORKLOAD}:1:1`))) toTopLevel += count;
        }
        const percent = (part: number, whole: number) =>
          `${part}/${whole} (${(100 * part / whole).toFixed(1)}%)`;
        console.log(
          `${variant.label}: ${total} samples; ${percent(inJit, total)} in JIT code, of which ` +
            `${percent(named, inJit)} named as the map names them; ${
              percent(chained, inLeaf)
            } in chainLeaf ` +
            `show ${CHAIN.join(";")}; ${percent(toTopLevel, inLeaf)} reach the script's top level`,
        );
        // The workload spends its time in chainLeaf, machine code V8 generated.
        assert.ok(inJit >= total / 2, `${variant.label}: ${inJit}/${total} samples in JIT code`);
        assert.ok(inLeaf >= inJit / 2, `${variant.label}: ${inLeaf}/${inJit} JIT samples in chainLeaf`);
        assert.ok(named >= 0.9 * inJit, `${variant.label}: ${named}/${inJit} JIT samples named`);
        assert.ok(chained >= 0.9 * inLeaf, `${variant.label}: ${chained}/${inLeaf} show the chain`);
        if (variant.flags.includes(INTERPRETED_FLAG)) {
          // Interpreted callers have frames in named memory too: stacks go on to the script's top level.
          assert.ok(
            toTopLevel >= 0.9 * inLeaf,
            `${variant.label}: ${toTopLevel}/${inLeaf} reach the top level`,
          );
        }
      }
      const stats = JSON.parse(Deno.readTextFileSync(`${dir}/stats`)).perfMaps;
      assert.equal(stats.mapsRead, 2, JSON.stringify(stats));
      assert.deepEqual(stats.mapsRefused, { "not-regular": 0, owner: 0, denied: 0, failed: 0 });
      assert.equal(stats.framesNamed, framesInMap, "--stats counts the frames the profile names from maps");
    } finally {
      await stopAndClean(started, dir);
    }
  },
));

Deno.test(tracingTest(
  "record -p: a Deno process started without the perf flags is told of once, with the flags to add",
  async () => {
    const dir = tempDir();
    const env = { DENO_NO_UPDATE_CHECK: "1" };
    const plain = () => startReadyProcess(Deno.execPath(), ["run", "-A", WORKLOAD, "600"], { cwd: dir, env });
    const started: ReadyProcess[] = [];
    try {
      started.push(await plain(), await plain());
      // Deno reads V8 flags from its environment too; the map it then writes is in /tmp, like the above.
      started.push(
        await startReadyProcess(Deno.execPath(), ["run", "-A", WORKLOAD, "600"], {
          cwd: dir,
          env: { ...env, DENO_V8_FLAGS: "--perf-basic-prof" },
        }),
      );
      const [first, second, flagged] = started.map((process) => process.pid);
      const output = `${dir}/plain.pb.gz`;
      const both = await runCli([
        "record",
        "-p",
        String(first),
        "-p",
        String(second),
        "-d",
        "1",
        "-o",
        output,
      ]);
      assert.equal(both.code, 0, both.stderr);
      const told = both.stderr.split("\n").filter((line) => line.includes(ADVICE));
      assert.equal(told.length, 1, `said once for the two processes of one file:\n${both.stderr}`);
      assert.match(
        told[0]!,
        new RegExp(`PID (${first}|${second}) runs V8 ${Deno.version.v8.replaceAll(".", "\\.")} `),
      );
      assert.ok(told[0]!.includes(Deno.realPathSync(Deno.execPath())), told[0]);
      assert.doesNotMatch(both.stderr, /error|warn/i, `advice is no problem:\n${both.stderr}`);

      const alone = await runCli(["record", "-p", String(flagged), "-d", "1", "-o", output]);
      assert.equal(alone.code, 0, alone.stderr);
      assert.ok(!alone.stderr.includes(ADVICE), `DENO_V8_FLAGS has the flag:\n${alone.stderr}`);
    } finally {
      await stopAndClean(started, dir);
    }
  },
));
