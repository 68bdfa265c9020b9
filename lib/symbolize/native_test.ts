import assert from "node:assert/strict";
import { configureLogging, type LogRecord, resetLogging } from "../log/logger.ts";
import { formatUnknownFrame, NativeSymbolizer } from "./native.ts";
import { RootDirectory } from "../sys/root_directory.ts";
import type { Address, FileOffset } from "../types.ts";
import { run } from "../testing/commands.ts";
import { programs, requiring } from "../testing/requirements.ts";

const tools = programs("gcc", "g++", "objcopy", "strip", "readelf", "c++filt", "ldd");

interface Fixture {
  dir: string;
  /** Unstripped, with .symtab. */
  full: string;
  /** Stripped, with a debuglink to `functions.debug` beside it. */
  linked: string;
  /** Stripped, without debug file. */
  stripped: string;
}

let fixture: Fixture | undefined;
function build(): Fixture {
  if (fixture !== undefined) return fixture;
  const dir = Deno.makeTempDirSync({ prefix: "omniprof_native_test_" });
  globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
  const source = new URL("./testdata/functions.c", import.meta.url).pathname;
  const full = `${dir}/functions`;
  run("gcc", "-O1", "-g", "-Wl,--build-id=none", "-o", full, source);
  Deno.mkdirSync(`${dir}/app`);
  Deno.mkdirSync(`${dir}/bare`);
  run("objcopy", "--only-keep-debug", full, `${dir}/app/functions.debug`);
  run("strip", "--strip-all", "-o", `${dir}/bare/functions`, full);
  run(
    "objcopy",
    `--add-gnu-debuglink=${dir}/app/functions.debug`,
    `${dir}/bare/functions`,
    `${dir}/app/functions`,
  );
  fixture = { dir, full, linked: `${dir}/app/functions`, stripped: `${dir}/bare/functions` };
  return fixture;
}

interface RuntimeFunction {
  name: string;
  /** File offset of the function's first byte, as the profiler computes it from the mapping. */
  fileOffset: number;
}

/** Runs a fixture binary and turns the runtime addresses it prints into file offsets through its maps. */
function runtimeFunctions(binary: string): RuntimeFunction[] {
  const out = run(binary, "print");
  const maps = [...out.matchAll(/^([0-9a-f]+)-([0-9a-f]+) \S+ ([0-9a-f]+) \S+ \d+\s+(\S+)$/gm)].map((m) => ({
    start: parseInt(m[1] ?? "", 16),
    end: parseInt(m[2] ?? "", 16),
    offset: parseInt(m[3] ?? "", 16),
    path: m[4] ?? "",
  }));
  const functions: RuntimeFunction[] = [];
  for (const m of out.matchAll(/^(\w+) 0x([0-9a-f]+)$/gm)) {
    const address = parseInt(m[2] ?? "", 16);
    const map = maps.find((r) => address >= r.start && address < r.end && r.path === binary);
    assert.ok(map !== undefined, `no mapping of ${binary} holds ${m[1]}`);
    functions.push({ name: m[1] ?? "", fileOffset: address - map.start + map.offset });
  }
  assert.ok(functions.length >= 5);
  return functions;
}

Deno.test(requiring([tools], {
  name: "symbolizeFileOffset() names the functions of a running process",
  fn() {
    const { full } = build();
    using symbolizer = new NativeSymbolizer();
    for (const f of runtimeFunctions(full)) {
      assert.deepEqual(symbolizer.symbolizeFileOffset(full, f.fileOffset as FileOffset), {
        functionName: f.name,
        offset: 0,
      });
      assert.deepEqual(symbolizer.symbolizeFileOffset(full, (f.fileOffset + 1) as FileOffset), {
        functionName: f.name,
        offset: 1,
      });
    }
    assert.equal(symbolizer.stats.filesLoaded, 1);
  },
}));

