// JIT frames from a jitdump end to end: `record -- deno run --v8-flags=--perf-prof ...` runs a JavaScript
// workload whose machine code V8 describes in jit-PID.dump (in the working directory, found through its
// mappings), and the samples in that code must name its JavaScript functions with the script and a line
// of the function, the chain of calls in order. What is JIT code is told by the workload's own
// /proc/self/maps, the functions' lines by the test's reading of the script. Deno runs it: its V8 has no
// introspection data, so its JIT code is named from what V8 writes (Node's V8 is unwound by the V8 runtime
// instead, tests/v8_record_test.ts). Needs root and BTF.
import assert from "node:assert/strict";
import { decodePprof } from "../lib/output/pprof_reader.ts";
import type { Profile } from "../lib/profile/profile.ts";
import { hasChain, REPO_ROOT, runCli, tempDir, tracingTest } from "./helpers.ts";
import { assertSampleCount, reportedCpuSeconds, StealMeter } from "./sample_bounds.ts";

const WORKLOAD = `${REPO_ROOT}tests/workloads/jitdump_lines.mjs`;
/** How V8 names the script of a module: its file URL. */
const WORKLOAD_URL = new URL(`file://${WORKLOAD}`).href;
const CHAIN = ["lineOuter", "lineMiddle", "lineLeaf"];
/**
 * `--perf-prof` writes the jitdump; interpreted functions get a copy of the interpreter's entry in
 * anonymous memory, named there too; without inlining each function keeps its own code (and frame).
 */
const V8_FLAGS = [
  "--perf-prof",
  "--interpreted-frames-native-stack",
  "--no-turbo-inlining",
  "--no-maglev-inlining",
];
const HZ = 199;
/** The tag V8 gives JavaScript code: `JS:` since V8 11 (Node 20), `LazyCompile:` and others before. */
const JS_TAG = /^(?:JS|LazyCompile|Function|InterpretedFunction|Script|Eval):/;

/**
 * The function of a V8 code name (`JS:*name /file.js:1:2`; `~` interpreted, `^` baseline, `+` Maglev, `*`
 * TurboFan; V8 13 puts `o` before the tier of on-stack-replaced code and `'` after it for code specialised
 * to its context).
 */
function jsFunction(name: string): string | null {
  const tag = JS_TAG.exec(name);
  if (tag === null) return null;
  return /^o?[~^*+-]?'?(\S*)/.exec(name.slice(tag[0].length))?.[1] ?? null;
}

/** The lines of the loop of `function lineLeaf(`, where its time goes: from its `for (` to its `  }`. */
function leafLoopLines(source: string): [number, number] {
  const lines = source.split("\n");
  const leaf = lines.indexOf("function lineLeaf(n) {");
  const start = lines.findIndex((line, i) => i > leaf && line.startsWith("  for ("));
  const end = lines.findIndex((line, i) => i > start && line === "  }");
  assert.ok(leaf >= 0 && start > leaf && end > start, "the workload's lineLeaf has its loop");
  return [start + 1, end + 1];
}

