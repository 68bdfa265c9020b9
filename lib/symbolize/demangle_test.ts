import assert from "node:assert/strict";
import { demangle } from "./demangle.ts";
import { programs, requiring } from "../testing/requirements.ts";

const decoder = new TextDecoder();

async function exec(cmd: string, args: string[], stdin = ""): Promise<string> {
  const child = new Deno.Command(cmd, { args, stdin: "piped", stdout: "piped", stderr: "piped" }).spawn();
  const writer = child.stdin.getWriter();
  const [, out] = await Promise.all([
    writer.write(new TextEncoder().encode(stdin)).then(() => writer.close()),
    child.output(),
  ]);
  if (!out.success) throw new Error(`${cmd} ${args.join(" ")} failed: ${decoder.decode(out.stderr)}`);
  return decoder.decode(out.stdout);
}

const cxxTools = programs("g++", "nm", "c++filt");
const rustTools = programs("rustc", "nm", "c++filt");

let tempDir: string | undefined;
function temp(): string {
  if (tempDir === undefined) {
    tempDir = Deno.makeTempDirSync({ prefix: "omniprof_demangle_test_" });
    globalThis.addEventListener("unload", () => Deno.removeSync(tempDir!, { recursive: true }));
  }
  return tempDir;
}

/** Defined symbol names of a binary, from nm. */
async function symbolNames(path: string, dynamic = false): Promise<string[]> {
  const out = await exec("nm", [...(dynamic ? ["-D"] : []), "--defined-only", path]);
  return [
    ...new Set(out.split("\n").map((l) => l.split(" ")[2]?.replace(/@.*$/, "") ?? "").filter((n) => n)),
  ];
}

/** Demangles every name with c++filt, one line each. */
async function cxxfilt(names: string[]): Promise<string[]> {
  return (await exec("c++filt", [], names.join("\n") + "\n")).split("\n").slice(0, names.length);
}

/**
 * The WASM demangler prints the standard abbreviations (`std::string`) that c++filt expands and leaves out
 * the return type of function templates; map c++filt's output to that style.
 */
function cxxfiltStyle(expected: string, ours: string): string {
  const abbreviated = expected
    .replaceAll("std::basic_string<char, std::char_traits<char>, std::allocator<char> >", "std::string")
    .replaceAll("std::basic_ostream<char, std::char_traits<char> >", "std::ostream")
    .replaceAll("std::basic_istream<char, std::char_traits<char> >", "std::istream")
    .replaceAll("std::basic_iostream<char, std::char_traits<char> >", "std::iostream")
    .replaceAll("std::string >", "std::string>");
  return abbreviated.endsWith(` ${ours}`) ? ours : abbreviated;
}

Deno.test(requiring([cxxTools], {
  name: "demangle() matches c++filt on the C++ fixture's functions",
  async fn() {
    const binary = `${temp()}/names`;
    await exec("g++", ["-O1", "-o", binary, new URL("./testdata/names.cpp", import.meta.url).pathname]);
    const mangled = (await symbolNames(binary)).filter((n) => /^_Z.*(omni|overloaded|main)/.test(n));
    assert.ok(mangled.length >= 5, `only ${mangled.join(", ")}`);
    const expected = await cxxfilt(mangled);
    for (const [i, name] of mangled.entries()) {
      assert.notEqual(expected[i], name, `c++filt cannot demangle ${name}`);
      assert.equal(demangle(name), expected[i], name);
    }
  },
}));

