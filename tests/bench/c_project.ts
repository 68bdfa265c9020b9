/**
 * A generated C project for the `build` workload of `deno task bench`: many short-lived compiler processes,
 * each busy long enough (cc1 a fraction of a second per file at -O2) to be sampled a few hundred times.
 * The same seed always gives the same bytes, so every tool and every run compiles the same code.
 *
 * Each module `modNN.c` defines functions that loop, branch on a `switch`, call earlier functions of the
 * same module and one function of the previous module, so that the optimizer has real work (inlining,
 * loop passes, jump tables); `main.c` calls every module's entry. The Makefile compiles each module with
 * `$(CC) $(CFLAGS) -c` and links them: its recipes hold no shell syntax, so make starts the compiler
 * directly and every process start is one make knows of.
 *
 * @example
 * ```ts ignore
 * import { writeCProject } from "./c_project.ts";
 * const project = writeCProject("/tmp/project");
 * console.log(project.modules); // 44; then: make -C /tmp/project -j2
 * ```
 *
 * @module
 */
import { prng } from "../../lib/testing/fuzz.ts";

/** What {@linkcode writeCProject} wrote. */
export interface CProject {
  dir: string;
  /** Number of `modNN.c` files (main.c not counted). */
  modules: number;
  /** Every file written, relative to `dir`, in the order written. */
  files: string[];
  /** Bytes of C source written. */
  sourceBytes: number;
}

/** Options of {@linkcode writeCProject}; the defaults give 44 modules of 26 functions each. */
export interface CProjectOptions {
  modules?: number;
  functionsPerModule?: number;
  seed?: number;
}

const pad = (n: number) => String(n).padStart(2, "0");

function moduleSource(index: number, functions: number, next: () => number): string {
  const m = pad(index);
  const pick = (n: number) => Math.floor(next() * n);
  const lines = [`#include "common.h"`, ``, `static unsigned table_${m}[64];`, ``];
  for (let f = 0; f < functions; f++) {
    const name = `m${m}_f${pad(f)}`;
    const cases = 8 + pick(9);
    const body: string[] = [
      `static long ${name}(struct state *s, long x, int depth)`,
      `{`,
      `  long acc = x ^ ${pick(100000)};`,
      `  long buf[16];`,
      `  for (int i = 0; i < 16; i++) buf[i] = (x * ${3 + pick(50)} + i * acc) ^ table_${m}[(i + ${
        pick(64)
      }) & 63];`,
      `  for (int i = 0; i < s->n; i++) {`,
      `    switch ((acc + i) % ${cases}) {`,
    ];
    for (let c = 0; c < cases; c++) {
      const op = pick(5);
      const k = 1 + pick(997);
      const expression = [
        `acc += buf[(i + ${c}) & 15] * ${k}`,
        `acc ^= (acc << ${1 + pick(7)}) + ${k}`,
        `acc -= s->v[(i * ${k}) & 31] >> ${1 + pick(5)}`,
        `buf[(i + ${k}) & 15] += acc / (${k} + (i & 7))`,
        `acc = acc * ${k} + s->v[(acc & 31)]`,
      ][op]!;
      body.push(`    case ${c}: ${expression}; break;`);
    }
    body.push(
      `    default: acc ^= i; break;`,
      `    }`,
      `    if ((acc & ${15 + pick(240)}) == ${pick(15)}) {`,
    );
    body.push(`      s->v[i & 31] ^= acc;`, `      table_${m}[acc & 63] += (unsigned)i;`, `    }`, `  }`);
    // Calls go to earlier functions only, so there is no recursion; the first calls the previous module.
    if (f > 0) {
      const callee = `m${m}_f${pad(pick(f))}`;
      body.push(`  if (depth > 0) acc += ${callee}(s, acc ^ buf[${pick(16)}], depth - 1);`);
    }
    if (f > 1) {
      const callee = `m${m}_f${pad(pick(f))}`;
      body.push(`  if (depth > 1 && (acc & 1)) acc -= ${callee}(s, acc + ${pick(1000)}, depth - 2);`);
    }
    if (f === 0 && index > 0) body.push(`  acc += module_${pad(index - 1)}(s, acc, depth - 1);`);
    body.push(`  for (int i = 0; i < 16; i++) acc += buf[i] * (i + 1);`, `  return acc;`, `}`, ``);
    lines.push(...body);
  }
  lines.push(`long module_${m}(struct state *s, long x, int depth)`, `{`, `  long acc = x;`);
  for (let f = functions - 1; f >= functions - 4 && f >= 0; f--) {
    lines.push(`  acc += m${m}_f${pad(f)}(s, acc, depth);`);
  }
  lines.push(`  return acc;`, `}`, ``);
  return lines.join("\n");
}

function headerSource(modules: number): string {
  const lines = [
    `#ifndef COMMON_H`,
    `#define COMMON_H`,
    `struct state { int n; long v[32]; };`,
  ];
  for (let i = 0; i < modules; i++) lines.push(`long module_${pad(i)}(struct state *s, long x, int depth);`);
  lines.push(`#endif`, ``);
  return lines.join("\n");
}

function mainSource(modules: number): string {
  const lines = [`#include <stdio.h>`, `#include "common.h"`, ``, `int main(void)`, `{`];
  lines.push(`  struct state s = { 64, { 0 } };`, `  long acc = 1;`);
  for (let i = 0; i < modules; i++) lines.push(`  acc += module_${pad(i)}(&s, acc, 3);`);
  lines.push(`  printf("%ld\\n", acc);`, `  return 0;`, `}`, ``);
  return lines.join("\n");
}

function makefile(modules: number): string {
  const objects = ["main.o", ...Array.from({ length: modules }, (_, i) => `mod${pad(i)}.o`)];
  return [
    `CC = gcc`,
    `CFLAGS = -O2`,
    `OBJECTS = ${objects.join(" ")}`,
    ``,
    `project: $(OBJECTS)`,
    `\t$(CC) -o project $(OBJECTS)`,
    ``,
    `%.o: %.c common.h`,
    `\t$(CC) $(CFLAGS) -c $< -o $@`,
    ``,
    `clean:`,
    `\trm -f project $(OBJECTS)`,
    ``,
    `.PHONY: clean`,
    ``,
  ].join("\n");
}

/** Writes the project into `dir` (which must exist) and says what it wrote. */
export function writeCProject(dir: string, options: CProjectOptions = {}): CProject {
  const modules = options.modules ?? 44;
  const functions = options.functionsPerModule ?? 26;
  const next = prng(options.seed ?? 18);
  const files: string[] = [];
  let sourceBytes = 0;
  const write = (name: string, text: string) => {
    Deno.writeTextFileSync(`${dir}/${name}`, text);
    files.push(name);
    if (name.endsWith(".c") || name.endsWith(".h")) sourceBytes += new TextEncoder().encode(text).length;
  };
  write("common.h", headerSource(modules));
  for (let i = 0; i < modules; i++) write(`mod${pad(i)}.c`, moduleSource(i, functions, next));
  write("main.c", mainSource(modules));
  write("Makefile", makefile(modules));
  return { dir, modules, files, sourceBytes };
}
