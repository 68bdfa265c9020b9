// What omniprof's output files are, run as root on a shared machine: a link planted at the output path
// while recording is never written through, a file asked for under sudo belongs to the user who ran sudo,
// and no output holds kernel addresses (which tell where the kernel is loaded) unless asked. These run
// the real CLI on the kernel path and need root.
import assert from "node:assert/strict";
import { bootstrapped, requiring } from "../lib/testing/requirements.ts";
import { gunzipSync } from "node:zlib";
import { encodePprof } from "../lib/output/pprof.ts";
import type { Profile } from "../lib/profile/profile.ts";
import { buildWorkload, DENO_RUN_ENV, omniprofArgs, runCli, tempDir, tracingTest } from "./helpers.ts";
import { decodePprofBySchema, pprofAddresses } from "./pprof_schema.ts";

/** Whether `a` and `b` hold the same bytes (assert's diff of two large arrays would take minutes). */
function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}

const NOBODY = 65534;
const FP_FLAGS = ["-O2", "-fno-omit-frame-pointer"];

/** Runs `command` as the unprivileged user nobody, as an attacker on the same machine would. */
async function asNobody(command: string[]): Promise<void> {
  const result = await new Deno.Command("setpriv", {
    args: [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", ...command],
    stderr: "piped",
  }).output();
  assert.ok(result.success, new TextDecoder().decode(result.stderr));
}

/** Starts `record ARGS`; resolves once it has printed `marker` on stderr (its output is then open). */
async function startRecord(args: string[], marker: RegExp) {
  const child = new Deno.Command(Deno.execPath(), {
    args: omniprofArgs(["record", ...args]),
    env: DENO_RUN_ENV,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const reader = child.stderr.getReader();
  const decoder = new TextDecoder();
  let stderr = "";
  while (!marker.test(stderr)) {
    const { value, done } = await reader.read();
    if (done) break;
    stderr += decoder.decode(value, { stream: true });
  }
  const finished = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      stderr += decoder.decode(value, { stream: true });
    }
    const [status] = await Promise.all([child.status, child.stdout.cancel()]);
    return { code: status.code, stderr };
  })();
  return { started: marker.test(stderr), stderr, finished };
}

function names(dir: string): string[] {
  return [...Deno.readDirSync(dir)].map((entry) => entry.name).sort();
}

/** The permission bits a new file of `mode` gets under this process's umask (children inherit it). */
function created(mode: number): number {
  return mode & ~Deno.umask();
}

Deno.test(
  tracingTest("a link planted at -o while recording leaves its target byte for byte unchanged", async () => {
    // A folder everyone may write in, like /tmp, and a file of another user that root could overwrite.
    const shared = tempDir();
    const private_ = tempDir();
    try {
      Deno.chmodSync(shared, 0o1777);
      const victim = `${private_}/secret`;
      const secret = crypto.getRandomValues(new Uint8Array(65536));
      Deno.writeFileSync(victim, secret, { mode: 0o600 });
      Deno.chownSync(victim, NOBODY, NOBODY);
      const before = Deno.statSync(victim);

      const output = `${shared}/profile.pb.gz`;
      const run = await startRecord(["--demo", "-d", "3", "-o", output], /recording the demo workload/);
      assert.ok(run.started, run.stderr);
      // omniprof has looked at the path and is recording: the attacker puts a link there.
      await asNobody(["ln", "-s", victim, output]);
      const { code, stderr } = await run.finished;

      assert.ok(sameBytes(Deno.readFileSync(victim), secret), "the target's bytes are unchanged");
      const after = Deno.statSync(victim);
      assert.deepEqual([after.mode! & 0o7777, after.uid, after.gid, after.ino], [
        before.mode! & 0o7777,
        before.uid,
        before.gid,
        before.ino,
      ]);
      assert.equal(Deno.readLinkSync(output), victim, "the planted link is left as it is");

      assert.equal(code, 1, stderr);
      const message = stderr.match(
        /Cannot write the profile to .*profile\.pb\.gz: it did not exist when omniprof started and is now a symbolic link, so it was left alone; the profile is in (\S+)\n/,
      );
      assert.ok(message, stderr);
      const kept = message[1]!;
      assert.match(kept, new RegExp(`^${shared}/omniprof-kept-[0-9a-f]{8}-profile\\.pb\\.gz$`));
      const info = Deno.lstatSync(kept);
      assert.ok(info.isFile && info.uid === 0, "kept as root's own regular file");
      const pprof = gunzipSync(Deno.readFileSync(kept));
      assert.ok(pprof.length > 100, "the profile is all there");
      assert.deepEqual(
        names(shared),
        ["profile.pb.gz", kept.slice(shared.length + 1)].sort(),
        "no temporary",
      );
    } finally {
      Deno.removeSync(shared, { recursive: true });
      Deno.removeSync(private_, { recursive: true });
    }
  }),
);

