// JavaScript functions whose machine code V8 describes, lines included, in the jitdump it writes with
// --perf-prof (jit-PID.dump in its working directory): the top level calls lineOuter, which calls
// lineMiddle, which calls lineLeaf, where the CPU time goes in a loop of several statements. Spins until
// SECONDS of CPU time have passed, writes its /proc/self/maps to MAPS_OUT (the test tells JIT code from
// files by it), then prints `cpu_seconds=S`.
// Usage: deno run -A --v8-flags=--perf-prof[,...] jitdump_lines.mjs SECONDS MAPS_OUT
import fs from "node:fs";

function lineLeaf(n) {
  let x = 0;
  let y = 1;
  for (let i = 0; i < n; i++) {
    x = (x * 31 + i) % 1000003;
    y = (y * 17 + x) % 999983;
    x ^= y & 0xff;
  }
  return x + y;
}

function lineMiddle(n) {
  return lineLeaf(n) + 1;
}

function lineOuter(n) {
  return lineMiddle(n) + 1;
}

function cpuSeconds() {
  const used = process.cpuUsage();
  return (used.user + used.system) / 1e6;
}

const seconds = Number(process.argv[2] ?? "3");
let sum = 0;
while (cpuSeconds() < seconds) {
  for (let i = 0; i < 100; i++) sum += lineOuter(2000);
}
if (process.argv[3]) fs.writeFileSync(process.argv[3], fs.readFileSync("/proc/self/maps"));
console.log(`cpu_seconds=${cpuSeconds().toFixed(3)}`);
if (sum < 0) console.log(sum);
