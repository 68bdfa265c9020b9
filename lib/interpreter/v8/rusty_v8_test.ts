import assert from "node:assert/strict";
import { ElfFile } from "../../elf/elf_file.ts";
import { hasPerfMapFlags, readRustyV8Version } from "./rusty_v8.ts";

const launch = (argv: string[], environ: Record<string, string> = {}) => ({
  argv,
  environ: new Map(Object.entries(environ)),
});

Deno.test("readRustyV8Version() of Deno's own executable is the V8 version Deno reports", () => {
  using elf = ElfFile.open(Deno.execPath());
  assert.equal(readRustyV8Version(elf), Deno.version.v8);
});

Deno.test("readRustyV8Version() of a file without rusty_v8 is null", () => {
  for (const path of ["/bin/ls", "/bin/sh"]) {
    using elf = ElfFile.open(path);
    assert.equal(readRustyV8Version(elf), null, path);
  }
});

Deno.test("hasPerfMapFlags() finds either perf flag in --v8-flags or DENO_V8_FLAGS", () => {
  const yes = [
    launch(["deno", "run", "--v8-flags=--perf-basic-prof", "a.js"]),
    launch(["deno", "run", "--v8-flags=--max-old-space-size=99,--perf-prof", "a.js"]),
    launch(["deno", "run", "--v8-flags=--perf_basic_prof,--interpreted-frames-native-stack", "a.js"]),
    launch(["deno", "run", "--v8-flags=--perf-basic-prof-only-functions", "a.js"]),
    launch(["app"], { DENO_V8_FLAGS: "--interpreted-frames-native-stack,--perf-basic-prof" }),
  ];
  for (const process of yes) assert.ok(hasPerfMapFlags(process), JSON.stringify(process.argv));
  const no = [
    launch(["deno", "run", "a.js"]),
    launch(["deno", "run", "--v8-flags=--interpreted-frames-native-stack", "a.js"]),
    // The script's own argument, not Deno's.
    launch(["deno", "run", "a.js", "--perf-basic-prof"]),
    launch(["deno", "run", "--v8-flags=--perf-basic-prof-only-functions-x", "a.js"]),
    launch(["app"], { DENO_V8_FLAGS: "--no-perf-basic-prof" }),
  ];
  for (const process of no) assert.ok(!hasPerfMapFlags(process), JSON.stringify(process.argv));
});
