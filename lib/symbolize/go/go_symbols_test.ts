import assert from "node:assert/strict";
import { ElfFile } from "../../elf/elf_file.ts";
import { programs, requiring } from "../../testing/requirements.ts";
import { buildGoWorkload, installedGo, REPO_ROOT, tempDir } from "../../../tests/helpers.ts";
import { GoSymbols } from "./go_symbols.ts";

const go = [programs("go")];
const SOURCE = `${REPO_ROOT}tests/workloads/chain.go`;

/** The chain workload: b inlined into a (Go's default), or nothing inlined; stripped or not. */
function buildChain(inline: boolean, stripped: boolean, pie = false): Promise<string> {
  return buildGoWorkload("chain", {
    ...(inline ? {} : { gcflags: "-l" }),
    ...(stripped ? { ldflags: "-s -w" } : {}),
    ...(pie ? { buildmode: "pie" } : {}),
  }, `-go${inline ? "" : "-noinline"}${stripped ? "-stripped" : ""}${pie ? "-pie" : ""}`);
}

/**
 * The `.gopclntab` layout the installed Go writes, from `go env GOVERSION` and the releases Go's
 * `debug/gosym` names each layout after: 1.16-1.17 write 1.16's, 1.18-1.19 1.18's, 1.20 and later 1.20's.
 */
function layoutOfInstalledGo(): { go: string; layout: string } {
  const installed = installedGo();
  assert.ok(installed, "go env GOVERSION names a go1.N release");
  const { version: go, minor } = installed;
  assert.ok(minor >= 16, `${go} writes a layout older than the ones read`);
  return { go, layout: minor >= 20 ? "1.20" : minor >= 18 ? "1.18" : "1.16" };
}

async function goTool(...args: string[]): Promise<string> {
  const result = await new Deno.Command("go", { args: ["tool", ...args], stdout: "piped", stderr: "piped" })
    .output();
  if (!result.success) throw new Error(`go tool ${args[0]}: ${new TextDecoder().decode(result.stderr)}`);
  return new TextDecoder().decode(result.stdout);
}

/** The linker's markers of the start and end of the code, which `go tool nm` lists beside the functions. */
const TEXT_MARKERS = ["runtime.etext", "runtime.text"];

/** The text symbols `go tool nm` lists in `binary`. */
async function nmSymbols(binary: string): Promise<{ name: string; address: number }[]> {
  const symbols: { name: string; address: number }[] = [];
  for (const line of (await goTool("nm", binary)).split("\n")) {
    const match = /^\s*([0-9a-f]+) ([Tt]) (.+)$/.exec(line);
    if (match) symbols.push({ name: match[3]!, address: parseInt(match[1]!, 16) });
  }
  return symbols;
}

/**
 * The functions whose text symbols `go tool nm` lists in `binary`, as `name@address`, each named as Go's
 * own reader of the function table (`go tool addr2line`, which is `debug/gosym`) names the function: the
 * linker writes a name into the symbol table and into the function table differently, and differently
 * from one release to the next (the symbol table spells `·` as `.`; Go 1.18 and 1.19 elide type arguments
 * to `[...]` in the function table, Go 1.24 writes them whole). The names are learned from `namedBy`, a
 * build of the same program that is no PIE when `binary` is one: Go 1.19's addr2line does not find a
 * PIE's table. The markers are left out; `markers` gives those nm listed.
 */
async function nmText(
  binary: string,
  namedBy = binary,
): Promise<{ functions: Set<string>; markers: string[] }> {
  const functionsOf = async (file: string) =>
    (await nmSymbols(file)).filter((s) => !TEXT_MARKERS.includes(s.name));
  const named = await functionsOf(namedBy);
  const tableName = new Map<string, string>();
  for (const [i, name] of (await tableNames(namedBy, named.map((s) => s.address))).entries()) {
    const symbol = named[i]!.name;
    assert.ok((tableName.get(symbol) ?? name) === name, `${symbol} stands for one function name`);
    tableName.set(symbol, name);
  }
  const symbols = await nmSymbols(binary);
  const markers = symbols.filter((s) => TEXT_MARKERS.includes(s.name)).map((s) => s.name).sort();
  const functions = new Set<string>();
  for (const { name, address } of symbols) {
    if (TEXT_MARKERS.includes(name)) continue;
    assert.ok(tableName.has(name), `${name} is a function of ${namedBy} too`);
    functions.add(`${tableName.get(name)}@${address}`);
  }
  return { functions, markers };
}

