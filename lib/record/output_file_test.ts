import assert from "node:assert/strict";
import { checkWritable, writeAtomically } from "./output_file.ts";

Deno.test("writeAtomically() replaces the file and leaves no temporary behind", () => {
  const dir = Deno.makeTempDirSync();
  try {
    const path = `${dir}/profile.folded`;
    Deno.writeTextFileSync(path, "old");
    checkWritable(path);
    writeAtomically(path, "new");
    assert.equal(Deno.readTextFileSync(path), "new");
    assert.deepEqual([...Deno.readDirSync(dir)].map((entry) => entry.name), ["profile.folded"]);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("checkWritable() names the problem", () => {
  const dir = Deno.makeTempDirSync();
  try {
    assert.throws(() => checkWritable(`${dir}/missing/x.pb.gz`), /does not exist/);
    assert.throws(() => checkWritable(dir), /is a directory/);
    assert.deepEqual([...Deno.readDirSync(dir)], []);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