Deno.test(requiring([tools], {
  name: "a stripped binary is symbolized through its debug file",
  fn() {
    const { linked, stripped } = build();
    using symbolizer = new NativeSymbolizer();
    const functions = runtimeFunctions(linked);
    for (const f of functions) {
      assert.equal(symbolizer.symbolizeFileOffset(linked, f.fileOffset as FileOffset)?.functionName, f.name);
    }
    assert.equal(symbolizer.stats.debugFilesUsed, 1);
    // Without a debug file the local function has no name at all.
    const gamma = functions.find((f) => f.name === "fixture_static_gamma");
    assert.ok(gamma !== undefined);
    assert.notEqual(
      symbolizer.symbolizeFileOffset(stripped, gamma.fileOffset as FileOffset)?.functionName,
      "fixture_static_gamma",
    );
  },
}));

Deno.test(requiring([tools], {
  name: "symbolize() finds the debug file of a file in another root inside that root",
  fn() {
    const { dir, linked } = build();
    const root = `${dir}/root`;
    Deno.mkdirSync(`${root}/usr/bin`, { recursive: true });
    Deno.copyFileSync(linked, `${root}/usr/bin/functions`);
    Deno.copyFileSync(`${dir}/app/functions.debug`, `${root}/usr/bin/functions.debug`);
    const gamma = readelfValue(build().full, "fixture_static_gamma");
    using symbolizer = new NativeSymbolizer();
    using rootDirectory = RootDirectory.open(root);
    const file = {
      key: "functions in root",
      path: "/usr/bin/functions",
      root: rootDirectory,
      open: () => rootDirectory.openFile("/usr/bin/functions"),
    };
    assert.deepEqual(symbolizer.symbolize(file, (gamma + 2) as Address), {
      functionName: "fixture_static_gamma",
      offset: 2,
    });
    assert.equal(symbolizer.stats.debugFilesUsed, 1);
  },
}));

function readelfValue(path: string, name: string): number {
  const line = run("readelf", "-sW", path).split("\n").find((l) => l.trim().endsWith(` ${name}`));
  assert.ok(line !== undefined, `readelf does not list ${name}`);
  return parseInt(line.trim().split(/\s+/)[1] ?? "", 16);
}

Deno.test(requiring([tools], {
  name: "symbolize() demangles C++ names like c++filt",
  fn() {
    const binary = `${build().dir}/names`;
    run("g++", "-O1", "-o", binary, new URL("./testdata/names.cpp", import.meta.url).pathname);
    const mangled = "_ZN4omni4test6Widget4spinEiRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE";
    const value = readelfValue(binary, mangled);
    const expected = run("c++filt", mangled).trim();
    using symbolizer = new NativeSymbolizer();
    assert.deepEqual(symbolizer.symbolize(binary, (value + 1) as Address), {
      functionName: expected,
      offset: 1,
    });
    using raw = new NativeSymbolizer({ demangle: false });
    assert.equal(raw.symbolize(binary, value as Address)?.functionName, mangled);
  },
}));

Deno.test(requiring([tools], {
  name: "bad and unreadable files resolve to null, are counted and logged once",
  fn() {
    const records: LogRecord[] = [];
    configureLogging({
      level: "debug",
      sink: (record) => {
        if (record.category.join(".") === "omniprof.symbolize") records.push(record);
      },
    });
    try {
      const { dir } = build();
      const garbage = `${dir}/garbage.so`;
      Deno.writeFileSync(
        garbage,
        new TextEncoder().encode("\x7fELF this is not an ELF file at all".repeat(4)),
      );
      using symbolizer = new NativeSymbolizer();
      for (let i = 0; i < 3; i++) {
        for (const path of [garbage, `${dir}/missing.so`, dir, "/dev/null"]) {
          assert.equal(symbolizer.symbolize(path, 0x1000 as Address), null);
          assert.equal(symbolizer.symbolizeFileOffset(path, 0x1000 as FileOffset), null);
          assert.equal(symbolizer.buildId(path), "");
          assert.notEqual(symbolizer.loadError(path), "");
        }
      }
      assert.equal(symbolizer.stats.filesFailed, 4);
      assert.equal(records.length, 4);
      assert.ok(records.every((r) => r.level === "warning"));
      assert.match(symbolizer.loadError(garbage), /Cannot parse ELF .*garbage\.so/);
    } finally {
      resetLogging();
    }
  },
}));

