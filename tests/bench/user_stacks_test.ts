import assert from "node:assert/strict";
import {
  isFunctionName,
  parseFoldedSamples,
  parsePerfScriptSamples,
  type UserStackFigures,
  userStackFigures,
} from "./user_stacks.ts";

// Lines as omniprof wrote them for a build (shortened). Per cc1 line: named leaf? leaf in a known file?
// no user frame? complete (outermost user frame _start, __libc_start_main(_impl), __libc_start_call_main
// or main)?
const FOLDED = [
  // [cc1+0x...] leaf: not named, in a known file; complete. 1 sample.
  "cc1;_start;__libc_start_main;__libc_start_call_main;main;toplev::main(int, char**);[cc1+0xbed990];" +
  "c_parse_file();pushdecl(tree_node*);[cc1+0x67e820] 1",
  // Named, complete. 2 samples.
  "cc1;_start;__libc_start_main;__libc_start_call_main;main;toplev::main(int, char**);fold(tree_node*);" +
  "fold_binary_loc(unsigned int, tree_code, tree_node*, tree_node*, tree_node*) 2",
  // Named (a name with spaces), not complete. 2 samples.
  "cc1;[unknown];irange::upper_bound() const 2",
  // Named, not complete. 3 samples.
  "cc1;extract_insn(rtx_insn*) 3",
  // Not named, in a known file, not complete. 1 sample.
  "cc1;[cc1+0xebcca0] 1",
  // The kernel frames are not the leaf: _dl_sysdep_start is; complete (ld.so's _start). 1 sample.
  "cc1;_start;_dl_start;_dl_sysdep_start;asm_exc_page_fault_[k];exc_page_fault_[k] 1",
  // No user frame. 2 samples.
  "cc1;asm_exc_page_fault_[k];exc_page_fault_[k] 2",
  // Not named, no file, not complete. 1 sample.
  "cc1;[unknown] 1",
  // Another thread name: left out.
  "as;_start;main 5",
  "",
].join("\n");

// By hand, cc1: samples 1+2+2+3+1+1+2+1 = 13; named 2+2+3+1 = 8; in a known file 8 + 1 + 1 = 10;
// no user frame 2; complete 1+2+1 = 4.
const FOLDED_CC1: UserStackFigures = {
  samples: 13,
  namedLeaf: 8,
  leafInKnownFile: 10,
  noUserFrame: 2,
  complete: 4,
};

// Samples as `perf script -F comm,pid,tid,time,ip,sym,dso` printed them for a build, -g (1-3) and
// --call-graph dwarf (4, 5), shortened, plus a kernel-only one (6) and one of make (7).
const PERF_SCRIPT = `cc1 18917/18917 11826.950668: 
\tffffffff815a4fbd filemap_map_pages ([kernel.kallsyms])
\tffffffff81000c82 asm_exc_page_fault ([kernel.kallsyms])
\t          273698 [unknown] (/usr/lib/gcc/x86_64-linux-gnu/12/cc1)

cc1 18919/18919 11826.955995: 
\tffffffff8225a101 do_syscall_64 ([kernel.kallsyms])
\tffffffff81000130 entry_SYSCALL_64_after_hwframe ([kernel.kallsyms])
\t           20ca3 mmap64 (/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2)
\t            80c5 _dl_map_object (/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2)
\t    7f61e67308a8 [unknown] ([unknown])

cc1 18919/18919 11826.957993: 
\t         15554bf diagnose_options (/usr/lib/gcc/x86_64-linux-gnu/12/cc1)

cc1 18957/18957 11830.214036: 
\tffffffff81000c82 asm_exc_page_fault ([kernel.kallsyms])
\t          ab3c10 make_pass_vtable_verify (/usr/lib/gcc/x86_64-linux-gnu/12/cc1)
\t          273d40 toplev::main (/usr/lib/gcc/x86_64-linux-gnu/12/cc1)
\t          27655a main (/usr/lib/gcc/x86_64-linux-gnu/12/cc1)
\t           27249 __libc_start_call_main (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t           27304 __libc_start_main_impl (inlined)
\t          2766a0 _start (/usr/lib/gcc/x86_64-linux-gnu/12/cc1)

cc1 18956/18956 11830.210024: 
\tffffffff81000130 entry_SYSCALL_64_after_hwframe ([kernel.kallsyms])
\t           20d07 __GI_mprotect (inlined)
\t            db2c _dl_protect_relro (/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2)
\t           1ab77 _start (/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2)

cc1 18960/18960 11830.300000: 
\tffffffffc0a01234 [unknown] ([unknown])
\tffffffff81000130 entry_SYSCALL_64_after_hwframe ([kernel.kallsyms])

make 18900/18900 11830.310000: 
\t           4a1b0 main (/usr/bin/make)

`;

