import assert from "node:assert/strict";
import { KERNEL_CONFIG_FRAGMENT, missingOptions } from "./build_kernel.ts";
import { optional, requiring } from "../lib/testing/requirements.ts";

Deno.test("missingOptions() names fragment options that olddefconfig did not keep", () => {
  const config = [
    "CONFIG_64BIT=y",
    "CONFIG_BPF=y",
    "# CONFIG_BPF_SYSCALL is not set",
    "CONFIG_PVH=y",
  ].join("\n");
  const fragment = "CONFIG_64BIT=y\nCONFIG_BPF=y\nCONFIG_BPF_SYSCALL=y\nCONFIG_PVH=y\nCONFIG_DEBUG_INFO=y\n";
  // DEBUG_INFO is a choice on newer lines, so its absence is tolerated.
  assert.deepEqual(missingOptions(fragment, config), ["CONFIG_BPF_SYSCALL"]);
  assert.ok(missingOptions(KERNEL_CONFIG_FRAGMENT, "").includes("CONFIG_DEBUG_INFO_BTF"));
});

// A configuration written by `deno task build-kernel X --config-only`, when one is there: every option of
// the fragment survived olddefconfig on a real kernel tree.
const buildRoot = new URL("./cache/build/", import.meta.url).pathname;
const configs: string[] = [];
try {
  for (const line of Deno.readDirSync(buildRoot)) {
    const config = `${buildRoot}${line.name}/linux-source-${line.name}/.config`;
    try {
      if (Deno.statSync(config).isFile) configs.push(config);
    } catch {
      // not configured yet
    }
  }
} catch {
  // no build folder
}
const configured = optional(
  configs.length > 0 ? null : "no kernel configured (deno task build-kernel 6.1 --config-only makes one)",
);
Deno.test(requiring([configured], {
  name: "a .config written by build-kernel keeps every option of the fragment",
  fn() {
    for (const config of configs) {
      assert.deepEqual(missingOptions(KERNEL_CONFIG_FRAGMENT, Deno.readTextFileSync(config)), [], config);
    }
  },
}));