Deno.test(tracingTest("a profile recorded under sudo belongs to the user who ran sudo", async () => {
  const dir = tempDir();
  try {
    const sudo = { SUDO_UID: String(NOBODY), SUDO_GID: String(NOBODY), SUDO_USER: "nobody" };
    const result = await runCli(
      // The demo workload: a whole-system second of an idle machine may hold no sample at all.
      ["record", "--demo", "-d", "1", "-o", `${dir}/mine.folded`, "--stats", `${dir}/stats.json`],
      { env: sudo },
    );
    assert.equal(result.code, 0, result.stderr);
    for (const name of ["mine.folded", "stats.json"]) {
      const info = Deno.statSync(`${dir}/${name}`);
      assert.deepEqual([info.uid, info.gid, info.mode! & 0o7777], [NOBODY, NOBODY, created(0o644)], name);
    }
    assert.ok(Deno.readTextFileSync(`${dir}/mine.folded`).length > 0);

    // A SUDO_UID that is not a plain number stops the command before it records anything.
    for (const bad of ["65534x", "0x10", "-1"]) {
      const refused = await runCli(["record", "-d", "30", "-o", `${dir}/bad.folded`], {
        env: { SUDO_UID: bad, SUDO_GID: "0" },
      });
      assert.equal(refused.code, 1, refused.stderr);
      assert.match(refused.stderr, /SUDO_UID=".*" is not a decimal id/);
    }
    assert.deepEqual(names(dir), ["mine.folded", "stats.json"]);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}));

Deno.test(requiring([bootstrapped(Deno.uid() === 0 ? null : "needs root (files of another user)")], {
  name: "report --html and diff --html under sudo write a file of the user who ran sudo",
  fn: async () => {
    const dir = tempDir();
    try {
      const profile: Profile = {
        startTimeNs: 0,
        durationNs: 1e9,
        periodNs: 1e7,
        mappings: [],
        locations: [{
          kind: "native",
          mapping: -1,
          address: 0x401000,
          functionName: "main",
          sourceFile: "",
          line: 0,
        }],
        samples: [{ locations: [0], count: 5, pid: 42, tid: 42, comm: "demo" }],
      };
      Deno.writeFileSync(`${dir}/in.pb`, encodePprof(profile));
      const sudo = { SUDO_UID: String(NOBODY), SUDO_GID: String(NOBODY) };
      const report = await runCli(["report", `${dir}/in.pb`, "--html", `${dir}/report.html`], { env: sudo });
      assert.equal(report.code, 0, report.stderr);
      const diff = await runCli(["diff", `${dir}/in.pb`, `${dir}/in.pb`, "--html", `${dir}/diff.html`], {
        env: sudo,
      });
      assert.equal(diff.code, 0, diff.stderr);
      for (const name of ["report.html", "diff.html"]) {
        const info = Deno.statSync(`${dir}/${name}`);
        assert.deepEqual([info.uid, info.gid, info.mode! & 0o7777], [NOBODY, NOBODY, created(0o644)], name);
      }
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
}));
if (Deno.uid() !== 0) console.log("SKIP report --html under sudo: needs root to give files away");

/** The kernel's text, `_text` to `_etext`, from /proc/kallsyms. */
function kernelText(): { start: bigint; end: bigint } {
  const text = Deno.readTextFileSync("/proc/kallsyms");
  const find = (name: string) => {
    const line = text.match(new RegExp(`^([0-9a-f]{16}) [tT] ${name}$`, "m"));
    assert.ok(line, `${name} in /proc/kallsyms`);
    return BigInt(`0x${line[1]}`);
  };
  return { start: find("_text"), end: find("_etext") };
}

/** Location addresses, mapping ranges and strings of a pprof file. */
function pprofContents(bytes: Uint8Array): { addresses: bigint[]; strings: string[] } {
  const profile = decodePprofBySchema(bytes);
  return { addresses: pprofAddresses(profile), strings: profile.stringTable };
}

Deno.test(tracingTest("a recorded pprof holds no kernel address unless --kernel-addresses asks", async () => {
  const syscalls = await buildWorkload("syscalls", FP_FLAGS);
  const { start, end } = kernelText();
  const inKernel = (address: bigint) => address >= start && address < end;
  const dir = tempDir();
  try {
    const plain = await runCli(["record", "-o", `${dir}/plain.pb.gz`, "--", syscalls, "2"]);
    assert.equal(plain.code, 0, plain.stderr);
    const hidden = pprofContents(Deno.readFileSync(`${dir}/plain.pb.gz`));
    // The workload spends its time in read and write: kernel frames are there, by name.
    assert.ok(hidden.strings.some((s) => /^(ksys|vfs)_(read|write)$/.test(s)), "kernel functions are named");
    assert.ok(hidden.addresses.length > 0, "user frames keep their addresses");
    assert.deepEqual(hidden.addresses.filter(inKernel).map((a) => a.toString(16)), []);
    assert.deepEqual(hidden.strings.filter((s) => /ffffffff[0-9a-f]{8}/.test(s)), []);
    assert.equal(Deno.statSync(`${dir}/plain.pb.gz`).mode! & 0o7777, created(0o644));

    const asked = await runCli([
      "record",
      "--kernel-addresses",
      "-o",
      `${dir}/asked.pb.gz`,
      "--",
      syscalls,
      "2",
    ]);
    assert.equal(asked.code, 0, asked.stderr);
    const kept = pprofContents(Deno.readFileSync(`${dir}/asked.pb.gz`));
    assert.ok(kept.addresses.filter(inKernel).length > 0, "exact kernel addresses, as asked");
    assert.equal(Deno.statSync(`${dir}/asked.pb.gz`).mode! & 0o7777, 0o600, "readable by its owner only");
    assert.match(asked.stderr, /it holds kernel addresses: mode 0600/);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}));
