/**
 * `omniprof report FILE` as a converter: `--folded` prints folded stacks, `--speedscope OUT` and
 * `--html OUT` write the other formats; the HTML is opened in headless Chromium. The input is a pprof
 * file written from a profile made here, so no root is needed.
 */
import assert from "node:assert/strict";
import type { Profile } from "../lib/profile/profile.ts";
import { formatFolded } from "../lib/output/folded.ts";
import { encodePprofGzip } from "../lib/output/pprof.ts";
import { decodePprof } from "../lib/output/pprof_reader.ts";
import type { SpeedscopeFile } from "../lib/output/speedscope.ts";
import { browserTest, drawnFrames, openPage } from "./browser.ts";
import { runCli, tempDir } from "./helpers.ts";

const profile: Profile = {
  startTimeNs: 1.7e18,
  durationNs: 2e9,
  periodNs: 10_101_010,
  mappings: [{
    start: 0x400000,
    end: 0x401000,
    fileOffset: 0,
    fileName: "/srv/app",
    buildId: "",
    hasFunctions: true,
  }],
  locations: [
    { kind: "native", mapping: 0, address: 0x400100, functionName: "main", sourceFile: "", line: 0 },
    { kind: "native", mapping: 0, address: 0x400200, functionName: "serve", sourceFile: "", line: 0 },
    { kind: "native", mapping: 0, address: 0x400300, functionName: "parse_request", sourceFile: "", line: 0 },
    { kind: "kernel", mapping: -1, address: 0x1000, functionName: "do_syscall_64", sourceFile: "", line: 0 },
  ],
  samples: [
    { locations: [2, 1, 0], count: 30, pid: 42, tid: 42, comm: "app" },
    { locations: [3, 1, 0], count: 10, pid: 42, tid: 43, comm: "app-io" },
  ],
};

function withPprof(fn: (dir: string, pprof: string) => Promise<void>): () => Promise<void> {
  return async () => {
    const dir = tempDir();
    try {
      const pprof = `${dir}/app.pb.gz`;
      Deno.writeFileSync(pprof, await encodePprofGzip(profile));
      await fn(dir, pprof);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  };
}

Deno.test(
  "report FILE --folded prints the profile's folded stacks",
  withPprof(async (_dir, pprof) => {
    const result = await runCli(["report", pprof, "--folded"]);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout, formatFolded(decodePprof(Deno.readFileSync(pprof))));
    assert.match(result.stdout, /^app;main;serve;parse_request 30$/m);
  }),
);

Deno.test(
  "report FILE --speedscope OUT writes a speedscope file",
  withPprof(async (dir, pprof) => {
    const result = await runCli(["report", pprof, "--speedscope", `${dir}/app.speedscope.json`]);
    assert.equal(result.code, 0, result.stderr);
    const file = JSON.parse(Deno.readTextFileSync(`${dir}/app.speedscope.json`)) as SpeedscopeFile;
    assert.deepEqual(file.profiles.map((p) => p.name), ["app (pid 42)"]);
    assert.equal(file.profiles[0]!.endValue, 40 * 10_101_010);
  }),
);

Deno.test("report of an off-CPU pprof gives each time, and folds it in microseconds of wall time", async () => {
  const dir = tempDir();
  try {
    const pprof = `${dir}/off.pb.gz`;
    const offCpu: Profile = {
      ...profile,
      periodNs: 10_000_000,
      offCpu: true,
      samples: [
        ...profile.samples,
        // app-io blocked 2.5 s in the kernel under serve.
        { locations: [3, 1, 0], count: 0, offCpuNs: 2_500_000_000, pid: 42, tid: 43, comm: "app-io" },
      ],
    };
    Deno.writeFileSync(pprof, await encodePprofGzip(offCpu));
    const top = await runCli(["report", pprof]);
    assert.equal(top.code, 0, top.stderr);
    assert.match(
      top.stdout,
      /^on-CPU 0\.400 s \(40 samples\), off-CPU 2\.500 s, wall 2\.900 s; functions by CPU samples:$/m,
    );
    assert.match(top.stdout, /^\s*75\.00%\s+30\s+75\.00%\s+30\s+parse_request$/m);
    // Then where the threads waited: the 2.5 s all in the kernel frame, under serve and main.
    const waited = top.stdout.slice(top.stdout.indexOf("functions by off-CPU time:\n"));
    assert.match(waited, /^\s*100\.00%\s+2500\.0\s+100\.00%\s+2500\.0\s+do_syscall_64 \[k\]$/m);
    assert.match(waited, /^\s*0\.00%\s+0\.0\s+100\.00%\s+2500\.0\s+serve$/m);
    assert.doesNotMatch(waited, /parse_request/);
    const folded = await runCli(["report", pprof, "--folded"]);
    assert.equal(folded.code, 0, folded.stderr);
    assert.equal(
      folded.stdout,
      "app-io;main;serve;do_syscall_64_[k] 2600000\napp;main;serve;parse_request 300000\n",
    );
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test(
  "report rejects two conversions at once and an unwritable output",
  withPprof(async (dir, pprof) => {
    const both = await runCli(["report", pprof, "--folded", "--html", `${dir}/x.html`]);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /choose one of --folded, --html and --speedscope/);
    const missing = await runCli(["report", pprof, "--html", `${dir}/no/such/dir/x.html`]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /Cannot write the profile to .*does not exist/);
  }),
);

Deno.test(browserTest(
  "report FILE --html OUT converts a pprof file into the flamegraph page",
  withPprof(async (dir, pprof) => {
    const html = `${dir}/app.html`;
    const result = await runCli(["report", pprof, "--html", html]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /wrote .*app\.html \(html\)/);
    const opened = await openPage(html);
    try {
      const frames = await drawnFrames(opened.page);
      const names = frames.map((frame) => `${frame.depth}:${frame.name}`);
      for (const expected of ["1:app (42)", "2:main", "3:serve", "4:parse_request", "4:do_syscall_64"]) {
        assert.ok(names.includes(expected), `${expected} in ${names.join(" ")}`);
      }
      assert.equal(frames.find((frame) => frame.name === "do_syscall_64")!.kind, "kernel");
      assert.match(await opened.page.locator("#legend").innerText(), /kernel[\s\S]*native/);
      // The thread filter: only the I/O thread leaves parse_request out.
      const options = await opened.page.locator("#thread option").allInnerTexts();
      const io = options.findIndex((text) => text.startsWith("app-io (tid 43"));
      assert.ok(io > 0, options.join(" | "));
      await opened.page.selectOption("#thread", { index: io });
      const filtered = (await drawnFrames(opened.page)).map((frame) => frame.name);
      assert.ok(
        filtered.includes("do_syscall_64") && !filtered.includes("parse_request"),
        filtered.join(" "),
      );
      assert.deepEqual(opened.requests, [new URL(`file://${html}`).href]);
    } finally {
      await opened.close();
    }
  }),
));