/** The name `go tool addr2line` gives the function at each of `addresses` ("?" where there is none). */
async function tableNames(binary: string, addresses: number[]): Promise<string[]> {
  if (addresses.length === 0) return [];
  const child = new Deno.Command("go", {
    args: ["tool", "addr2line", binary],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(addresses.map((a) => `0x${a.toString(16)}\n`).join("")));
  await writer.close();
  const result = await child.output();
  if (!result.success) throw new Error(`go tool addr2line: ${new TextDecoder().decode(result.stderr)}`);
  // Two lines an address: the function's name, then file:line.
  const lines = new TextDecoder().decode(result.stdout).split("\n");
  assert.ok(lines.length >= 2 * addresses.length, "go tool addr2line answered every address");
  return addresses.map((_, i) => lines[2 * i]!);
}

/** Every instruction of the functions `pattern` matches, as `go tool objdump` gives it. */
interface Instruction {
  address: number;
  /** `file:line` as objdump prints it (the file's base name). */
  position: string;
  text: string;
}

async function objdump(binary: string, pattern?: string): Promise<Instruction[]> {
  const out: Instruction[] = [];
  const args = pattern === undefined ? [binary] : ["-s", pattern, binary];
  for (const line of (await goTool("objdump", ...args)).split("\n")) {
    const match = /^\s+(\S+:\d+)\s+0x([0-9a-f]+)\s+\S+\s+(.*)$/.exec(line);
    if (match) out.push({ position: match[1]!, address: parseInt(match[2]!, 16), text: match[3]!.trim() });
  }
  return out;
}

/** The line of the workload's source that holds `text` inside function `name` (from the source itself). */
function sourceLine(name: string, text: string): number {
  const lines = Deno.readTextFileSync(SOURCE).split("\n");
  const start = lines.findIndex((line) => line.startsWith(`func ${name}(`));
  assert.ok(start >= 0, `func ${name} in ${SOURCE}`);
  const at = lines.findIndex((line, i) => i > start && line.includes(text));
  assert.ok(at > start, `${text} in func ${name}`);
  return at + 1;
}

function readSymbols(path: string): GoSymbols {
  using elf = ElfFile.open(path);
  const symbols = GoSymbols.read(elf);
  assert.ok(symbols !== null, `${path} has a .gopclntab`);
  return symbols;
}

function baseName(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}

Deno.test(requiring(go, {
  name: "GoSymbols.read() of a stripped binary lists the functions `go tool nm` lists in the unstripped one",
  async fn() {
    const { go, layout } = layoutOfInstalledGo();
    for (const inline of [true, false]) {
      const { functions: reference, markers } = await nmText(await buildChain(inline, false));
      const stripped = await buildChain(inline, true);
      assert.equal(
        (await nmText(stripped).catch(() => ({ functions: new Set() }))).functions.size,
        0,
        "the stripped build has no symbols",
      );
      const symbols = readSymbols(stripped);
      assert.equal(symbols.version, layout, `${go} writes the ${layout} layout`);
      const ours = new Set([...symbols.functions()].map((f) => `${f.name}@${f.entry}`));
      assert.ok(ours.size > 1000, `${ours.size} functions`);
      assert.deepEqual([...ours].filter((f) => !reference.has(f)), [], "functions go tool nm does not list");
      // nm also lists the linker's markers: every other text symbol is ours.
      assert.deepEqual(markers, TEXT_MARKERS);
      assert.deepEqual(
        [...reference].filter((f) => !ours.has(f)),
        [],
        "functions go tool nm lists, not ours",
      );
      const names = new Set([...ours].map((f) => f.slice(0, f.indexOf("@"))));
      for (const name of ["main.main", "main.a", "main.c"]) assert.ok(names.has(name), name);
      assert.equal(names.has("main.b"), !inline, "b is a function of its own unless inlined");
    }
  },
}));

Deno.test(requiring(go, {
  name: "GoSymbols.frames() gives every instruction the file and line `go tool objdump` gives",
  async fn() {
    for (const inline of [true, false]) {
      const instructions = await objdump(await buildChain(inline, false));
      const symbols = readSymbols(await buildChain(inline, true));
      assert.ok(instructions.length > 100_000, `${instructions.length} instructions`);
      for (const { address, position } of instructions) {
        const frames = symbols.frames(address);
        assert.ok(frames !== null && frames.length > 0, `frames at 0x${address.toString(16)}`);
        const innermost = frames[0]!;
        assert.equal(
          `${baseName(innermost.sourceFile)}:${innermost.line}`,
          position,
          `0x${address.toString(16)}`,
        );
      }
    }
  },
}));

Deno.test(requiring(go, {
  name: "GoSymbols.frames() shows b inlined into a at the call of c, with the lines of both calls",
  async fn() {
    const callB = sourceLine("a", "b(end)");
    const callC = sourceLine("b", "c(end)");
    const file = SOURCE;

    const inlined = await buildChain(true, false);
    const call = (await objdump(inlined, "^main\\.a$")).find((i) => i.text.startsWith("CALL main.c(SB)"));
    assert.ok(call, "a calls c");
    assert.deepEqual(readSymbols(await buildChain(true, true)).frames(call.address), [
      { functionName: "main.b", sourceFile: file, line: callC },
      { functionName: "main.a", sourceFile: file, line: callB },
    ]);

    const plain = await buildChain(false, false);
    const plainCall = (await objdump(plain, "^main\\.b$")).find((i) => i.text.startsWith("CALL main.c(SB)"));
    assert.ok(plainCall, "b calls c");
    assert.deepEqual(readSymbols(await buildChain(false, true)).frames(plainCall.address), [
      { functionName: "main.b", sourceFile: file, line: callC },
    ]);
  },
}));

Deno.test(requiring(go, {
  name: "GoSymbols.read() finds the table of a PIE, and of a binary without section headers by its header",
  async fn() {
    const pie = readSymbols(await buildChain(true, true, true));
    const { functions: reference } = await nmText(
      await buildChain(true, false, true),
      await buildChain(true, false),
    );
    const pieFunctions = [...pie.functions()].map((f) => `${f.name}@${f.entry}`);
    assert.ok(pieFunctions.length > 1000);
    assert.deepEqual(pieFunctions.filter((f) => !reference.has(f)), [], "functions go tool nm does not list");
    assert.ok(pie.hasInlineTrees);

    const stripped = await buildChain(true, true);
    const dir = tempDir();
    try {
      // e_shoff, e_shnum and e_shstrndx zeroed: no section headers at all.
      const bytes = Deno.readFileSync(stripped);
      bytes.fill(0, 40, 48);
      bytes.fill(0, 60, 64);
      const bare = `${dir}/bare`;
      Deno.writeFileSync(bare, bytes);
      using elf = ElfFile.open(bare);
      assert.equal(elf.sections.length, 0);
      const found = GoSymbols.read(elf);
      assert.ok(found !== null, "found by scanning");
      const withSections = readSymbols(stripped);
      assert.deepEqual([...found.functions()], [...withSections.functions()]);
      assert.ok(found.hasInlineTrees, "the module data is found in the segments");
      const a = [...withSections.functions()].find((f) => f.name === "main.a")!;
      for (let pc = a.entry; pc < a.end; pc++) assert.deepEqual(found.frames(pc), withSections.frames(pc));
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
}));

Deno.test("GoSymbols.read() gives null for a binary that is not Go", () => {
  using elf = ElfFile.open("/bin/true");
  assert.equal(GoSymbols.read(elf), null);
});

Deno.test(requiring(go, {
  name:
    "GoSymbols.functionsNamed() finds each function `go tool nm` lists by that name; codeRange spans them all",
  async fn() {
    const binary = await buildChain(false, false);
    const reference = [...(await nmText(binary)).functions].map((f) => {
      const at = f.lastIndexOf("@");
      return { name: f.slice(0, at), entry: Number(f.slice(at + 1)) };
    });
    const markers = new Map(
      (await nmSymbols(binary)).filter((s) => TEXT_MARKERS.includes(s.name)).map((s) => [s.name, s.address]),
    );
    const symbols = readSymbols(await buildChain(false, true));
    // runtime.asmcgocall is there twice: the assembly function and its wrapper for Go's register ABI.
    const names = ["main.a", "main.c", "runtime.asmcgocall", "no.such.function"];
    const found = [...symbols.functionsNamed(names)].map(({ name, entry }) => ({ name, entry }));
    const expected = reference.filter((f) => names.includes(f.name)).sort((x, y) => x.entry - y.entry);
    assert.equal(expected.filter((f) => f.name === "runtime.asmcgocall").length, 2);
    assert.deepEqual(found, expected);
    // From runtime.text to the end of the last function: runtime.etext in Go 1.19; later releases put
    // their markers (go:textfipsstart, ...) and alignment between the two.
    const range = symbols.codeRange!;
    assert.equal(range.start, markers.get("runtime.text"));
    const lastEntry = Math.max(...reference.map((f) => f.entry));
    assert.ok(range.end > lastEntry && range.end <= markers.get("runtime.etext")!, JSON.stringify(range));
  },
}));
