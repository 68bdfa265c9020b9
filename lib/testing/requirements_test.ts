import assert from "node:assert/strict";
import {
  bootstrapped,
  optional,
  programs,
  type Requirement,
  requiring,
  type SkipRecord,
} from "./requirements.ts";

/** Runs `body` with the environment variables `values` set (undefined: unset), then restores them. */
function withEnv<T>(values: Record<string, string | undefined>, body: () => T): T {
  const saved = Object.fromEntries(Object.keys(values).map((key) => [key, Deno.env.get(key)]));
  const apply = (entries: Record<string, string | undefined>) => {
    for (const [key, value] of Object.entries(entries)) {
      if (value === undefined) Deno.env.delete(key);
      else Deno.env.set(key, value);
    }
  };
  apply(values);
  try {
    return body();
  } finally {
    apply(saved);
  }
}

/** The definitions `requiring` gives, and what it appended to the skip log. */
function register(ci: boolean, ...requirements: Requirement[]) {
  const log = Deno.makeTempFileSync({ prefix: "omniprof-skips-" });
  try {
    const definition = withEnv(
      { CI: ci ? "true" : undefined, OMNIPROF_SKIP_LOG: log },
      () => requiring(requirements, { name: "a test", fn: () => {} }),
    );
    const records = Deno.readTextFileSync(log).split("\n").filter((line) => line !== "")
      .map((line) => JSON.parse(line) as SkipRecord);
    return { definition, records };
  } finally {
    Deno.removeSync(log);
  }
}

Deno.test("requiring() registers a test whose requirements are met as it is, and records nothing", () => {
  for (const ci of [false, true]) {
    const { definition, records } = register(ci, bootstrapped(null), optional(null));
    assert.equal(definition.ignore, undefined);
    assert.deepEqual(records, []);
  }
});

Deno.test("requiring() skips for a missing optional requirement, with every reason recorded, under CI too", () => {
  for (const ci of [false, true]) {
    const { definition, records } = register(ci, optional("no JDK"), optional(null), optional("no rustc"));
    assert.equal(definition.ignore, true);
    assert.deepEqual(records, [{ name: "a test", reason: "no JDK; no rustc", bootstrapped: false }]);
  }
});

Deno.test("requiring() skips for a missing bootstrapped requirement, and fails instead under CI=true", () => {
  const skipped = register(false, bootstrapped("not on PATH: clang"));
  assert.equal(skipped.definition.ignore, true);
  assert.deepEqual(skipped.records, [{ name: "a test", reason: "not on PATH: clang", bootstrapped: true }]);

  const failing = register(true, optional("no JDK"), bootstrapped("not on PATH: clang"));
  assert.equal(failing.definition.ignore, undefined);
  assert.deepEqual(failing.records, []);
  assert.throws(
    () => failing.definition.fn(undefined as unknown as Deno.TestContext),
    /no JDK; not on PATH: clang/,
  );
});

Deno.test("programs() classifies a missing program by whether bootstrap installs it", () => {
  const dir = Deno.makeTempDirSync({ prefix: "omniprof-path-" });
  try {
    Deno.writeTextFileSync(`${dir}/gcc`, "#!/bin/sh\n", { mode: 0o755 });
    Deno.writeTextFileSync(`${dir}/rustc`, "not executable\n", { mode: 0o644 });
    withEnv({ PATH: dir }, () => {
      assert.deepEqual(programs("gcc"), optional(null));
      assert.deepEqual(programs("gcc", "rustc"), optional("not on PATH: rustc"));
      assert.deepEqual(programs("rustc", "clang"), bootstrapped("not on PATH: rustc, clang"));
    });
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
