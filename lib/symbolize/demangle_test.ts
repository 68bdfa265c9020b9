import assert from "node:assert/strict";
import { demangle } from "./demangle.ts";
import { findLibbfd, hasGnuDemangler } from "./gnu_demangle.ts";
import { demangleRust } from "./rust_demangle.ts";
import { bootstrapped, programs, requiring } from "../testing/requirements.ts";

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
/** bootstrap installs binutils, whose libbfd holds the demangler c++filt runs. */
const gnu = bootstrapped(hasGnuDemangler() ? null : "binutils' libbfd (GNU's demangler) is not installed");

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

/**
 * Demangles every name with GNU c++filt, one line each. `-i` keeps the standard abbreviations
 * (`std::string`) and drops Rust's hashes and crate disambiguators, as demangle() does.
 */
async function cxxfilt(names: string[]): Promise<string[]> {
  return (await exec("c++filt", ["-i"], names.join("\n") + "\n")).split("\n").slice(0, names.length);
}

/** Each name whose demangled form is not c++filt's, with both, for an assertion message. */
function differences(names: string[], ours: string[], expected: string[]): string[] {
  return names.flatMap((name, i) =>
    ours[i] === expected[i] ? [] : [`${name}\n  ours:     ${ours[i]}\n  c++filt:  ${expected[i]}`]
  );
}

