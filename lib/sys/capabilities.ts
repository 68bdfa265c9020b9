/**
 * What the current process may do with BPF and perf events, from its effective capability set
 * (/proc/self/status CapEff). Loading the tracer needs CAP_BPF and CAP_PERFMON (kernel 5.8+), or
 * CAP_SYS_ADMIN, which implies both; reading other processes' mappings and files needs root's file
 * access (CAP_SYS_PTRACE / CAP_DAC_READ_SEARCH), which root has.
 *
 * @example
 * ```ts
 * import { parseCapabilities, missingTracingCapabilities } from "./capabilities.ts";
 * import assert from "node:assert/strict";
 * const caps = parseCapabilities("Name:\tx\nCapEff:\t000001ffffffffff\n");
 * assert.deepEqual(missingTracingCapabilities(caps), []);
 * ```
 *
 * @module
 */

/** Lets a process drop capabilities from its bounding set (what the tests do to run without some). */
export const CAP_SETPCAP = 8;
export const CAP_SYS_ADMIN = 21;
export const CAP_SYS_PTRACE = 19;
export const CAP_PERFMON = 38;
export const CAP_BPF = 39;

/** An effective capability set. */
export interface Capabilities {
  has(capability: number): boolean;
}

/** Reads CapEff from the text of /proc/PID/status. */
export function parseCapabilities(status: string): Capabilities {
  const match = /^CapEff:\s*([0-9a-fA-F]+)$/m.exec(status);
  if (!match) throw new RangeError("Cannot read capabilities: no CapEff line in the status file");
  const hex = match[1]!;
  // Two halves keep this exact without BigInt.
  const low = parseInt(hex.slice(-8), 16);
  const high = hex.length > 8 ? parseInt(hex.slice(0, -8), 16) : 0;
  return {
    has: (capability) =>
      capability < 32 ? ((low >>> capability) & 1) === 1 : ((high >>> (capability - 32)) & 1) === 1,
  };
}

/** The capabilities of this process. */
export function currentCapabilities(): Capabilities {
  return parseCapabilities(Deno.readTextFileSync("/proc/self/status"));
}

/** Names of the capabilities missing for tracing, empty when all is well. */
export function missingTracingCapabilities(caps: Capabilities): string[] {
  if (caps.has(CAP_SYS_ADMIN)) return [];
  const missing: string[] = [];
  if (!caps.has(CAP_BPF)) missing.push("CAP_BPF");
  if (!caps.has(CAP_PERFMON)) missing.push("CAP_PERFMON");
  return missing;
}
