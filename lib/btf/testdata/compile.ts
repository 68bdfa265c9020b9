/**
 * Test helpers that build the C fixtures beside this file at test time: BPF objects reduced to their `.BTF`
 * section, and host programs. Nothing compiled is checked in.
 *
 * @module
 */

import { VMLINUX_BTF_PATH } from "../kernel_btf.ts";
import { isFile } from "../../sys/files.ts";
import { bootstrapped, type Requirement } from "../../testing/requirements.ts";

/** Directory holding the C fixtures. */
export const TESTDATA_DIR = new URL(".", import.meta.url).pathname;

/** Runs `cmd` and returns its stdout; throws with its stderr when it fails. */
export async function run(cmd: string, args: string[], stdin?: string): Promise<string> {
  const child = new Deno.Command(cmd, {
    args,
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(stdin));
    await writer.close();
  }
  const out = await child.output();
  const decoder = new TextDecoder();
  if (!out.success) {
    throw new Error(`${cmd} ${args.join(" ")} failed (${out.code}): ${decoder.decode(out.stderr)}`);
  }
  return decoder.decode(out.stdout);
}

/** The running kernel's BTF, which CI's kernels have (bootstrap's machines run omniprof on them). */
export function kernelBtf(): Requirement {
  return bootstrapped(
    isFile(VMLINUX_BTF_PATH) ? null : `${VMLINUX_BTF_PATH} does not exist (kernel built without BTF)`,
  );
}

/** Runs `body` with `bytes` in a temporary file (a `.btf` name), which is removed afterwards. */
export async function withTempFile<T>(bytes: Uint8Array, body: (path: string) => T | Promise<T>): Promise<T> {
  const path = await Deno.makeTempFile({ suffix: ".btf" });
  try {
    await Deno.writeFile(path, bytes);
    return await body(path);
  } finally {
    await Deno.remove(path);
  }
}

/** Runs `body` with a fresh temporary directory that is removed afterwards. */
export async function withTempDir<T>(body: (dir: string) => Promise<T>): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "omniprof-btf-" });
  try {
    return await body(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Options for {@linkcode compileBtf}. */
export interface CompileOptions {
  /** `bpf` (little-endian, the default) or `bpfeb`. */
  readonly target?: "bpf" | "bpfeb";
  /** Link the sources as bitcode (`-emit-llvm`, `llvm-link`, `llc`) instead of compiling one source. */
  readonly linkBitcode?: boolean;
}

/** Tools {@linkcode compileBtf} needs for `options`. */
export function compileTools(options: CompileOptions = {}): string[] {
  return options.linkBitcode ? ["clang", "llvm-link", "llc", "llvm-objcopy"] : ["clang", "llvm-objcopy"];
}

/** Compiles fixture `sources` (names in this directory) to a BPF object and returns its `.BTF` section. */
export function compileBtf(sources: string[], options: CompileOptions = {}): Promise<Uint8Array> {
  const target = options.target ?? "bpf";
  return withTempDir(async (dir) => {
    const object = `${dir}/out.o`;
    if (options.linkBitcode) {
      const bitcode: string[] = [];
      for (const [i, source] of sources.entries()) {
        bitcode.push(`${dir}/${i}.bc`);
        await run("clang", [
          "-target",
          target,
          "-O2",
          "-g",
          "-emit-llvm",
          "-c",
          TESTDATA_DIR + source,
          "-o",
          `${dir}/${i}.bc`,
        ]);
      }
      await run("llvm-link", [...bitcode, "-o", `${dir}/all.bc`]);
      await run("llc", [`-march=${target}`, "-mcpu=v2", "-filetype=obj", `${dir}/all.bc`, "-o", object]);
    } else {
      if (sources.length !== 1) throw new Error("compileBtf compiles one source unless linking bitcode");
      await run("clang", ["-target", target, "-O2", "-g", "-c", TESTDATA_DIR + sources[0], "-o", object]);
    }
    await run("llvm-objcopy", [`--dump-section=.BTF=${dir}/out.btf`, object]);
    return await Deno.readFile(`${dir}/out.btf`);
  });
}

/** Compiles and runs the host program `source` with gcc, returning what it prints. */
export function runHostProgram(source: string): Promise<string> {
  return withTempDir(async (dir) => {
    await run("gcc", ["-O0", "-Wall", "-o", `${dir}/host`, TESTDATA_DIR + source]);
    return await run(`${dir}/host`, []);
  });
}

/** The major version of the clang on PATH. */
export async function clangMajorVersion(): Promise<number> {
  const match = /clang version (\d+)/.exec(await run("clang", ["--version"]));
  if (match === null) throw new Error("Cannot read the clang version");
  return Number(match[1]);
}