/** The lines of each `function NAME(` of the script, from its line to the `}` that closes it at column 0. */
function functionLines(source: string): Map<string, [number, number]> {
  const lines = source.split("\n");
  const ranges = new Map<string, [number, number]>();
  for (let i = 0; i < lines.length; i++) {
    const match = /^function (\w+)\(/.exec(lines[i]!);
    if (match === null) continue;
    const end = lines.findIndex((line, j) => j > i && line === "}");
    ranges.set(match[1]!, [i + 1, end + 1]);
  }
  return ranges;
}

/** The anonymous executable mappings in the text of a maps file, as [start, end) pairs. */
function anonymousCode(maps: string): [number, number][] {
  const ranges: [number, number][] = [];
  for (const line of maps.split("\n")) {
    const [range, perms, , , inode, path = ""] = line.trim().split(/\s+/);
    if (range === undefined || !perms?.includes("x") || inode !== "0") continue;
    if (path !== "" && !path.startsWith("[anon")) continue;
    const [start, end] = range.split("-").map((hex) => parseInt(hex, 16));
    ranges.push([start!, end!]);
  }
  return ranges;
}

interface Frame {
  name: string;
  file: string;
  line: number;
  address: number;
  mapping: string;
  kernel: boolean;
}

/** Each sample of `pid`, frames root first. */
function samplesOf(profile: Profile, pid: number): { frames: Frame[]; count: number }[] {
  return profile.samples.filter((sample) => sample.pid === pid).map((sample) => ({
    count: sample.count,
    frames: sample.locations.map((index) => {
      const location = profile.locations[index]!;
      return {
        name: location.functionName,
        file: location.sourceFile,
        line: location.line,
        address: location.address,
        mapping: profile.mappings[location.mapping]?.fileName ?? "",
        kernel: location.kind === "kernel",
      };
    }).reverse(),
  }));
}

/** How V8 runs: with its jitdump only, or a perf map beside it (the jitdump is asked first). */
const VARIANTS = [
  { label: "--perf-prof", flags: V8_FLAGS },
  { label: "--perf-prof --perf-basic-prof", flags: [...V8_FLAGS, "--perf-basic-prof"] },
];

Deno.test(tracingTest(
  "record -- deno --v8-flags=--perf-prof: JIT frames are named from the jitdump, with the script and line",
  async () => {
    const dir = tempDir();
    const pids: number[] = [];
    try {
      const output = `${dir}/jit.pb.gz`;
      const steal = new StealMeter();
      // Each writes its dump in its working directory: a folder of the test's.
      const shell = VARIANTS.map((variant, i) => {
        Deno.mkdirSync(`${dir}/${i}`);
        const deno = `"${Deno.execPath()}" run -A --v8-flags=${variant.flags.join(",")}`;
        return `(cd "${dir}/${i}" && DENO_NO_UPDATE_CHECK=1 exec ${deno} "${WORKLOAD}" 3 maps > out) &`;
      }).join("\n") + "\nwait";
      const result = await runCli(
        ["record", "-F", String(HZ), "-o", output, "--stats", `${dir}/stats`, "--", "bash", "-c", shell],
      );
      assert.equal(result.code, 0, result.stderr);
      assert.doesNotMatch(result.stderr, /error|warn/i, `the recording logs no problem:\n${result.stderr}`);
      const profile = decodePprof(Deno.readFileSync(output));
      const source = Deno.readTextFileSync(WORKLOAD);
      const lines = functionLines(source);
      const [loopStart, loopEnd] = leafLoopLines(source);
      const stolen = steal.fraction();
      let framesInDump = 0;
      let framesInMap = 0;
      for (const [i, variant] of VARIANTS.entries()) {
        const folder = `${dir}/${i}`;
        const dumps = [...Deno.readDirSync(folder)].map((entry) => entry.name)
          .filter((name) => /^jit-\d+\.dump$/.test(name));
        assert.equal(dumps.length, 1, `${variant.label}: V8 wrote one jitdump: ${dumps.join(", ")}`);
        const pid = Number(/\d+/.exec(dumps[0]!)![0]);
        pids.push(pid);
        const code = anonymousCode(Deno.readTextFileSync(`${folder}/maps`));
        const cpuSeconds = reportedCpuSeconds(Deno.readTextFileSync(`${folder}/out`));
        const samples = samplesOf(profile, pid);
        const total = samples.reduce((sum, sample) => sum + sample.count, 0);
        assertSampleCount(total, cpuSeconds, HZ, stolen, variant.label);

        let inJit = 0;
        let named = 0;
        let withLine = 0;
        let inLeaf = 0;
        let inLoop = 0;
        let chained = 0;
        const leafLines = new Set<number>();
        for (const { frames, count } of samples) {
          framesInDump += count * frames.filter((frame) => frame.mapping === "[jitdump]").length;
          framesInMap += count * frames.filter((frame) => frame.mapping === "[perf-map]").length;
          const leaf = frames.findLast((frame) => !frame.kernel);
          // JIT code: an address in anonymous executable memory, as the workload's own maps say.
          if (leaf === undefined || !code.some(([from, to]) => leaf.address >= from && leaf.address < to)) {
            continue;
          }
          inJit += count;
          const fn = jsFunction(leaf.name);
          if (fn === null || !leaf.name.includes(WORKLOAD)) continue;
          named += count;
          // The top level (an unnamed function) spans the whole script.
          const [first, last] = lines.get(fn) ?? (fn === "" ? [1, Infinity] : [0, -1]);
          if (leaf.file === WORKLOAD_URL && leaf.line >= first && leaf.line <= last) withLine += count;
          if (fn !== "lineLeaf") continue;
          inLeaf += count;
          leafLines.add(leaf.line);
          if (leaf.file === WORKLOAD_URL && leaf.line >= loopStart && leaf.line <= loopEnd) inLoop += count;
          const functions = frames.map((frame) => jsFunction(frame.name)).filter((name) => name !== null);
          if (hasChain(functions, CHAIN)) chained += count;
        }
        const percent = (part: number, whole: number) =>
          `${part}/${whole} (${(100 * part / whole).toFixed(1)}%)`;
        console.log(
          `${variant.label}: ${total} samples; ${percent(inJit, total)} in JIT code, of which ` +
            `${percent(named, inJit)} name a function of the workload and ${percent(withLine, inJit)} ` +
            `its script and a line in it; in lineLeaf ${percent(inLoop, inLeaf)} at lines of its loop ` +
            `(lines ${[...leafLines].sort((a, b) => a - b).join(",")}), ${percent(chained, inLeaf)} ` +
            `show ${CHAIN.join(";")}`,
        );
        // The workload spends its time in lineLeaf, machine code V8 generated.
        assert.ok(inJit >= total / 2, `${variant.label}: ${inJit}/${total} samples in JIT code`);
        assert.ok(inLeaf >= inJit / 2, `${variant.label}: ${inLeaf}/${inJit} JIT samples in lineLeaf`);
        assert.ok(named >= 0.9 * inJit, `${variant.label}: ${named}/${inJit} JIT samples named`);
        assert.ok(chained >= 0.9 * inLeaf, `${variant.label}: ${chained}/${inLeaf} show the chain`);
        assert.ok(
          withLine >= 0.9 * inJit,
          `${variant.label}: ${withLine}/${inJit} with the script and a line`,
        );
        // Lines of instructions, not the line the function starts on: the loop's statements.
        assert.ok(
          inLoop >= 0.9 * inLeaf,
          `${variant.label}: ${inLoop}/${inLeaf} lineLeaf samples in its loop`,
        );
        assert.ok(leafLines.size >= 2, `${variant.label}: lineLeaf's samples at several lines`);
      }

      const stats = JSON.parse(Deno.readTextFileSync(`${dir}/stats`)).perfMaps;
      console.log("--stats perfMaps:", JSON.stringify(stats));
      assert.equal(stats.jitdumps.read, 2, JSON.stringify(stats));
      assert.equal(stats.jitdumps.rejected, 0);
      assert.deepEqual(stats.jitdumps.refused, { "not-regular": 0, owner: 0, denied: 0, failed: 0 });
      assert.ok(stats.jitdumps.lineEntries > 0);
      assert.equal(stats.mapsRead, 1, "the second process's perf map was read too");
      assert.ok(framesInDump > 0);
      assert.equal(framesInMap, stats.framesNamed - stats.framesNamedFromJitdumps);
      assert.equal(
        stats.framesNamedFromJitdumps,
        framesInDump,
        "--stats counts the frames named from jitdumps",
      );
    } finally {
      for (const pid of pids) {
        try {
          Deno.removeSync(`/tmp/perf-${pid}.map`);
        } catch {
          // not written
        }
      }
      Deno.removeSync(dir, { recursive: true });
    }
  },
));
