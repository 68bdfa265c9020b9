// A chain of named JavaScript functions for Node.js: the top level calls chainAlpha, which calls
// chainBravo, chainCharlie and chainLeaf, where the CPU time goes. Each function is called often, so V8
// compiles each one to machine code in anonymous memory; run with --perf-basic-prof, it names that code
// in /tmp/perf-PID.map. Prints `ready PID`, spins until SECONDS of CPU time have passed (the clock the
// native workloads run against, tests/workloads/clock.h), then prints `cpu_seconds=S`.
// Usage: node [--perf-basic-prof ...] perf_map_chain.js SECONDS
"use strict";

function chainLeaf(n) {
  let x = 0;
  for (let i = 0; i < n; i++) x = (x * 31 + i) % 1000003;
  return x;
}

function chainCharlie(n) {
  return chainLeaf(n) + 1;
}

function chainBravo(n) {
  return chainCharlie(n) + 1;
}

function chainAlpha(n) {
  return chainBravo(n) + 1;
}

function cpuSeconds() {
  const used = process.cpuUsage();
  return (used.user + used.system) / 1e6;
}

const seconds = Number(process.argv[2] ?? "5");
console.log(`ready ${process.pid}`);
let sum = 0;
while (cpuSeconds() < seconds) {
  for (let i = 0; i < 100; i++) sum += chainAlpha(2000);
}
console.log(`cpu_seconds=${cpuSeconds().toFixed(3)}`);
if (sum < 0) console.log(sum);
