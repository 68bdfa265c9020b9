// A chain of plain JavaScript functions for Node.js, unwound without flags: jsRun, called again and again
// from the event loop, calls jsOuter, which calls jsMiddle, jsInner and jsLeaf, where the CPU time goes.
// They run hot enough for TurboFan to compile them with their callees inlined; each runs in whatever tier V8
// picks. (The top level only starts jsRun: a hot loop there would run as on-stack-replaced code, which a
// function's own code object does not describe.) Each line a call or the loop is on ends with a marker
// comment that tests read back (`@line NAME`).
// Prints `ready PID`, spins until SECONDS of CPU time have passed, then prints `cpu_seconds=S`.
// Usage: node v8_chain.js SECONDS
"use strict";

function jsLeaf(n) {
  let x = 0;
  for (let i = 0; i < n; i++) x = (x * 31 + i) % 1000003; // @line jsLeaf
  return x;
}

function jsInner(n) {
  return jsLeaf(n) + 1; // @line jsInner
}

function jsMiddle(n) {
  return jsInner(n) + 1; // @line jsMiddle
}

function jsOuter(n) {
  let sum = 0;
  for (let i = 0; i < 50; i++) sum += jsMiddle(n); // @line jsOuter
  return sum;
}

function cpuSeconds() {
  const used = process.cpuUsage();
  return (used.user + used.system) / 1e6;
}

const seconds = Number(process.argv[2] ?? "5");
let total = 0;

function jsRun() {
  for (let i = 0; i < 20; i++) total += jsOuter(400); // @line jsRun
  if (cpuSeconds() < seconds) {
    setImmediate(jsRun);
  } else {
    console.log(`cpu_seconds=${cpuSeconds().toFixed(3)}`);
    if (total < 0) console.log(total);
  }
}

console.log(`ready ${process.pid}`);
setImmediate(jsRun);