Deno.test(requiring([cxxTools, programs("ldconfig")], {
  name: "demangle() agrees with c++filt on libstdc++'s exported functions",
  async fn() {
    const path = (await exec("ldconfig", ["-p"])).match(/libstdc\+\+\.so\.6 .*=> (\S+)/)?.[1];
    assert.ok(path !== undefined, "ldconfig knows no libstdc++.so.6 (g++ brings it)");
    const mangled = (await symbolNames(path, true)).filter((n) => n.startsWith("_Z"));
    const expected = await cxxfilt(mangled);
    const t0 = performance.now();
    const ours = mangled.map(demangle);
    const ms = performance.now() - t0;
    let same = 0;
    const differing: string[] = [];
    for (const [i, name] of mangled.entries()) {
      const got = ours[i] ?? "";
      assert.ok(!got.startsWith("_Z"), `${name} was not demangled`);
      if (got === cxxfiltStyle(expected[i] ?? "", got)) same++;
      else differing.push(`${name}\n  ours:     ${got}\n  c++filt:  ${expected[i]}`);
    }
    console.log(
      `libstdc++: ${mangled.length} names demangled in ${ms.toFixed(0)} ms; ${same} match c++filt, ` +
        `${differing.length} differ, e.g.\n${differing.slice(0, 2).join("\n")}`,
    );
    // Known differences of the WASM demangler: template constructors lose one parameter, and a few
    // nested-name references come out in another order. They concern under 10% of libstdc++'s names.
    assert.ok(same / mangled.length > 0.9, `only ${same} of ${mangled.length} match`);
  },
}));

Deno.test(requiring([rustTools], {
  name: "demangle() reads Rust legacy and v0 symbols like c++filt, without the hash",
  async fn() {
    const source = new URL("./testdata/names.rs", import.meta.url).pathname;
    for (const [mangling, flags] of [["legacy", []], ["v0", ["-C", "symbol-mangling-version=v0"]]] as const) {
      const binary = `${temp()}/names_${mangling}`;
      await exec("rustc", ["-O", "--crate-name", "omni_rust", ...flags, "-o", binary, source]);
      const names = (await symbolNames(binary)).filter((n) =>
        n.startsWith("_R") || /^_ZN.*17h[0-9a-f]{16}E/.test(n)
      );
      const ours = names.map(demangle);
      // c++filt keeps the legacy hash (::h0123...) and v0 crate disambiguators ([0123...]).
      const expected = (await cxxfilt(names)).map((e) =>
        e.replace(/::h[0-9a-f]{16}$/, "").replace(/\[[0-9a-f]+\]/g, "")
      );
      const spin = names.findIndex((n) => n.includes("spin_function"));
      assert.ok(spin >= 0, `no spin_function symbol with ${mangling} mangling`);
      assert.equal(ours[spin], "omni_rust::inner::spin_function");
      const widen = names.findIndex((n) => n.includes("widen"));
      assert.ok(widen >= 0);
      assert.equal(ours[widen], expected[widen]);
      let same = 0;
      for (const [i, got] of ours.entries()) {
        assert.ok(!/^_[RZ]/.test(got), `${names[i]} was not demangled`);
        // The WASM demangler keeps `.0`-style suffixes of statics and omits const generic types.
        if (got === expected[i] || got.replace(/\.\d+$/, "") === expected[i]) same++;
      }
      console.log(`Rust ${mangling}: ${same} of ${names.length} names match c++filt`);
      assert.ok(same / names.length > 0.95);
    }
  },
}));

Deno.test("demangle() passes unmangled names through unchanged", () => {
  for (
    const name of [
      "main",
      "_start",
      "_foo",
      "__libc_start_main",
      "_GLOBAL__sub_I_main",
      "",
      "_",
      "_Z",
      "Z3foov",
    ]
  ) {
    assert.equal(demangle(name), name);
  }
});

Deno.test("demangle() returns malformed mangled names unchanged and never throws", () => {
  for (
    const name of ["_Zfoo", "_ZN", "_ZN3foo", "_R!!", "_RNv", "_Z" + "N1a".repeat(5000) + "E", "_Z\u0000x"]
  ) {
    const out = demangle(name);
    assert.equal(typeof out, "string");
    assert.ok(out === name || out.length > 0);
  }
  assert.equal(demangle("_Zfoo"), "_Zfoo");
  // A seeded stream of random mangled-looking names.
  let seed = 7;
  const next = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0);
  const alphabet = "NEIZSTRvicdlmKPR_0123456789abcxyzCDL";
  for (let i = 0; i < 3000; i++) {
    let name = next() % 2 === 0 ? "_Z" : "_R";
    const length = next() % 40;
    for (let j = 0; j < length; j++) name += alphabet[next() % alphabet.length];
    assert.equal(typeof demangle(name), "string");
  }
});
