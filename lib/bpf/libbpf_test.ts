import assert from "node:assert/strict";
import { libbpf, LibbpfMissingError } from "./libbpf.ts";

Deno.test("libbpf() refuses a library without one of its functions, though it binds them on first use", () => {
  // The C library loads, but holds none of libbpf's functions.
  Deno.env.set("OMNIPROF_LIBBPF", "libc.so.6");
  try {
    assert.throws(() => libbpf(), (error) => {
      assert.ok(error instanceof LibbpfMissingError);
      assert.match(
        error.message,
        /Cannot load libbpf \(libc\.so\.6\): .*undefined symbol: bpf_object__open_mem/,
      );
      return true;
    });
  } finally {
    Deno.env.delete("OMNIPROF_LIBBPF");
  }
});
