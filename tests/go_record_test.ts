// End-to-end tests of `omniprof record` on Go programs built without a symbol table (`-ldflags="-s -w"`):
// their frames are named from `.gopclntab`, with source files and lines, and calls the compiler inlined
// are shown as frames of their own, written in pprof as one location with a line per call. The pprof
// file is read back with the published schema (not omniprof's reader). A cgo program's samples in C code
// show the Go callers too, stripped or not. They need root, BTF and Go (and gcc for cgo).
import assert from "node:assert/strict";
import { optional, programs, type Requirement } from "../lib/testing/requirements.ts";
import { buildGoWorkload, installedGo, REPO_ROOT, tracing } from "./helpers.ts";
import { decodePprofBySchema, type PbProfile } from "./pprof_schema.ts";
import { recordRunning } from "./recording_window.ts";
import { assertSampleCount } from "./sample_bounds.ts";
import { requiring } from "../lib/testing/requirements.ts";

const SOURCE = `${REPO_ROOT}tests/workloads/chain.go`;
const CHAIN = ["main.main", "main.a", "main.b", "main.c"];

/** One frame of a sample as the pprof file gives it. */
interface Frame {
  functionName: string;
  file: string;
  line: number;
  /** Index of the frame's line in its location, and how many lines the location has. */
  lineIndex: number;
  lines: number;
}

/** The samples of `pid`: frames root first (the lines of a location outermost first), and counts. */
function samplesOf(profile: PbProfile, pid: number): { frames: Frame[]; count: number }[] {
  const strings = profile.stringTable;
  const functions = new Map(profile.function.map((f) => [f.id, f]));
  const locations = new Map(profile.location.map((l) => [l.id, l]));
  const pidKey = strings.indexOf("pid");
  return profile.sample
    .filter((sample) =>
      sample.label.some((label) => Number(label.key) === pidKey && Number(label.num) === pid)
    )
    .map((sample) => {
      const frames: Frame[] = [];
      for (const id of sample.locationId) {
        const location = locations.get(id)!;
        location.line.forEach((line, lineIndex) => {
          const f = functions.get(line.functionId)!;
          frames.push({
            functionName: strings[Number(f.name)]!,
            file: strings[Number(f.filename)]!,
            line: Number(line.line),
            lineIndex,
            lines: location.line.length,
          });
        });
      }
      return { frames: frames.reverse(), count: Number(sample.value[0]) };
    });
}

/** The line numbers the workload's own source gives each frame of the chain. */
function expectedLines(): { calls: Map<string, number>; c: { from: number; to: number } } {
  const lines = Deno.readTextFileSync(SOURCE).split("\n");
  const lineOf = (fn: string, text: string) => {
    const start = lines.findIndex((line) => line.startsWith(`func ${fn}(`));
    const at = lines.findIndex((line, i) => i > start && line.includes(text));
    assert.ok(start >= 0 && at > start, `${text} in func ${fn} of ${SOURCE}`);
    return at + 1;
  };
  const cStart = lines.findIndex((line) => line.startsWith("func c("));
  const cEnd = lines.findIndex((line, i) => i > cStart && line === "}");
  return {
    calls: new Map([
      ["main.main", lineOf("main", "a(cpuSeconds()")],
      ["main.a", lineOf("a", "b(end)")],
      ["main.b", lineOf("b", "c(end)")],
    ]),
    c: { from: cStart + 1, to: cEnd + 1 },
  };
}

/** Where the chain main.main;main.a;main.b;main.c starts in `frames`, or -1. */
function chainAt(frames: Frame[]): number {
  outer: for (let i = 0; i + CHAIN.length <= frames.length; i++) {
    for (let j = 0; j < CHAIN.length; j++) if (frames[i + j]!.functionName !== CHAIN[j]) continue outer;
    return i;
  }
  return -1;
}