// By hand, cc1: samples 6; named: mmap64 (2), diagnose_options (3), make_pass_vtable_verify (4),
// __GI_mprotect (5) = 4; in a known file: those 4 and cc1's [unknown] (1) = 5; no user frame: 6 (its
// [unknown] at a kernel address is a kernel frame) = 1; complete: 4 (_start) and 5 (ld.so's _start) = 2.
const PERF_CC1: UserStackFigures = {
  samples: 6,
  namedLeaf: 4,
  leafInKnownFile: 5,
  noUserFrame: 1,
  complete: 2,
};

Deno.test("parseFoldedSamples() reads frames root first, kernel frames and the files of [file+0x...]", () => {
  const samples = parseFoldedSamples(FOLDED);
  assert.equal(samples.length, 9);
  assert.deepEqual(samples[5], {
    comm: "cc1",
    frames: [
      { name: "_start", file: null, kernel: false },
      { name: "_dl_start", file: null, kernel: false },
      { name: "_dl_sysdep_start", file: null, kernel: false },
      { name: "asm_exc_page_fault", file: null, kernel: true },
      { name: "exc_page_fault", file: null, kernel: true },
    ],
    count: 1,
  });
  assert.deepEqual(samples[4]!.frames, [{ name: "[cc1+0xebcca0]", file: "cc1", kernel: false }]);
  assert.equal(samples[2]!.frames[1]!.name, "irange::upper_bound() const");
});

Deno.test("userStackFigures() on omniprof's folded lines counts what was worked out by hand", () => {
  assert.deepEqual(userStackFigures(parseFoldedSamples(FOLDED), "cc1"), FOLDED_CC1);
  assert.deepEqual(userStackFigures(parseFoldedSamples(FOLDED), "as"), {
    samples: 5,
    namedLeaf: 5,
    leafInKnownFile: 5,
    noUserFrame: 0,
    complete: 5,
  });
  assert.deepEqual(userStackFigures(parseFoldedSamples(FOLDED), "ld"), {
    samples: 0,
    namedLeaf: 0,
    leafInKnownFile: 0,
    noUserFrame: 0,
    complete: 0,
  });
});

Deno.test("parsePerfScriptSamples() reads frames root first with their files, one sample per header", () => {
  const samples = parsePerfScriptSamples(PERF_SCRIPT);
  assert.deepEqual(samples.map((sample) => sample.comm), ["cc1", "cc1", "cc1", "cc1", "cc1", "cc1", "make"]);
  assert.deepEqual(samples[1]!.frames, [
    { name: "[unknown]", file: null, kernel: false },
    { name: "_dl_map_object", file: "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", kernel: false },
    { name: "mmap64", file: "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", kernel: false },
    { name: "entry_SYSCALL_64_after_hwframe", file: "[kernel.kallsyms]", kernel: true },
    { name: "do_syscall_64", file: "[kernel.kallsyms]", kernel: true },
  ]);
  assert.deepEqual(samples[5]!.frames.map((frame) => frame.kernel), [true, true]);
});

Deno.test("userStackFigures() on perf script samples counts what was worked out by hand", () => {
  assert.deepEqual(userStackFigures(parsePerfScriptSamples(PERF_SCRIPT), "cc1"), PERF_CC1);
});

Deno.test("isFunctionName() tells names from addresses and placeholders", () => {
  for (const name of ["main", "face", "toplev::main(int, char**)", "__libc_start_main@@GLIBC_2.34"]) {
    assert.ok(isFunctionName(name), name);
  }
  for (const name of ["", "[unknown]", "[cc1+0x67e820]", "0x7f12", "7f61e67308a8"]) {
    assert.ok(!isFunctionName(name), name);
  }
});
