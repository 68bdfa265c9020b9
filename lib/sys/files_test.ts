import assert from "node:assert/strict";
import { isFile } from "./files.ts";

Deno.test("isFile() is true for a regular file, false for a folder or a missing path", () => {
  const dir = Deno.makeTempDirSync();
  try {
    Deno.writeTextFileSync(`${dir}/f`, "x");
    Deno.symlinkSync(`${dir}/f`, `${dir}/link`);
    assert.equal(isFile(`${dir}/f`), true);
    assert.equal(isFile(`${dir}/link`), true);
    assert.equal(isFile(dir), false);
    assert.equal(isFile(`${dir}/missing`), false);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
