#!/usr/bin/node
// Benchmark workload: a 20-frame JavaScript stack, the module's top level -> main -> level x 17 -> burn,
// where burn spins in JavaScript. Run as an executable named node_bench (its thread name), by node without
// flags. Usage: deep.js SECONDS
"use strict";

function burn(end) {
  let n = 0;
  while (performance.now() < end) {
    for (let i = 0; i < 20000; i++) n = (n + i) % 1000003;
  }
  return n;
}

function level(depth, end) {
  if (depth === 0) return burn(end);
  return level(depth - 1, end) + 1;
}

function main() {
  const seconds = Number(process.argv[2] ?? "10");
  return level(16, performance.now() + seconds * 1000);
}

main();