Deno.test(requiring([gnu], {
  name: "demangle() names C++ functions by their declarations",
  fn() {
    // The name the WASM demangler used before got wrong (`__class_type_info&::__upcast_result`).
    assert.equal(
      demangle(
        "_ZNK10__cxxabiv120__si_class_type_info11__do_upcastEPKNS_17__class_type_infoEPKvRNS1_15__upcast_resultE",
      ),
      "__cxxabiv1::__si_class_type_info::__do_upcast(__cxxabiv1::__class_type_info const*, void const*, " +
        "__cxxabiv1::__class_type_info::__upcast_result&) const",
    );
    assert.equal(
      demangle("_ZNSsC1ERKSs"),
      "std::basic_string<char, std::char_traits<char>, std::allocator<char> >::basic_string(std::string const&)",
    );
    assert.equal(demangle("_Z1fIiEvT_"), "void f<int>(int)");
    assert.equal(demangle("_Z3foov.cold"), "foo() [clone .cold]");
    assert.equal(demangle("_ZN4core3fmt5write17h0123456789abcdefE"), "core::fmt::write");
    assert.equal(demangle("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
    // Over 1024 characters GNU's demangler declines (its stack guard), as c++filt does: the name stays.
    const long = "_Z1f" + "1a".repeat(600);
    assert.equal(demangle(long), long);
    assert.equal(demangle("_Z1f" + "1a".repeat(400)), `f(${Array(400).fill("a").join(", ")})`);
  },
}));

Deno.test(requiring([gnu, programs("c++filt")], {
  name: "demangle() returns at once on names that hang libstdc++'s older copy of the demangler",
  async fn() {
    // Mutations of LLVM's names on which GCC 12's __cxa_demangle (Debian 12's libstdc++) never returns.
    // Run in a child process, so that a regression fails this test instead of hanging the suite.
    const names = [
      "_ZN4llvmlsINS_26OptimizationRemarkAnalysisEEERT_OS2_NSt9enable_ifIXsr3std10is_base_ofINS_0" +
      "DiagnosticInfoOptimizationBaseES2_EE5valueENS6_8ArgumentEE4typeE",
      "_ZN4llvm4yaml7yamlizeISt6vectorINS_15FunctionSummary10ConstVCallESaIS4_EENS0_12EmptyContextEEENSt9" +
      "enable_ifIXsr1RCanoni8has_SequenceTraitsIT_EE5valueEvE4typeERNS0_2IOERS9_bRT0_",
    ];
    const script = `import { demangle } from ${
      JSON.stringify(new URL("./demangle.ts", import.meta.url).href)
    };
      console.log(JSON.stringify(${JSON.stringify(names)}.map(demangle)));`;
    const child = new Deno.Command(Deno.execPath(), {
      args: ["eval", "--ext=ts", script],
      cwd: new URL("../..", import.meta.url).pathname, // where deno.json maps the npm imports
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(30_000),
    });
    const out = await child.output();
    assert.ok(out.success, decoder.decode(out.stderr));
    assert.deepEqual(JSON.parse(decoder.decode(out.stdout)), await cxxfilt(names));
  },
}));

Deno.test(requiring([cxxTools, gnu], {
  name: "demangle() matches c++filt -i on the C++ fixture's functions",
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

/**
 * The C++ libraries compared with c++filt: libstdc++, and LLVM's and Clang's (bootstrap installs them with
 * clang and llvm), some 70,000 names of every kind of C++ between them.
 */
const CXX_LIBRARIES = /^\s*(libstdc\+\+\.so\.6|libLLVM-[\d.]+\.so\.\d+|libclang-cpp\.so\.[\d.]+) .*=> (\S+)$/;

Deno.test(requiring([cxxTools, gnu, programs("ldconfig")], {
  name: "demangle() names every C++ function of libstdc++, LLVM and Clang as c++filt -i does",
  async fn() {
    const libraries = new Map<string, string>();
    for (const line of (await exec("ldconfig", ["-p"])).split("\n")) {
      const match = CXX_LIBRARIES.exec(line);
      if (match !== null && line.includes("x86-64")) libraries.set(match[1]!, match[2]!);
    }
    assert.ok(libraries.has("libstdc++.so.6"), "libstdc++.so.6 is not in ldconfig's cache");
    let total = 0;
    const differing: string[] = [];
    for (const [soname, path] of libraries) {
      const mangled = (await symbolNames(path, true)).filter((n) => n.startsWith("_Z"));
      const expected = await cxxfilt(mangled);
      const t0 = performance.now();
      const ours = mangled.map(demangle);
      const ms = performance.now() - t0;
      total += mangled.length;
      differing.push(...differences(mangled, ours, expected));
      console.log(
        `${soname}: ${mangled.length} names in ${ms.toFixed(0)} ms ` +
          `(${(ms * 1000 / Math.max(1, mangled.length)).toFixed(1)} µs each)`,
      );
    }
    console.log(`${total} names, ${differing.length} differ from c++filt -i`);
    assert.ok(total > 5000, `only ${total} names`);
    assert.deepEqual(differing.slice(0, 10), [], `${differing.length} names differ from c++filt -i`);
  },
}));

Deno.test(requiring([rustTools, gnu], {
  name: "demangle() reads Rust legacy and v0 symbols like c++filt -i, without the hash",
  async fn() {
    for (const [mangling, names] of await rustNames()) {
      const ours = names.map(demangle);
      const spin = names.findIndex((n) => n.includes("spin_function"));
      assert.ok(spin >= 0, `no spin_function symbol with ${mangling} mangling`);
      assert.equal(ours[spin], "omni_rust::inner::spin_function");
      const differing = differences(names, ours, await cxxfilt(names));
      console.log(`Rust ${mangling}: ${names.length} names, ${differing.length} differ from c++filt -i`);
      assert.deepEqual(differing.slice(0, 10), [], `${differing.length} names differ from c++filt -i`);
    }
  },
}));

Deno.test(requiring([rustTools], {
  name: "demangleRust(), for machines without binutils, reads Rust symbols like c++filt -i",
  async fn() {
    for (const [mangling, names] of await rustNames()) {
      const ours = names.map((name) => demangleRust(name) ?? name);
      const expected = await cxxfilt(names);
      let suffixed = 0;
      const differing: string[] = [];
      for (const [i, name] of names.entries()) {
        if (ours[i] === expected[i]) continue;
        // Accepted: LLVM numbers statics of the same name (`THREAD_INFO.2`); rustc-demangle keeps that
        // suffix of the symbol, c++filt drops it. The name is the same.
        const suffix = /\.\d+$/.exec(name)?.[0];
        if (suffix !== undefined && ours[i] === `${expected[i]}${suffix}`) suffixed++;
        else differing.push(`${name}\n  ours:     ${ours[i]}\n  c++filt:  ${expected[i]}`);
      }
      console.log(
        `Rust ${mangling}, rustc-demangle: ${names.length} names, ${differing.length} differ from c++filt -i; ` +
          `accepted: ${suffixed} with a static's .N suffix`,
      );
      assert.deepEqual(differing.slice(0, 10), [], `${differing.length} names differ from c++filt -i`);
    }
  },
}));

/** The Rust fixture's symbol names, built with each mangling (legacy and v0). */
async function rustNames(): Promise<[string, string[]][]> {
  const source = new URL("./testdata/names.rs", import.meta.url).pathname;
  const result: [string, string[]][] = [];
  for (const [mangling, flags] of [["legacy", []], ["v0", ["-C", "symbol-mangling-version=v0"]]] as const) {
    const binary = `${temp()}/names_${mangling}`;
    try {
      Deno.statSync(binary);
    } catch {
      await exec("rustc", ["-O", "--crate-name", "omni_rust", ...flags, "-o", binary, source]);
    }
    const names = (await symbolNames(binary)).filter((n) =>
      n.startsWith("_R") || /^_ZN.*17h[0-9a-f]{16}E/.test(n)
    );
    assert.ok(names.length > 100, `only ${names.length} ${mangling} names`);
    result.push([mangling, names]);
  }
  return result;
}

Deno.test("findLibbfd() picks the newest libbfd of the first library folder that has one", () => {
  const dir = Deno.makeTempDirSync({ prefix: "omniprof_libbfd_" });
  try {
    const [first, second] = [`${dir}/first`, `${dir}/second`];
    Deno.mkdirSync(first);
    Deno.mkdirSync(second);
    assert.equal(findLibbfd([first, `${dir}/missing`]), null);
    for (const name of ["libbfd-2.40-system.so", "libbfd-2.44-system.so", "libbfd-2.9.so", "libbfd.so"]) {
      Deno.writeFileSync(`${second}/${name}`, new Uint8Array());
    }
    Deno.mkdirSync(`${second}/libbfd-9.9.so`);
    assert.equal(findLibbfd([`${dir}/missing`, first, second]), `${second}/libbfd-2.44-system.so`);
    Deno.writeFileSync(`${first}/libbfd-2.38.so`, new Uint8Array());
    assert.equal(findLibbfd([first, second]), `${first}/libbfd-2.38.so`, "the loader's order first");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

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
    const name of [
      "_Zfoo",
      "_ZN",
      "_ZN3foo",
      "_R!!",
      "_RNv",
      "_Z" + "N1a".repeat(5000) + "E",
      "_Z\u0000x",
      "_Z3foov\u0000x",
    ]
  ) {
    const out = demangle(name);
    assert.equal(typeof out, "string");
    assert.ok(out === name || out.length > 0);
  }
  assert.equal(demangle("_Zfoo"), "_Zfoo");
  // C would read only up to the NUL, a valid name that is not this one.
  assert.equal(demangle("_Z3foov\u0000x"), "_Z3foov\u0000x");
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
