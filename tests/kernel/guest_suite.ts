/**
 * The BPF test suite that runs inside a qemu guest (`deno task test-kernel VERSION` bundles it with the
 * program and boots it): runs every check of guest_checks.ts in order and prints one marker line per
 * check on the console (kernels/console_markers.ts), then the END marker. Exits 1 when a check failed.
 *
 * It runs on any machine as root too, which is the quick way to try a new check before booting kernels:
 *
 *   deno run -A build.ts --bundle /tmp/omniprof.js
 *   gcc -O2 -fno-omit-frame-pointer tests/workloads/chain.c -o /tmp/chain
 *   deno run -A tests/kernel/guest_suite.ts --omniprof /tmp/omniprof.js --workloads /tmp
 *
 * Usage: guest_suite.ts --omniprof BUNDLE --workloads DIR [--only NAME,...]
 *
 * @module
 */
import { parseArgs } from "node:util";
import { bpfObjectBytes } from "../../support/embedded/bpf_object.ts";
import { detailMarkers, endMarker, testMarker } from "../../kernels/console_markers.ts";
import { bpfObjectContents } from "./bpf_object_contents.ts";
import { LibbpfError } from "../../lib/bpf/libbpf.ts";
import {
  CheckFailure,
  CheckSkipped,
  type CliRun,
  focusLog,
  guestChecks,
  type SuiteContext,
} from "./guest_checks.ts";
import { runSamplingSession, type SamplingSession } from "./sampling_session.ts";

const CLI_TIMEOUT_MS = 180_000;

async function runCli(bundle: string, args: string[], timeoutMs = CLI_TIMEOUT_MS): Promise<CliRun> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", bundle, ...args],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  try {
    const output = await child.output();
    const decoder = new TextDecoder();
    return {
      code: output.code,
      stdout: decoder.decode(output.stdout),
      stderr: decoder.decode(output.stderr),
    };
  } finally {
    clearTimeout(timer);
  }
}

/** Runs the checks, printing markers; returns the number of failures. */
export async function runSuite(context: SuiteContext, only: string[] = []): Promise<number> {
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  const checks = guestChecks(context).filter((check) =>
    only.length === 0 || only.some((name) => check.name === name || check.name.startsWith(`${name}:`))
  );
  for (const check of checks) {
    const started = performance.now();
    const took = () => `[${((performance.now() - started) / 1000).toFixed(1)} s]`;
    try {
      const detail = await check.run(context);
      console.log(testMarker(check.name, "PASS", `${detail} ${took()}`));
      passed++;
    } catch (error) {
      if (error instanceof CheckSkipped) {
        console.log(testMarker(check.name, "SKIP", error.message));
        skipped++;
        continue;
      }
      failed++;
      const message = error instanceof Error ? error.message : String(error);
      console.log(testMarker(check.name, "FAIL", `${message.split("\n")[0]} ${took()}`));
      const log = error instanceof CheckFailure
        ? error.log
        : error instanceof LibbpfError
        ? focusLog(error.log)
        : (error instanceof Error ? error.stack ?? message : message).split("\n");
      for (const line of detailMarkers(check.name, log.join("\n"))) console.log(line);
    }
  }
  console.log(endMarker(passed, failed, skipped));
  return failed;
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      omniprof: { type: "string" },
      workloads: { type: "string" },
      only: { type: "string" },
    },
  });
  if (!values.omniprof || !values.workloads) {
    console.error("Usage: guest_suite.ts --omniprof BUNDLE --workloads DIR [--only NAME,...]");
    Deno.exit(2);
  }
  const bundle = values.omniprof;
  const workloads = values.workloads;
  let session: Promise<SamplingSession> | undefined;
  const context: SuiteContext = {
    objectBytes: bpfObjectBytes,
    contents: bpfObjectContents(bpfObjectBytes),
    workloads,
    runCli: (args, timeoutMs) => runCli(bundle, args, timeoutMs),
    session: () => session ??= runSamplingSession(`${workloads}/chain`, ["1.5"]),
  };
  const failed = await runSuite(context, values.only?.split(",") ?? []);
  Deno.exit(failed > 0 ? 1 : 0);
}
