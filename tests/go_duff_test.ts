// End-to-end test of Go's Duff's devices: runtime.duffzero and runtime.duffcopy have no frame of their
// own, and the code that calls them makes a pretend one just below its stack pointer (Go 1.19's
// assembler: `MOVQ BP, -16(SP); LEAQ -16(SP), BP; CALL runtime.duffzero; MOVQ 0(BP), BP`), so inside them
// rbp lies below rsp, which no frame pointer of a real frame does. A stripped Go program that spends
// most of its time in them (tests/workloads/duff.go), linked by Go and by the system linker, is recorded
// with `record -p`; each sample whose leaf is one of them must show its callers up to main.main. Needs
// root, BTF and Go (and gcc to link with the system linker).
import assert from "node:assert/strict";
import { optional, programs, type Requirement, requiring } from "../lib/testing/requirements.ts";
import { buildGoWorkload, tracing } from "./helpers.ts";
import { decodePprofBySchema, type PbProfile } from "./pprof_schema.ts";
import { recordRunning } from "./recording_window.ts";
import { assertSampleCount } from "./sample_bounds.ts";

const DUFF = ["runtime.duffzero", "runtime.duffcopy"];
/** A sample in a Duff's device, leaf first, up to main.main. */
const CALLERS = ["main.b", "main.a", "main.main"];
/** Samples in each Duff's device below which the test proves nothing (some 4 s at 99 Hz give hundreds). */
const MIN_SAMPLES = 40;

/** The function names of each sample of `pid`, leaf first, and its count. */
function samplesOf(profile: PbProfile, pid: number): { functions: string[]; count: number }[] {
  const strings = profile.stringTable;
  const functions = new Map(profile.function.map((f) => [f.id, strings[Number(f.name)]!]));
  const locations = new Map(profile.location.map((l) => [l.id, l]));
  const pidKey = strings.indexOf("pid");
  return profile.sample
    .filter((sample) => sample.label.some((l) => Number(l.key) === pidKey && Number(l.num) === pid))
    .map((sample) => ({
      functions: sample.locationId.flatMap((id) =>
        locations.get(id)!.line.map((line) => functions.get(line.functionId)!)
      ),
      count: Number(sample.value[0]),
    }));
}

/** The installed Go's runtime has the Duff's devices (amd64 did up to at least Go 1.24). */
function duffDevices(): Requirement {
  let root = "";
  try {
    const result = new Deno.Command("go", {
      args: ["env", "GOROOT"],
      env: { GOTOOLCHAIN: "local" },
      stdout: "piped",
      stderr: "null",
    }).outputSync();
    root = new TextDecoder().decode(result.stdout).trim();
  } catch {
    return optional(null); // no Go: programs("go") says so
  }
  try {
    Deno.statSync(`${root}/src/runtime/duff_amd64.s`);
    return optional(null);
  } catch {
    return optional(`the Go in ${root} has no Duff's devices (src/runtime/duff_amd64.s)`);
  }
}

for (const external of [false, true]) {
  const linking = external ? "linked by the system linker" : "linked by Go";
  Deno.test(requiring([tracing(), programs(...(external ? ["go", "gcc"] : ["go"])), duffDevices()], {
    name:
      `record -p PID of a stripped Go program (${linking}) shows the callers of runtime.duffzero and runtime.duffcopy`,
    async fn() {
      const binary = external
        ? await buildGoWorkload("duff", { ldflags: "-s -w -linkmode=external" }, "-external-stripped")
        : await buildGoWorkload("duff", { ldflags: "-s -w" }, "-stripped");
      const { pprof, pid, cpu, steal, stats } = await recordRunning(binary, { args: ["30"], cpuSeconds: 4 });
      const samples = samplesOf(decodePprofBySchema(pprof), pid);
      const total = samples.reduce((sum, s) => sum + s.count, 0);
      assertSampleCount(total, cpu, 99, steal, `Go Duff's devices (${linking})`);
      const inDuff = new Map(DUFF.map((name) => [name, 0]));
      const complete = new Map(DUFF.map((name) => [name, 0]));
      /** The stacks of incomplete samples in a Duff's device, and how many: what a failure shows. */
      const incomplete = new Map<string, number>();
      for (const { functions, count } of samples) {
        const leaf = functions[0]!;
        if (!inDuff.has(leaf)) continue;
        inDuff.set(leaf, inDuff.get(leaf)! + count);
        if (CALLERS.every((name, i) => functions[i + 1] === name)) {
          complete.set(leaf, complete.get(leaf)! + count);
        } else {
          const stack = functions.join(" <- ");
          incomplete.set(stack, (incomplete.get(stack) ?? 0) + count);
        }
      }
      const shown = [...incomplete].sort((x, y) => y[1] - x[1]).slice(0, 5).map(([k, n]) => `${n} ${k}`)
        .join(" | ");
      console.log(
        `Go Duff's devices (${linking}): ${
          DUFF.map((name) => `${complete.get(name)}/${inDuff.get(name)} in ${name}`).join(", ")
        } with ${CALLERS.join(" <- ")} (of ${total}); bad frame pointers ${
          stats.bpf.UnwindBadFramePointer ?? 0
        }` + (incomplete.size === 0 ? "" : `; incomplete: ${shown}`),
      );
      for (const name of DUFF) {
        const n = inDuff.get(name)!;
        assert.ok(n >= MIN_SAMPLES, `${n} samples in ${name} of ${total}`);
        assert.ok(
          complete.get(name)! / n >= 0.95,
          `${complete.get(name)}/${n} in ${name} complete: ${shown}`,
        );
      }
    },
  }));
}
