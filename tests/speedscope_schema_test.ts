/**
 * Validates omniprof's speedscope output against the file-format JSON schema that speedscope publishes
 * in its npm package (dist/release/file-format-schema.json, loaded at test time from node_modules), with
 * Ajv, on a synthetic profile with every frame kind and on a real recording of the chain workload. The
 * schema leaves some rules to the reader (frame indices in range, one weight per sample), which are
 * checked here as well.
 */

import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { Ajv } from "ajv";
import type { FrameKind, Profile } from "../lib/profile/profile.ts";
import { formatSpeedscope, type SpeedscopeFile } from "../lib/output/speedscope.ts";
import { buildWorkload, runCli, tempDir, tracingTest } from "./helpers.ts";
import { bootstrapped, requiring } from "../lib/testing/requirements.ts";
import { assertSampleCount, reportedCpuSeconds, StealMeter } from "./sample_bounds.ts";

const require = createRequire(import.meta.url);
let schemaPath = "";
let missing: string | null = null;
try {
  schemaPath = require.resolve("speedscope/dist/release/file-format-schema.json");
} catch (error) {
  missing = `the speedscope npm package has no file-format-schema.json: ${(error as Error).message}`;
}
// deno.json pins the package, which deno installs like every npm package of the project.
const schema = bootstrapped(missing);

function validator() {
  const schema = JSON.parse(Deno.readTextFileSync(schemaPath));
  const ajv = new Ajv({ allErrors: true, strict: false });
  return ajv.compile(schema);
}

/** The rules the schema cannot express. */
function checkConsistency(file: SpeedscopeFile): void {
  const frames = file.shared.frames.length;
  assert.ok(file.profiles.length > 0);
  for (const profile of file.profiles) {
    assert.equal(profile.samples.length, profile.weights.length, `${profile.name}: one weight per sample`);
    let sum = 0;
    for (const [i, stack] of profile.samples.entries()) {
      // A stack may be empty (a sample with no frame), never weightless.
      assert.ok(profile.weights[i]! > 0, `${profile.name}: stack ${i} weighs ${profile.weights[i]}`);
      for (const frame of stack) assert.ok(Number.isInteger(frame) && frame >= 0 && frame < frames);
      sum += profile.weights[i]!;
    }
    assert.equal(profile.endValue - profile.startValue, sum, `${profile.name}: endValue is the total weight`);
  }
  assert.ok(file.activeProfileIndex >= 0 && file.activeProfileIndex < file.profiles.length);
}

const kinds: FrameKind[] = [
  "kernel",
  "native",
  "python",
  "php",
  "phpjit",
  "hotspot",
  "ruby",
  "perl",
  "v8",
  "dotnet",
  "unknown",
  "error",
];

Deno.test(requiring([schema], {
  name: "speedscope output of a profile with every frame kind validates against speedscope's schema",
  fn() {
    const profile: Profile = {
      startTimeNs: 1.7e18,
      durationNs: 3e9,
      periodNs: 10_101_010,
      mappings: [{
        start: 0x400000,
        end: 0x500000,
        fileOffset: 0,
        fileName: "/bin/app",
        buildId: "ab",
        hasFunctions: true,
      }],
      locations: kinds.map((kind, i) => ({
        kind,
        mapping: kind === "native" ? 0 : -1,
        address: 0x401000 + i,
        functionName: kind === "unknown" ? "" : `fn_${kind}`,
        sourceFile: kind === "python" ? "app.py" : "",
        line: kind === "python" ? 7 : 0,
      })),
      samples: kinds.map((_, i) => ({
        locations: Array.from({ length: i + 1 }, (_, j) => i - j),
        count: i + 1,
        pid: 100 + (i % 3),
        tid: 200 + i,
        comm: `thread ${i % 3}`,
      })),
    };
    const file = JSON.parse(formatSpeedscope(profile, { name: "every kind" })) as SpeedscopeFile;
    const validate = validator();
    assert.ok(validate(file), JSON.stringify(validate.errors, null, 2));
    checkConsistency(file);
    assert.equal(file.profiles.length, 3);
    // The validator is not vacuous: a file without weights fails.
    const broken = structuredClone(file) as unknown as { profiles: Record<string, unknown>[] };
    delete broken.profiles[0]!.weights;
    assert.equal(validate(broken), false);
  },
}));

const chainTest = tracingTest(
  "record -o X.speedscope.json of the chain workload validates against the schema",
  async () => {
    const chain = await buildWorkload("chain", ["-O2", "-fno-omit-frame-pointer"], "-fp");
    const dir = tempDir();
    try {
      const output = `${dir}/chain.speedscope.json`;
      const steal = new StealMeter();
      const result = await runCli(["record", "-F", "199", "-o", output, "--", chain, "2"]);
      assert.equal(result.code, 0, result.stderr);
      const file = JSON.parse(Deno.readTextFileSync(output)) as SpeedscopeFile;
      const validate = validator();
      assert.ok(validate(file), JSON.stringify(validate.errors, null, 2));
      checkConsistency(file);
      const names = file.shared.frames.map((frame) => frame.name);
      const chainProfile = file.profiles.find((profile) => profile.name.startsWith("chain-fp"));
      assert.ok(chainProfile, `profiles: ${file.profiles.map((p) => p.name).join(", ")}`);
      assert.equal(chainProfile.unit, "nanoseconds");
      // Weights are nanoseconds of CPU, samples times the period: as many samples as the workload's CPU
      // time brings, nearly all of them with the chain.
      const periodNs = Math.round(1e9 / 199);
      const samples = (chainProfile.endValue - chainProfile.startValue) / periodNs;
      assert.ok(Number.isInteger(samples), `${samples} samples of ${periodNs} ns`);
      assertSampleCount(samples, reportedCpuSeconds(result.stdout), 199, steal.fraction(), "chain-fp");
      const withChain = chainProfile.samples.reduce((sum, stack, i) => {
        const text = stack.map((frame) => names[frame]).join(";");
        return sum + (text.includes("main;a;b;c") ? chainProfile.weights[i]! / periodNs : 0);
      }, 0);
      assert.ok(withChain / samples >= 0.95, `${withChain}/${samples} samples have main;a;b;c`);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
  schema,
);
Deno.test(chainTest);
