import assert from "node:assert/strict";
import { basename, dirname, resolve } from "node:path";
import { absolutePath, baseName, parentDir } from "./path.ts";

Deno.test("path helpers agree with node:path on the paths a user may give", () => {
  const cwd = "/home/user/work";
  for (
    const path of [
      "profile.pb.gz",
      "./out/p.folded",
      "out//a/../p.folded",
      "/tmp/p.pb.gz",
      "/tmp/",
      "/",
      "../../../../x",
      "/a/./b/../c",
      "dir/",
    ]
  ) {
    assert.equal(absolutePath(path, cwd), resolve(cwd, path), path);
    assert.equal(parentDir(path), dirname(path), path);
    assert.equal(baseName(path), basename(path), path);
  }
});

Deno.test("path helpers give usable answers for paths with repeated slashes", () => {
  assert.equal(absolutePath("//a//b/", "/c"), "/a/b");
  assert.equal(absolutePath("", "/c"), "/c");
  assert.deepEqual(["//", "//a", "a//b//", "///x/y", ""].map(parentDir), ["/", "/", "a", "///x", "."]);
  assert.deepEqual(["//", "//a", "a//b//", "///x/y", ""].map(baseName), ["", "a", "b", "y", ""]);
});