function openDescriptors(): number {
  return [...Deno.readDirSync("/proc/self/fd")].length;
}

Deno.test(requiring([tools], {
  name: "the symbolizer keeps no file open and bounds its cache",
  fn() {
    const { full, linked, stripped } = build();
    const libc = run("ldd", "/bin/true").match(/libc\.so\.\d+ => (\S+)/)?.[1];
    assert.ok(libc !== undefined);
    const before = openDescriptors();
    using symbolizer = new NativeSymbolizer({ maxCachedFiles: 2 });
    for (const path of [full, linked, stripped, libc, full]) symbolizer.symbolize(path, 0x1100 as Address);
    assert.equal(openDescriptors(), before);
    assert.equal(symbolizer.cachedFiles, 2);
    assert.equal(symbolizer.stats.filesLoaded, 5);
    assert.equal(symbolizer.stats.evictions, 3);
    symbolizer.symbolize(full, 0x1100 as Address);
    assert.equal(symbolizer.stats.filesLoaded, 5);
    symbolizer.forget(full);
    symbolizer.symbolize(full, 0x1100 as Address);
    assert.equal(symbolizer.stats.filesLoaded, 6);

    using byBytes = new NativeSymbolizer({ maxCachedBytes: 1 });
    byBytes.symbolize(full, 0x1100 as Address);
    byBytes.symbolize(libc, 0x1100 as Address);
    assert.equal(byBytes.cachedFiles, 1);
  },
}));

Deno.test(requiring([tools], {
  name: "symbolize() resolves libc functions and buildId() reads libc's",
  fn() {
    const libc = run("ldd", "/bin/true").match(/libc\.so\.\d+ => (\S+)/)?.[1];
    assert.ok(libc !== undefined);
    const malloc = run("nm", "-D", "--defined-only", libc).split("\n").find((l) => / T malloc(@|$)/.test(l));
    assert.ok(malloc !== undefined);
    const value = parseInt(malloc.split(" ")[0] ?? "", 16);
    using symbolizer = new NativeSymbolizer();
    const t0 = performance.now();
    assert.deepEqual(symbolizer.symbolize(libc, (value + 4) as Address), {
      functionName: "malloc",
      offset: 4,
    });
    console.log(`libc symbolized (load + lookup) in ${(performance.now() - t0).toFixed(1)} ms`);
    assert.equal(
      symbolizer.buildId(libc),
      run("readelf", "-n", libc).match(/Build ID: ([0-9a-f]+)/)?.[1] ?? "",
    );
  },
}));

Deno.test("formatUnknownFrame() shows the base name and hex offset", () => {
  assert.equal(formatUnknownFrame("/usr/lib/x86_64-linux-gnu/libc.so.6", 0x2a1ca), "[libc.so.6+0x2a1ca]");
  assert.equal(formatUnknownFrame("/app/server", 0 as FileOffset), "[server+0x0]");
  assert.equal(formatUnknownFrame("memfd:jit", 255), "[memfd:jit+0xff]");
});

Deno.test(requiring([tools], {
  name: "functionAt() gives the range of a function no symbol names, from the file's unwind entries",
  fn() {
    const { full, stripped } = build();
    using symbolizer = new NativeSymbolizer();
    const gamma = runtimeFunctions(full).find((f) => f.name === "fixture_static_gamma")!;
    const start = symbolizer.fileOffsetToVaddr(full, gamma.fileOffset as FileOffset)!;
    const inside = (start + 2) as Address;
    assert.notEqual(symbolizer.symbolize(stripped, inside)?.functionName, "fixture_static_gamma");
    const range = symbolizer.functionAt(stripped, inside);
    assert.equal(range?.start, start);
    assert.ok(range !== null && range.end > inside);
    assert.equal(symbolizer.functionAt("/nonexistent/binary", inside), null);
  },
}));
