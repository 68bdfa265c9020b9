// JavaScript frames end to end, without flags: a `node` process is recorded with -p, and the profile must
// show its chain of JavaScript functions in order, with the script and the line of each call, whatever tier
// V8 runs each function in (TurboFan inlines some into their callers: they must still show, as inlined
// calls). The lines are those the workload marks (`// @line NAME`), read by the test from the file; which
// functions TurboFan inlined, node says itself (--trace-turbo-inlining only prints: the code is the same).
// Needs root, BTF and node.
import assert from "node:assert/strict";
import { decodePprof } from "../lib/output/pprof_reader.ts";
import type { Profile } from "../lib/profile/profile.ts";
import { programs } from "../lib/testing/requirements.ts";
import { hasChain, REPO_ROOT, startReadyProcess, tempDir, testNodes, tracingTest } from "./helpers.ts";
import { cpuBetween, recordWatchingCpu } from "./recording_window.ts";
import { assertSampleCount } from "./sample_bounds.ts";

const WORKLOAD = Deno.realPathSync(`${REPO_ROOT}tests/workloads/v8_chain.js`);
const CHAIN = ["jsOuter", "jsMiddle", "jsInner", "jsLeaf"];

/** The lines the workload marks `// @line NAME`, by name. */
function markedLines(path: string): Map<string, number> {
  const lines = new Map<string, number>();
  Deno.readTextFileSync(path).split("\n").forEach((text, i) => {
    const name = /\/\/ @line (\w+)$/.exec(text)?.[1];
    if (name !== undefined) lines.set(name, i + 1);
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

/** The samples of `pid`, frames root first. */
/** One stack of a process, frames root first, and how often it was sampled. */
interface Sample {
  frames: Frame[];
  count: number;
}

function samplesOf(profile: Profile, pid: number): Sample[] {
  return profile.samples.filter((sample) => sample.pid === pid).map((sample) => ({
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
 * `record -p PID -d 5` into `output` (pprof): the recording must log no problem, and its sample count fit
 * the CPU time node used meanwhile. Returns node's samples and their total.
 */
async function recordNode(pid: number, output: string): Promise<{ samples: Sample[]; total: number }> {
  const { result, start, end, steal } = await recordWatchingCpu(
    ["record", "-p", String(pid), "-d", "5", "-o", output],
    [{ pid }],
  );
  assert.equal(result.code, 0, result.stderr);
  assert.doesNotMatch(result.stderr, /error|warn/i, `the recording logs no problem:\n${result.stderr}`);
  assert.ok(end[0], `node ${pid} ran throughout the recording`);
  const samples = samplesOf(decodePprof(Deno.readFileSync(output)), pid);
  const total = samples.reduce((sum, sample) => sum + sample.count, 0);
  assertSampleCount(total, cpuBetween(start[0]!, end[0]), 99, steal, "node");
  return { samples, total };
}

/**
 * The tiers a function runs in: as V8 picks (TurboFan in the end), and each lower tier alone, where the
 * flags keep V8 from going further (flags Node 18's V8 10.2 knows too). From V8 13 (Node 24) Maglev runs
 * by default and its code keeps no source positions, so these run without it (--no-maglev) and Maglev
 * has a test of its own below.
 */
const TIERS = [
  { label: "as V8 picks (TurboFan, inlined calls)", flags: [], expectInlining: true },
  { label: "Sparkplug only", flags: ["--no-opt", "--always-sparkplug"], expectInlining: false },
  { label: "Ignition only", flags: ["--no-opt", "--no-sparkplug"], expectInlining: false },
];

for (const runtime of testNodes()) {
  if (runtime.v8Major !== null && runtime.v8Major >= 13) {
    Deno.test(tracingTest(
      `record -p: a plain ${runtime.label} program, Maglev on as V8 picks: its frames are named in order`,
      async () => {
        const dir = tempDir();
        const node = await startReadyProcess(runtime.program, [WORKLOAD, "600"]);
        try {
          const { samples, total } = await recordNode(node.pid, `${dir}/maglev.pb.gz`);
          // Maglev inlines the chain's middle into jsRun with no source positions to tell it by: what
          // shows is jsRun and, below it, the leaf's own code, and where TurboFan's code runs instead the
          // whole chain; never a function out of the chain's order.
          const order = ["jsRun", ...CHAIN];
          let inOrder = 0;
          for (const { frames, count } of samples) {
            const js = frames.filter((frame) => frame.kind === "v8" && frame.file === WORKLOAD);
            const ranks = js.map((frame) => order.indexOf(frame.name));
            const monotone = ranks.every((rank, i) => rank >= 0 && (i === 0 || rank > ranks[i - 1]!));
            if (monotone && ranks[0] === 0 && ranks.at(-1) === order.length - 1) inOrder += count;
          }
          console.log(`${total} samples; ${inOrder} show jsRun above jsLeaf, the chain's functions in order`);
          assert.ok(
            inOrder >= 0.9 * total,
            `${inOrder}/${total} samples show the chain's functions in order`,
          );
        } finally {
          await node.stop();
          Deno.removeSync(dir, { recursive: true });
        }
      },
      runtime.requirement,
    ));
  }
  for (const tier of TIERS) {
    Deno.test(tracingTest(
      `record -p: a plain ${runtime.label} program shows its JavaScript chain in order, with script and line: ${tier.label}`,
      async () => {
        const lines = markedLines(WORKLOAD);
        const dir = tempDir();
        const node = await startReadyProcess(runtime.program, [
          ...tier.flags,
          ...(runtime.v8Major !== null && runtime.v8Major >= 13 ? ["--no-maglev"] : []),
          "--trace-turbo-inlining",
          WORKLOAD,
          "600",
        ]);
        try {
          const output = `${dir}/node.pb.gz`;
          const { samples, total } = await recordNode(node.pid, output);

          let chained = 0;
          let withLines = 0;
          const inlinedSamples = new Map<string, number>();
          const seen = new Map<string, number>();
          for (const { frames, count } of samples) {
            const js = frames.filter((frame) => frame.kind === "v8" && frame.file === WORKLOAD);
            for (const frame of js) {
              seen.set(`${frame.name}:${frame.line}`, (seen.get(`${frame.name}:${frame.line}`) ?? 0) + count);
            }
            if (!hasChain(js.map((frame) => frame.name), CHAIN)) continue;
            chained += count;
            for (const frame of js) {
              if (frame.inlined) {
                inlinedSamples.set(frame.name, (inlinedSamples.get(frame.name) ?? 0) + count);
              }
            }
            // Each caller of the chain stands on the line of its call; the leaf anywhere in its loop.
            const at = js.findIndex((frame) => frame.name === CHAIN[0]);
            const calls = js.slice(at, at + CHAIN.length - 1);
            if (calls.every((frame) => frame.line === lines.get(frame.name))) withLines += count;
          }
          const top = [...seen.entries()].sort((a, b) => b[1] - a[1]).slice(0, 12);
          console.log(
            `${total} samples; ${chained} (${(100 * chained / total).toFixed(1)}%) show ${
              CHAIN.join(";")
            } in order, ` +
              `${withLines} with each call's line; frames seen: ${
                top.map(([k, n]) => `${k} x${n}`).join(", ")
              }`,
          );
          assert.ok(chained >= 0.9 * total, `${chained}/${total} samples show the chain`);
          assert.ok(withLines >= 0.9 * chained, `${withLines}/${chained} of them with each call's line`);
          // What TurboFan inlined, as node printed it: "Inlining ... <SharedFunctionInfo jsLeaf>} into ...".
          const inlinedByV8 = new Set(
            [...node.output().matchAll(/^Inlining \S+ \{\S+ <SharedFunctionInfo (\w+)>\} into/gm)].map((m) =>
              m[1]!
            ),
          );
          console.log(
            `TurboFan inlined ${[...inlinedByV8].join(", ") || "nothing"}; samples with each shown inlined: ${
              [...inlinedSamples].map(([name, n]) => `${name} ${n}`).join(", ") || "none"
            }`,
          );
          for (const name of CHAIN) {
            const shown = inlinedSamples.get(name) ?? 0;
            if (inlinedByV8.has(name)) {
              assert.ok(shown >= chained / 2, `${name} inlined in ${shown}/${chained}`);
            } else assert.equal(shown, 0, `${name} is never inlined, yet ${shown} samples show it so`);
          }
          assert.equal(
            inlinedByV8.has("jsLeaf"),
            tier.expectInlining,
            "TurboFan inlined the chain's leaf where the workload is meant to make it, and only there",
          );
        } finally {
          await node.stop();
          Deno.removeSync(dir, { recursive: true });
        }
      },
      runtime.requirement,
    ));
  }

  Deno.test(tracingTest(
    `record -p: JavaScript -> a Node-API addon's C -> JavaScript shows all three in order (${runtime.label})`,
    async () => {
      const dir = tempDir();
      const addon = `${dir}/napi_addon.node`;
      const build = new Deno.Command("gcc", {
        args: ["-shared", "-fPIC", "-O1", "-o", addon, `${REPO_ROOT}tests/workloads/napi_addon.c`],
        stderr: "piped",
      }).outputSync();
      assert.ok(build.success, new TextDecoder().decode(build.stderr));
      const node = await startReadyProcess(runtime.program, [
        `${REPO_ROOT}tests/workloads/napi_chain.js`,
        addon,
        "600",
      ]);
      try {
        const output = `${dir}/napi.pb.gz`;
        const { samples, total } = await recordNode(node.pid, output);
        let inCallback = 0;
        let inOrder = 0;
        for (const { frames, count } of samples) {
          const callback = frames.findIndex((frame) => frame.kind === "v8" && frame.name === "jsCallback");
          if (callback < 0) continue;
          inCallback += count;
          const c = frames.findIndex((frame) => frame.kind === "native" && frame.name === "addon_call_back");
          const caller = frames.findIndex((frame) => frame.kind === "v8" && frame.name === "jsCaller");
          if (caller >= 0 && caller < c && c < callback) inOrder += count;
        }
        console.log(
          `${total} samples, ${inCallback} in jsCallback, of which ${inOrder} show jsCaller, then ` +
            `addon_call_back, then jsCallback`,
        );
        assert.ok(inCallback >= total / 2, `${inCallback}/${total} samples in jsCallback`);
        assert.ok(inOrder >= 0.9 * inCallback, `${inOrder}/${inCallback} show the three in order`);
      } finally {
        await node.stop();
        Deno.removeSync(dir, { recursive: true });
      }
    },
    runtime.requirement,
    programs("gcc"),
  ));
}
