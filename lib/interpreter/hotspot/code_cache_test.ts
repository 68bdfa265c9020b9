import assert from "node:assert/strict";
import { ElfFile } from "../../elf/elf_file.ts";
import { delay } from "../../sys/timer.ts";
import { optional, requiring } from "../../testing/requirements.ts";
import { RemoteMemory } from "../remote_memory.ts";
import { codeBlobsOf, codeCacheLayout, findCodeBlob, readCodeBlob, readCodeHeaps } from "./code_cache.ts";
import { readJdkVersion } from "./jdk_version.ts";
import { javaMethodLayout, readJavaMethod } from "./java_method.ts";
import { clhsdb, installedJdks, startJvm, type TestJdk } from "./test_jvm.ts";
import { VmStructs, vmStructsSymbols } from "./vm_structs.ts";

/** Most compiled methods compared with the debugger (each `findpc` takes it a few milliseconds). */
const COMPARED = 60;

/** What the JDK's debugger says of the code at each of `pcs`: `findpc ADDRESS`, one line each. */
async function findpc(jdk: TestJdk, pid: number, pcs: number[]): Promise<string[]> {
  const text = await clhsdb(jdk, pid, pcs.map((pc) => `findpc 0x${pc.toString(16)}`));
  return text.split("\n").filter((line) => line.includes("Address 0x"));
}

const jdks = installedJdks();

for (const jdk of jdks) {
  Deno.test(requiring([], {
    name:
      `the code cache of a JDK ${jdk.release} JVM: every blob found from its pcs, compiled methods as its debugger sees them`,
    async fn() {
      await using jvm = await startJvm("Chain", ["30"], { jdk });
      await delay(1000); // let the compilers fill the cache
      // Stopped, the JVM frees and moves no code between this reading and the debugger's.
      Deno.kill(jvm.pid, "SIGSTOP");
      using elf = ElfFile.open(jvm.libjvm);
      using memory = RemoteMemory.open(jvm.pid, { cachePages: 256 });
      const vm = VmStructs.read(memory, vmStructsSymbols(elf)!, jvm.bias);
      const layout = codeCacheLayout(vm);
      const methods = javaMethodLayout(vm, readJdkVersion(memory, vm, jvm.bias));
      const heaps = readCodeHeaps(memory, layout, jvm.bias);
      assert.ok(heaps.length >= 1);

      // The blobs by their blocks' lengths; each found again through the segment map from its first,
      // middle and last byte of code, and its header's byte before the code.
      const kinds = new Map<string, number>();
      const compiled: { pc: number; blob: ReturnType<typeof readCodeBlob> }[] = [];
      for (const heap of heaps) {
        for (const address of codeBlobsOf(memory, layout, heap)) {
          const blob = readCodeBlob(memory, layout, address);
          kinds.set(blob.kind, (kinds.get(blob.kind) ?? 0) + 1);
          if (blob.codeEnd === blob.codeBegin) continue;
          for (
            const pc of [blob.codeBegin, Math.floor((blob.codeBegin + blob.codeEnd) / 2), blob.codeEnd - 1]
          ) {
            assert.equal(
              findCodeBlob(memory, layout, heaps, pc),
              address,
              `${blob.name} at 0x${pc.toString(16)}`,
            );
          }
          if (blob.kind === "nmethod" && compiled.length < COMPARED) {
            compiled.push({ pc: Math.floor((blob.codeBegin + blob.codeEnd) / 2), blob });
          }
        }
      }
      console.log(`JDK ${jdk.release}: ${heaps.length} code heaps, blobs`, Object.fromEntries(kinds));
      assert.equal(kinds.get("interpreter"), 1);
      assert.ok((kinds.get("nmethod") ?? 0) > 10 && (kinds.get("stub") ?? 0) > 10);
      // Not code: before the first heap, and a heap's unused end.
      assert.equal(findCodeBlob(memory, layout, heaps, Math.min(...heaps.map((h) => h.low)) - 1), null);

      // `Address 0x...: In code in NMethod for Chain.c(D)V content: [...), code: [B, E), ... frame size: N`
      const lines = await findpc(jdk, jvm.pid, compiled.map((c) => c.pc));
      assert.equal(lines.length, compiled.length);
      compiled.forEach(({ blob }, i) => {
        const said =
          /NMethod for (\S+?)\.([^.(]+)(\(\S*) .*code: \[(0x[0-9a-f]+), (0x[0-9a-f]+)\).*frame size: (\d+)/
            .exec(lines[i]!);
        assert.ok(said, lines[i]);
        const method = readJavaMethod(memory, methods, blob.method);
        assert.deepEqual(
          [method.className, method.name, method.signature, blob.codeBegin, blob.codeEnd, blob.frameSize],
          [
            said[1]!.replaceAll("/", "."),
            said[2],
            said[3],
            Number(said[4]),
            Number(said[5]),
            Number(said[6]),
          ],
          lines[i],
        );
      });
    },
  }));
}
if (jdks.length === 0) {
  Deno.test(requiring([optional("no JDK with java and jhsdb under /usr/lib/jvm")], {
    name:
      "the code cache of a JVM: every blob found from its pcs, compiled methods as its debugger sees them",
    fn: () => {
      throw new Error("unreachable: ignored without a JDK");
    },
  }));
}
