import assert from "node:assert/strict";
import { ElfFile } from "../../elf/elf_file.ts";
import { optional, requiring } from "../../testing/requirements.ts";
import { RemoteMemory } from "../remote_memory.ts";
import { codeCacheLayout, readCodeBlob } from "./code_cache.ts";
import { compiledScopesLayout, readCompiledScopes, scopesAt } from "./compiled_scopes.ts";
import { readJdkVersion } from "./jdk_version.ts";
import { javaMethodLayout, lineAt, readJavaMethod } from "./java_method.ts";
import { installedJdks, startJvm } from "./test_jvm.ts";
import { VmStructs, vmStructsSymbols } from "./vm_structs.ts";

/** One method the JVM printed: where it is, its compile id, and its annotated scopes by chunk address. */
interface PrintedMethod {
  compiler: string;
  compileId: number;
  address: number;
  codeBegin: number;
  /** Chunk address -> `Class::method@bci (line n)`, innermost first. */
  scopes: Map<number, string[]>;
}

/**
 * Parses what `-XX:CompileCommand=print,...` writes for each compiled method: `Compiled method (c2) TIME ID
 * ...`, `total in heap [START, END]` (the nmethod's address), `main code [BEGIN, ...]`, then code chunks
 * `0xADDRESS: ;` followed by the scopes of the first PcDesc after the chunk's start, as
 * `; - Class::method@bci (line n)` lines.
 */
function parsePrint(text: string): PrintedMethod[] {
  const methods: PrintedMethod[] = [];
  let method: PrintedMethod | null = null;
  let chunk: string[] | null = null;
  for (const line of text.split("\n")) {
    const header = /^Compiled method \((c1|c2)\)\s+\d+\s+(\d+)/.exec(line);
    if (header) {
      method = {
        compiler: header[1]!,
        compileId: Number(header[2]),
        address: 0,
        codeBegin: 0,
        scopes: new Map(),
      };
      methods.push(method);
      chunk = null;
      continue;
    }
    if (method === null) continue;
    const heap = /^ total in heap\s+\[(0x[0-9a-f]+),/.exec(line);
    if (heap) method.address = Number(heap[1]);
    const code = /^ main code\s+\[(0x[0-9a-f]+),/.exec(line);
    if (code) method.codeBegin = Number(code[1]);
    const start = /^\s+(0x[0-9a-f]+): ;/.exec(line);
    if (start) {
      chunk = [];
      method.scopes.set(Number(start[1]), chunk);
    }
    const scope = /; - (?:\(reexecute\) )?(\S+::\S+@-?\d+ \(line \d+\))/.exec(line);
    if (scope && chunk) chunk.push(scope[1]!);
  }
  return methods;
}

const jdks = installedJdks();

for (const jdk of jdks) {
  Deno.test(requiring([], {
    name: `scopesAt expands a JDK ${jdk.release} compiled method's inlined calls as the JVM prints them`,
    async fn() {
      await using jvm = await startJvm("Inline", [], {
        jdk,
        javaOptions: [
          "-XX:CompileCommand=quiet",
          "-XX:CompileCommand=print,Inline::c",
          "-XX:CompileCommand=dontinline,Inline::leaf",
        ],
      });
      // Until C2 printed its code of c, not for on-stack replacement (`Inline::c (35 bytes)`, no `@`).
      const output = await jvm.readOutput(
        (text) => /^Compiled method \(c2\).*Inline::c \(\d+ bytes\)[\s\S]*\[\/MachCode\]/m.test(text),
        20_000,
      );
      Deno.kill(jvm.pid, "SIGSTOP"); // no code freed or moved while it is read
      using elf = ElfFile.open(jvm.libjvm);
      using memory = RemoteMemory.open(jvm.pid, { cachePages: 256 });
      const vm = VmStructs.read(memory, vmStructsSymbols(elf)!, jvm.bias);
      const version = readJdkVersion(memory, vm, jvm.bias);
      const methods = javaMethodLayout(vm, version);
      const blobs = codeCacheLayout(vm);
      const layout = compiledScopesLayout(vm);

      let compared = 0;
      let deepest = 0;
      const compilers = new Set<string>();
      for (const printed of parsePrint(output)) {
        const blob = readCodeBlob(memory, blobs, printed.address);
        // A method made not entrant may have been freed since, and its space reused.
        if (blob.kind !== "nmethod" || blob.compileId !== printed.compileId) continue;
        assert.equal(blob.codeBegin, printed.codeBegin);
        const scopes = readCompiledScopes(memory, layout, blob);
        for (const [address, expected] of printed.scopes) {
          if (expected.length === 0) continue;
          // The JVM prints, at a chunk's start, the scopes of the first PcDesc after it.
          const frames = scopesAt(scopes, address + 1 - blob.codeBegin, methods.unsigned5Excluded);
          const named = frames.map(({ method, bci }) => {
            const m = readJavaMethod(memory, methods, method);
            return `${m.className}::${m.name}@${bci} (line ${lineAt(m, Math.max(bci, 0))})`;
          });
          assert.deepEqual(
            named,
            expected,
            `${printed.compiler} ${printed.compileId} at 0x${address.toString(16)}`,
          );
          compared++;
          deepest = Math.max(deepest, frames.length);
          compilers.add(printed.compiler);
        }
      }
      console.log(
        `JDK ${jdk.release}: ${compared} annotated pcs of ${
          [...compilers].join(" and ")
        } code, up to ${deepest} deep`,
      );
      assert.ok(compared >= 10, `${compared} pcs compared`);
      // The call of leaf in step, inlined into mix, inlined into c.
      assert.ok(deepest >= 3, `inlining ${deepest} deep`);
      assert.ok(compilers.has("c2"));
    },
  }));
}
if (jdks.length === 0) {
  Deno.test(requiring([optional("no JDK with java and jhsdb under /usr/lib/jvm")], {
    name: "scopesAt expands a compiled method's inlined calls as the JVM prints them",
    fn: () => {
      throw new Error("unreachable: ignored without a JDK");
    },
  }));
}