for (const inline of [true, false]) {
  const variant = inline ? "b inlined into a" : "nothing inlined";
  Deno.test(requiring([tracing(), programs("go")], {
    name:
      `record -p PID of a stripped Go program (${variant}) names main;a;b;c with files and lines in pprof`,
    async fn() {
      const binary = await buildGoWorkload(
        "chain",
        { ldflags: "-s -w", ...(inline ? {} : { gcflags: "-l" }) },
        `-go${inline ? "" : "-noinline"}-stripped`,
      );
      const { calls, c } = expectedLines();
      const { pprof, pid, cpu, steal } = await recordRunning(binary, { args: ["30"], cpuSeconds: 4 });
      const samples = samplesOf(decodePprofBySchema(pprof), pid);
      const total = samples.reduce((sum, s) => sum + s.count, 0);
      assertSampleCount(total, cpu, 99, steal, `Go (${variant})`);
      let complete = 0;
      for (const { frames, count } of samples) {
        const at = chainAt(frames);
        if (at < 0) continue;
        const chain = frames.slice(at, at + CHAIN.length);
        const positioned = chain.every((frame, i) =>
          frame.file === SOURCE &&
          (i < 3 ? frame.line === calls.get(frame.functionName) : frame.line >= c.from && frame.line <= c.to)
        );
        // b's call of c is code of a when b is inlined: one location, lines innermost (b) first.
        const [, a, b] = chain;
        const shaped = inline
          ? a!.lines === 2 && b!.lines === 2 && b!.lineIndex === 0 && a!.lineIndex === 1
          : a!.lines === 1 && b!.lines === 1;
        if (positioned && shaped) complete += count;
      }
      console.log(`Go (${variant}): ${complete}/${total} samples with main;a;b;c at their files and lines`);
      assert.ok(total > 0 && complete / total >= 0.95, `${complete}/${total} complete`);
    },
  }));
}

const CGO_SOURCE = `${REPO_ROOT}tests/workloads/cgo_chain.go`;
/** The stack of a sample in c_spin, root first, from the goroutine's start to the C code. */
const CGO_CHAIN = [
  "runtime.goexit",
  "runtime.main",
  "main.main",
  "main.a",
  "main.b",
  "main._Cfunc_c_middle",
  "runtime.cgocall",
  "runtime.asmcgocall",
  "c_middle",
  "c_spin",
];

/** The lines of cgo_chain.go where main, a and b make the calls of the chain. */
function cgoCallLines(): Map<string, number> {
  const lines = Deno.readTextFileSync(CGO_SOURCE).split("\n");
  const lineOf = (fn: string, text: string) => {
    const start = lines.findIndex((line) => line.startsWith(`func ${fn}(`));
    const at = lines.findIndex((line, i) => i > start && line.includes(text));
    assert.ok(start >= 0 && at > start, `${text} in func ${fn} of ${CGO_SOURCE}`);
    return at + 1;
  };
  return new Map([
    ["main.main", lineOf("main", "a(float64(")],
    ["main.a", lineOf("a", "b(end)")],
    ["main.b", lineOf("b", "C.c_middle(")],
  ]);
}

for (const stripped of [true, false]) {
  const variant = stripped ? "stripped" : "with symbols and DWARF";
  Deno.test(requiring([tracing(), programs("go", "gcc")], {
    name:
      `record -p PID of a cgo program (${variant}) shows the Go callers of its C code, with files and lines`,
    async fn() {
      // Stripped, the C functions keep only the names the dynamic symbol table holds: Go 1.19 had the host
      // linker export every global one (-rdynamic), Go 1.24 only those cgo needs, so the build asks for it.
      const binary = await buildGoWorkload(
        "cgo_chain",
        stripped ? { ldflags: "-s -w -extldflags=-rdynamic" } : {},
        stripped ? "-stripped-rdynamic" : "",
      );
      const calls = cgoCallLines();
      const { pprof, pid, cpu, steal, stats: { bpf } } = await recordRunning(binary, {
        args: ["30"],
        cpuSeconds: 3,
      });
      const samples = samplesOf(decodePprofBySchema(pprof), pid);
      const total = samples.reduce((sum, s) => sum + s.count, 0);
      assertSampleCount(total, cpu, 99, steal, `cgo (${variant})`);
      // The C code runs on the thread's system stack, where runtime.asmcgocall switched to; the Go
      // frames above it are on the goroutine's stack.
      let inSpin = 0;
      let complete = 0;
      for (const { frames, count } of samples) {
        if (!frames.some((frame) => frame.functionName === "c_spin")) continue;
        inSpin += count;
        // Later Go releases call C through a landing pad without a frame of its own.
        const names = frames.map((frame) => frame.functionName)
          .filter((name) => name !== "runtime.asmcgocall_landingpad").slice(0, CGO_CHAIN.length);
        if (names.join(";") !== CGO_CHAIN.join(";")) continue;
        const positioned = frames.every((frame) =>
          !calls.has(frame.functionName) ||
          (frame.file === CGO_SOURCE && frame.line === calls.get(frame.functionName))
        );
        if (positioned) complete += count;
      }
      console.log(
        `cgo (${variant}): ${complete}/${inSpin} samples in c_spin (of ${total}) with ${CGO_CHAIN.join(";")}`,
      );
      assert.ok(inSpin > 0 && inSpin / total >= 0.9, `${inSpin}/${total} samples in c_spin`);
      assert.ok(complete / inSpin >= 0.9, `${complete}/${inSpin} complete`);
      // Each of those crossed from the system stack to the goroutine's once, and no crossing failed.
      assert.ok(bpf.UnwindGoStackSwitches! >= complete, `${bpf.UnwindGoStackSwitches} stack switches`);
      assert.equal(bpf.UnwindGoStackBad, 0, "failed stack switches");
    },
  }));
}

