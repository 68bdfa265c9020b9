// JavaScript -> C -> JavaScript through a Node-API addon (tests/workloads/napi_addon.c): jsCaller calls the
// addon's callBack, whose C function addon_call_back calls jsCallback, where the CPU time goes.
// Prints `ready PID`, spins until SECONDS of CPU time have passed. Usage: node napi_chain.js ADDON SECONDS
"use strict";
const addon = require(process.argv[2]);

function jsCallback(n) {
  let x = 0;
  for (let i = 0; i < n; i++) x = (x * 31 + i) % 1000003;
  return x;
}

function jsCaller(n) {
  return addon.callBack(jsCallback, n);
}

function cpuSeconds() {
  const used = process.cpuUsage();
  return (used.user + used.system) / 1e6;
}

const seconds = Number(process.argv[3] ?? "5");
let total = 0;

function jsRun() {
  for (let i = 0; i < 200; i++) total += jsCaller(2000);
  if (cpuSeconds() < seconds) setImmediate(jsRun);
  else if (total < 0) console.log(total);
}

console.log(`ready ${process.pid}`);
setImmediate(jsRun);