/**
 * Go code that C calls back is followed back onto the system stack as Go 1.19 lays it out; with go1.24
 * (Debian 13's) the unwinder gets as far as crosscall2 and no further: not supported there yet.
 */
function callbackUnwound(): Requirement {
  const go = installedGo();
  return optional(
    go !== null && go.minor >= 24
      ? `Go code that C calls back is not unwound past crosscall2 with ${go.version} yet`
      : null,
  );
}

const CALLBACK_SOURCE = `${REPO_ROOT}tests/workloads/cgo_callback.go`;
/** A sample in spin, root first: Go calls C on the system stack, C calls Go back on the goroutine's. */
const CALLBACK_ROOT = [
  "runtime.goexit",
  "runtime.main",
  "main.main",
  "main.a",
  "main._Cfunc_c_call_back",
  "runtime.cgocall",
  "runtime.asmcgocall",
];
const CALLBACK_TOP = ["crosscall2", "runtime.cgocallback"];

for (const stripped of [true, false]) {
  const variant = stripped ? "stripped" : "with symbols and DWARF";
  Deno.test(requiring([tracing(), programs("go", "gcc"), callbackUnwound()], {
    name:
      `record -p PID of a cgo program (${variant}) shows Go called back from C above its C and Go callers`,
    async fn() {
      const binary = await buildGoWorkload(
        "cgo_callback",
        stripped ? { ldflags: "-s -w" } : {},
        stripped ? "-stripped" : "",
      );
      const lines = Deno.readTextFileSync(CALLBACK_SOURCE).split("\n");
      const lineOf = (fn: string, text: string) => {
        const start = lines.findIndex((line) => line.startsWith(`func ${fn}(`));
        return lines.findIndex((line, i) => i > start && line.includes(text)) + 1;
      };
      const calls = new Map([["main.main", lineOf("main", "a(cpuSeconds()")], [
        "main.a",
        lineOf("a", "C.c_call_back("),
      ]]);
      assert.ok([...calls.values()].every((line) => line > 0), `the calls in ${CALLBACK_SOURCE}`);
      const { pprof, pid, cpu, steal } = await recordRunning(binary, { args: ["30"], cpuSeconds: 3 });
      const samples = samplesOf(decodePprofBySchema(pprof), pid);
      const total = samples.reduce((sum, s) => sum + s.count, 0);
      assertSampleCount(total, cpu, 99, steal, `cgo callback (${variant})`);
      let inSpin = 0;
      let complete = 0;
      for (const { frames, count } of samples) {
        const names = frames.map((frame) => frame.functionName);
        const spin = names.indexOf("main.spin");
        if (spin < 0) continue;
        inSpin += count;
        if (names.slice(0, CALLBACK_ROOT.length).join(";") !== CALLBACK_ROOT.join(";")) continue;
        // The C code between: c_call_back (unnamed when static and stripped) and cgo's C wrapper of spin.
        const top = names.indexOf(CALLBACK_TOP[0]!);
        const cFrames = top - CALLBACK_ROOT.length;
        if (cFrames < 1 || cFrames > 4 || names[top + 1] !== CALLBACK_TOP[1] || spin < top) continue;
        if (
          frames.some((f) =>
            calls.has(f.functionName) &&
            (f.file !== CALLBACK_SOURCE || f.line !== calls.get(f.functionName))
          )
        ) {
          continue;
        }
        complete += count;
      }
      console.log(
        `cgo callback (${variant}): ${complete}/${inSpin} samples in main.spin (of ${total}) with ` +
          `${CALLBACK_ROOT.join(";")};...;${CALLBACK_TOP.join(";")};...;main.spin`,
      );
      assert.ok(inSpin > 0 && inSpin / total >= 0.9, `${inSpin}/${total} samples in main.spin`);
      assert.ok(complete / inSpin >= 0.9, `${complete}/${inSpin} complete`);
    },
  }));
}
