// End-to-end tests of `omniprof agent`: the agent samples the whole system while the chain workload runs
// and exports to local test receivers (OTLP/HTTP and OTLP/gRPC) that decode every request with the
// published OpenTelemetry .proto files. The receivers go down and come back; the agent must lose no
// profile younger than its buffer limit, report what it dropped, and on SIGTERM send what it holds and
// exit 0. Needs root and BTF; says so when it skips.
import assert from "node:assert/strict";
import http2 from "node:http2";
import { gunzipSync } from "node:zlib";
import { decodePprof } from "../lib/output/pprof_reader.ts";
import {
  buildWorkload,
  DENO_RUN_ENV,
  hasChain,
  omniprofArgs,
  REPO_ROOT,
  startReadyProcess,
  tempDir,
  tracingTest,
} from "./helpers.ts";
import {
  decodeRequest,
  encodeResponse,
  type FlatSample,
  flattenRequest,
  loadOtelSchema,
} from "./otlp_schema.ts";
import { CpuTimeline } from "./cpu_timeline.ts";
import { assertSampleCount, type CpuSpan, StealMeter } from "./sample_bounds.ts";

const FP_FLAGS = ["-O2", "-fno-omit-frame-pointer"];
const GRPC_PATH = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export";

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function waitFor(what: string, timeoutMs: number, condition: () => boolean): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(50);
  }
}

/** One export request as a receiver saw it. */
interface Received {
  samples: FlatSample[];
  /** time_unix_nano of the profiles in ms (all profiles of one request share the interval). */
  startMs: number;
  durationMs: number;
  gzippedBytes: number;
  headers: Record<string, string>;
}

function toReceived(body: Uint8Array, headers: Record<string, string>): Received {
  const samples = flattenRequest(decodeRequest(gunzipSync(body)));
  const first = samples[0];
  return {
    samples,
    // Rounded as the agent rounds the start it logs.
    startMs: first ? Number((first.timeUnixNano + 500_000n) / 1_000_000n) : 0,
    durationMs: first ? Number((first.durationNano + 500_000n) / 1_000_000n) : 0,
    gzippedBytes: body.length,
    headers,
  };
}

/**
 * Decodes requests after they were answered, in the order they came. A receiver slow to answer (decoding
 * takes a busy machine seconds) would make the agent time out on a request that in fact arrived.
 */
class Decoder {
  received: Received[] = [];
  #decoding: Promise<void> = Promise.resolve();

  constructor() {
    loadOtelSchema(); // before any request: the first load is the slowest part
  }

  /** Queues `body` to be decoded once the caller has answered. */
  later(body: Uint8Array, headers: Record<string, string>): void {
    this.#decoding = this.#decoding
      .then(() => new Promise((resolve) => setTimeout(resolve, 0)))
      .then(() => void this.received.push(toReceived(body, headers)));
  }

  /** Resolves once every request answered so far is decoded. */
  settled(): Promise<void> {
    return this.#decoding;
  }
}

/** An OTLP/HTTP receiver on 127.0.0.1 that can be taken down and brought back on the same port. */
class HttpReceiver {
  readonly #decoder = new Decoder();
  port = 0;
  #server: Deno.HttpServer | null = null;

  get received(): Received[] {
    return this.#decoder.received;
  }

  /** Resolves once every request answered so far is decoded. */
  settled(): Promise<void> {
    return this.#decoder.settled();
  }

  start(): void {
    this.#server = Deno.serve(
      { hostname: "127.0.0.1", port: this.port, onListen: () => {} },
      async (request) => {
        const url = new URL(request.url);
        if (request.method !== "POST" || url.pathname !== "/v1development/profiles") {
          return new Response("not found", { status: 404 });
        }
        const body = new Uint8Array(await request.arrayBuffer());
        this.#decoder.later(body, Object.fromEntries(request.headers));
        return new Response(encodeResponse() as Uint8Array<ArrayBuffer>, {
          headers: { "content-type": "application/x-protobuf" },
        });
      },
    );
    this.port = (this.#server.addr as Deno.NetAddr).port;
  }

  async stop(): Promise<void> {
    await this.#server?.shutdown();
    this.#server = null;
    await this.#decoder.settled();
  }
}

/** An OTLP/gRPC receiver (cleartext HTTP/2) that can answer UNAVAILABLE. */
class GrpcReceiver {
  readonly #decoder = new Decoder();
  unavailable = 0;
  down = false;
  port = 0;
  #server = http2.createServer();

  get received(): Received[] {
    return this.#decoder.received;
  }

  /** Resolves once every request answered so far is decoded. */
  settled(): Promise<void> {
    return this.#decoder.settled();
  }

  async start(): Promise<void> {
    this.#server.on("stream", (stream, headers) => {
      const chunks: Uint8Array[] = [];
      stream.on("data", (chunk: Uint8Array) => chunks.push(chunk));
      stream.on("end", () => {
        if (headers[":path"] !== GRPC_PATH) {
          stream.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "12" }, {
            endStream: true,
          });
          return;
        }
        if (this.down) {
          this.unavailable++;
          // A trailers-only response, as gRPC servers answer when they refuse a call outright.
          stream.respond({
            ":status": 200,
            "content-type": "application/grpc",
            "grpc-status": "14",
            "grpc-message": "down for the test",
          }, { endStream: true });
          return;
        }
        const framed = Buffer.concat(chunks);
        const compressed = framed[0] === 1;
        const length = framed.readUInt32BE(1);
        assert.equal(length, framed.length - 5, "one length-prefixed message");
        assert.ok(compressed, "the message is compressed");
        const flat: Record<string, string> = {};
        for (const [key, value] of Object.entries(headers)) if (typeof value === "string") flat[key] = value;
        this.#decoder.later(framed.subarray(5), flat);
        const response = encodeResponse();
        const out = Buffer.alloc(5 + response.length);
        out.writeUInt32BE(response.length, 1);
        out.set(response, 5);
        stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
        stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
        stream.end(out);
      });
    });
    await new Promise<void>((resolve) => this.#server.listen(0, "127.0.0.1", resolve));
    this.port = (this.#server.address() as { port: number }).port;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    await this.#decoder.settled();
  }
}

/** The agent as a child process, with its output collected as it comes. */
class AgentProcess {
  readonly child: Deno.ChildProcess;
  output = "";
  #reading: Promise<void>[];

  constructor(args: string[]) {
    this.child = new Deno.Command(Deno.execPath(), {
      args: omniprofArgs(["agent", ...args]),
      cwd: REPO_ROOT,
      env: { ...DENO_RUN_ENV, OMNIPROF_LOG: "info" },
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.#reading = [this.child.stdout, this.child.stderr].map(async (stream) => {
      for await (const text of stream.pipeThrough(new TextDecoderStream())) this.output += text;
    });
  }

  /** Resident memory of the agent, KiB. */
  rssKiB(): number {
    const status = Deno.readTextFileSync(`/proc/${this.child.pid}/status`);
    return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN);
  }

  async exit(): Promise<number> {
    const status = await this.child.status;
    await Promise.all(this.#reading);
    return status.code;
  }

  /** Kills the agent if it still runs (a test that failed midway), and waits for its exit. */
  async kill(): Promise<number> {
    try {
      this.child.kill("SIGKILL");
    } catch {
      // exited
    }
    return await this.exit();
  }

  /** Intervals the agent logged as queued for export, by sequence number: their start (ISO). */
  intervals(): Map<number, string> {
    const out = new Map<number, string>();
    for (const match of this.output.matchAll(/interval (\d+) from (\S+): \d+ samples/g)) {
      out.set(Number(match[1]), match[2]!);
    }
    return out;
  }

  /**
   * What the export queue did, in the order logged: each interval queued with the size of its body, each
   * one dropped with the bytes the queue held then. (A drop is logged while the interval that caused it
   * is queued, before that one's line.)
   */
  queueEvents(): ({ queued: number; bytes: number } | { dropped: number; heldBytes: number })[] {
    return [
      ...this.output.matchAll(
        /interval (\d+) from \S+: \d+ samples of \d+ processes, (\d+) bytes to export|dropped interval (\d+) that started at \S+; \d+ dropped so far, (\d+) bytes held/g,
      ),
    ].map((m) =>
      m[1] !== undefined
        ? { queued: Number(m[1]), bytes: Number(m[2]) }
        : { dropped: Number(m[3]), heldBytes: Number(m[4]) }
    );
  }

  /** Intervals the agent logged as dropped. */
  dropped(): number[] {
    return [...this.output.matchAll(/dropped interval (\d+) that started at/g)].map((m) => Number(m[1]));
  }

  summary(): { sent: number; dropped: number; unsent: number } {
    const match =
      /stopped after \d+ intervals: (\d+) profiles sent, (\d+) dropped, \d+ rejected, (\d+) unsent/
        .exec(this.output);
    assert.ok(match, `the agent logs a summary:\n${this.output}`);
    return { sent: Number(match[1]), dropped: Number(match[2]), unsent: Number(match[3]) };
  }
}

/** A cgroup v2 hierarchy this test may create cgroups in, or null. */
function unifiedCgroupRoot(): string | null {
  const mounts = Deno.readTextFileSync("/proc/mounts").split("\n").map((line) => line.split(" "));
  for (const path of ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]) {
    if (mounts.some((m) => m[1] === path && m[2] === "cgroup2")) return path;
  }
  return null;
}

/**
 * Starts the chain workload, inside a cgroup named like a containerd container when the machine allows,
 * so that the export must carry its container id; and beside it a busy shell the test knows nothing
 * else of, so that the whole system is seen to be sampled however quiet the machine is. The CPU time of
 * both is read as they run.
 */
async function startWorkload(seconds: number) {
  const chain = await buildWorkload("chain", FP_FLAGS, "-fp");
  const steal = new StealMeter();
  const child = new Deno.Command(chain, { args: [String(seconds)], stdout: "null" }).spawn();
  const bystander = new Deno.Command("sh", { args: ["-c", "while :; do :; done"] }).spawn();
  const timeline = new CpuTimeline(child.pid);
  const bystanderTimeline = new CpuTimeline(bystander.pid);
  const containerId = Array.from(
    crypto.getRandomValues(new Uint8Array(32)),
    (b) => b.toString(16).padStart(2, "0"),
  )
    .join("");
  const root = unifiedCgroupRoot();
  const base = root === null ? null : `${root}/omniprof-agent-test-${child.pid}`;
  const leaf = `${base}/kubepods.slice/cri-containerd-${containerId}.scope`;
  let inContainer = false;
  if (base !== null) {
    try {
      Deno.mkdirSync(leaf, { recursive: true });
      Deno.writeTextFileSync(`${leaf}/cgroup.procs`, `${child.pid}\n`);
      inContainer = true;
    } catch (error) {
      console.log(`the workload runs outside a container cgroup: ${error}`);
    }
  } else console.log("no cgroup v2 hierarchy: the workload runs outside a container cgroup");
  return {
    chain,
    child,
    containerId: inContainer ? containerId : null,
    timeline,
    bystanderTimeline,
    steal,
    async stop() {
      timeline[Symbol.dispose]();
      bystanderTimeline[Symbol.dispose]();
      child.kill();
      bystander.kill();
      await child.status;
      await bystander.status;
      if (base === null) return;
      for (const dir of [leaf, `${base}/kubepods.slice`, base]) {
        try {
          Deno.removeSync(dir);
        } catch {
          // not created
        }
      }
    },
  };
}

function workloadSamples(received: Received[], pid: number): FlatSample[] {
  return received.flatMap((r) => r.samples).filter((s) => s.resource["process.pid"] === pid);
}

/** Sum of the sample counts. */
function countOf(samples: FlatSample[]): number {
  return samples.reduce((sum, s) => sum + s.values[0]!, 0);
}

/**
 * The runs of back-to-back intervals among `intervals` (each starting where the one before ended, to the
 * ms the exports carry), ms since the epoch: an interval dropped on a busy machine leaves a gap.
 */
function runsOf(intervals: { startMs: number; durationMs: number }[]): { startMs: number; endMs: number }[] {
  const runs: { startMs: number; endMs: number }[] = [];
  for (const interval of [...intervals].sort((a, b) => a.startMs - b.startMs)) {
    const last = runs.at(-1);
    if (last && Math.abs(interval.startMs - last.endMs) <= 1) {
      last.endMs = interval.startMs + interval.durationMs;
    } else runs.push({ startMs: interval.startMs, endMs: interval.startMs + interval.durationMs });
  }
  return runs;
}

/** The CPU time a process used in the intervals `received`. */
function cpuIn(received: Received[], timeline: CpuTimeline): CpuSpan {
  const spans = runsOf(received).map((run) => timeline.between(run.startMs, run.endMs));
  return {
    low: spans.reduce((sum, span) => sum + span.low, 0),
    high: spans.reduce((sum, span) => sum + span.high, 0),
  };
}

/**
 * Exports until they span this much of the workload's CPU time: enough samples at 49 Hz (about 100) that
 * their count says something, however busy the machine is.
 */
const EXPORTED_CPU_SECONDS = 2;

/** Waits until the intervals `received` span `cpuSeconds` of the workload's CPU time. */
async function waitForExportedCpu(
  received: Received[],
  workload: Awaited<ReturnType<typeof startWorkload>>,
  cpuSeconds: number,
): Promise<void> {
  await waitFor(`exports spanning ${cpuSeconds} s of the workload's CPU time`, 120_000, () => {
    return received.length > 0 && cpuIn(received, workload.timeline).low >= cpuSeconds;
  });
}

/**
 * The export of the workload carries its chain, frame types and resource attributes, and as many of its
 * samples as the CPU time it used in the exported intervals brings at `hz`; so does the busy shell beside
 * it.
 */
function checkWorkloadExport(
  receivedSoFar: Received[],
  workload: Awaited<ReturnType<typeof startWorkload>>,
  hz: number,
): void {
  const received = [...receivedSoFar];
  const steal = workload.steal.fraction();
  const ours = workloadSamples(received, workload.child.pid);
  const total = countOf(ours);
  const complete = ours.filter((s) => hasChain(s.frames, ["main", "a", "b", "c"]));
  const completeCount = countOf(complete);
  console.log(`workload: ${completeCount}/${total} exported samples with main;a;b;c`);
  assertSampleCount(
    total,
    cpuIn(received, workload.timeline),
    hz,
    steal,
    "the workload",
  );
  assert.ok(completeCount / total >= 0.9, `${completeCount}/${total} samples have main;a;b;c`);
  for (const sample of complete) {
    const at = sample.frames.indexOf("main");
    assert.deepEqual(sample.frameTypes.slice(at, at + 4), ["native", "native", "native", "native"]);
    // Kernel frames (an interrupt or a syscall under c) come after the user frames, and only they.
    const firstKernel = sample.frameTypes.indexOf("kernel");
    if (firstKernel >= 0) assert.ok(sample.frameTypes.slice(firstKernel).every((t) => t === "kernel"));
    assert.equal(sample.attributes["thread.id"], workload.child.pid);
    assert.equal(sample.attributes["thread.name"], "chain-fp");
  }
  const resource = ours[0]!.resource;
  assert.equal(resource["host.name"], Deno.hostname());
  assert.equal(resource["os.type"], "linux");
  assert.equal(resource["process.executable.path"], workload.chain);
  assert.equal(resource["process.executable.name"], "chain-fp");
  assert.equal(resource["container.id"] ?? null, workload.containerId);
  // The whole system is sampled: kernel frames, where a sample caught the kernel, are typed as such and
  // sit beneath the user frames. (Whether a short window catches any is chance: the typing itself is
  // asserted on a profile with kernel frames in lib/output/otlp_test.ts.)
  const all = received.flatMap((r) => r.samples);
  const withKernel = all.filter((s) => s.frameTypes.includes("kernel"));
  console.log(`${withKernel.length} exported samples hold kernel frames`);
  for (const sample of withKernel) {
    const first = sample.frameTypes.indexOf("kernel");
    assert.ok(sample.frameTypes.slice(first).every((type) => type === "kernel"), "kernel frames beneath");
  }
  // Other processes are exported too: at least the busy shell, as much as it ran.
  const bystander = countOf(workloadSamples(received, workload.bystanderTimeline.pid));
  const cpu = cpuIn(received, workload.bystanderTimeline);
  assertSampleCount(bystander, cpu, hz, steal, "the busy shell beside it");
  console.log(`${new Set(all.map((s) => s.resource["process.pid"])).size} processes exported`);
}

Deno.test(
  tracingTest(
    "agent exports over OTLP/HTTP, survives the endpoint going down, and drains on SIGTERM",
    async () => {
      const workload = await startWorkload(60);
      const receiver = new HttpReceiver();
      receiver.start();
      const limit = 3;
      const agent = new AgentProcess([
        "--otlp-endpoint",
        `http://127.0.0.1:${receiver.port}`,
        "--interval",
        "1",
        "-F",
        "49",
        "--buffer-limit",
        String(limit),
      ]);
      try {
        const launched = performance.now();
        await waitForExportedCpu(receiver.received, workload, EXPORTED_CPU_SECONDS);
        console.log(`first exports after ${((performance.now() - launched) / 1000).toFixed(1)} s`);
        checkWorkloadExport(receiver.received, workload, 49);
        const headers = receiver.received[0]!.headers;
        assert.equal(headers["content-type"], "application/x-protobuf");
        assert.equal(headers["content-encoding"], "gzip");
        const sizes = receiver.received.map((r) => r.gzippedBytes);
        console.log(`export sizes (gzip): ${sizes.join(", ")} bytes`);

        // The endpoint goes away (connection refused) for about six intervals.
        await receiver.stop();
        const before = receiver.received.length;
        const rssBefore = agent.rssKiB();
        await sleep(6500);
        const rssDown = agent.rssKiB();
        assert.equal(receiver.received.length, before);
        assert.ok(
          agent.dropped().length > 0,
          `drops are reported once the limit is exceeded:\n${agent.output}`,
        );

        receiver.start(); // same port
        await waitFor("the held profiles", 15_000, () => {
          const intervals = agent.intervals();
          const dropped = new Set(agent.dropped());
          const expected = [...intervals.keys()].filter((seq) => !dropped.has(seq));
          return receiver.received.length >= expected.length && expected.length > before + limit;
        });
        agent.child.kill("SIGTERM");
        assert.equal(await agent.exit(), 0, agent.output);
        await receiver.settled();

        // Every interval logged is either received or reported dropped, never both, never twice.
        const intervals = agent.intervals();
        const byStart = new Map([...intervals].map(([seq, start]) => [Date.parse(start), seq]));
        const receivedSeqs = receiver.received.map((r) => byStart.get(r.startMs));
        assert.ok(
          receivedSeqs.every((seq) => seq !== undefined),
          "every received profile is a logged interval",
        );
        assert.equal(new Set(receivedSeqs).size, receivedSeqs.length, "no interval is received twice");
        const dropped = agent.dropped();
        assert.deepEqual(
          [...receivedSeqs as number[], ...dropped].sort((a, b) => a - b),
          [...intervals.keys()].sort((a, b) => a - b),
          "received + dropped = every interval",
        );
        // The `limit` intervals after the last drop all arrived (which drops were the oldest is checked
        // with the queue's memory below).
        const lastDrop = Math.max(...dropped);
        for (let seq = lastDrop + 1; seq <= lastDrop + limit; seq++) {
          assert.ok(receivedSeqs.includes(seq), `interval ${seq}, younger than the buffer limit, arrived`);
        }
        const summary = agent.summary();
        assert.deepEqual(summary, { sent: receivedSeqs.length, dropped: dropped.length, unsent: 0 });

        // Memory during the outage: the queue never held more than `limit` bodies, and only the oldest
        // went. Each body's size is what the agent logged, and what the receiver got for the intervals
        // that arrived. A drop is logged either as the interval that causes it is queued (just before that
        // interval's own line) or when the send of one that left a full queue fails: either way the one
        // dropped is older than the `limit` queued last, and the bytes held are at most theirs.
        const events = agent.queueEvents();
        const bytes = new Map<number, number>();
        for (const event of events) if ("queued" in event) bytes.set(event.queued, event.bytes);
        for (const r of receiver.received) {
          const seq = byStart.get(r.startMs)!;
          assert.equal(r.gzippedBytes, bytes.get(seq), `interval ${seq}: the body logged is the body sent`);
        }
        for (const [i, event] of events.entries()) {
          if (!("dropped" in event)) continue;
          const next = events.slice(i + 1).find((later) => "queued" in later);
          const queued = [...events.slice(0, i), ...(next ? [next] : [])].flatMap((e) =>
            "queued" in e ? [e.queued] : []
          );
          const youngest = queued.slice(-limit);
          assert.ok(
            youngest.every((seq) => seq > event.dropped),
            `interval ${event.dropped} was dropped while ${youngest.join(", ")} were the last queued`,
          );
          const most = queued.map((seq) => bytes.get(seq)!).sort((a, b) => b - a).slice(0, limit)
            .reduce((sum, size) => sum + size, 0);
          assert.ok(
            event.heldBytes > 0 && event.heldBytes <= most,
            `${event.heldBytes} bytes held when interval ${event.dropped} was dropped; ${limit} bodies are ${most}`,
          );
        }
        console.log(`agent RSS (not compared: V8's heap moves it by MBs): ${rssBefore} KiB, ${rssDown} KiB`);

        // Intervals are contiguous: each starts where the previous one ended (to the ms of the log), the
        // dropped ones included.
        for (const r of receiver.received) {
          const next = intervals.get(byStart.get(r.startMs)! + 1);
          if (next === undefined) continue;
          assert.ok(
            Math.abs(Date.parse(next) - (r.startMs + r.durationMs)) <= 1,
            `${next} follows ${r.startMs}`,
          );
        }
        const ordered = [...receiver.received].sort((a, b) => a.startMs - b.startMs);
        const last = ordered.at(-1)!;
        assert.equal(
          byStart.get(last.startMs),
          Math.max(...intervals.keys()),
          "the last, partial interval is sent",
        );
        console.log(
          `intervals: ${intervals.size} taken, ${receivedSeqs.length} received, ${dropped.length} dropped ` +
            `(${dropped.join(", ")}), last one ${last.durationMs} ms long`,
        );
      } finally {
        await agent.kill();
        await receiver.stop();
        await workload.stop();
      }
    },
  ),
);

Deno.test(
  tracingTest(
    "agent exports over OTLP/gRPC, retries UNAVAILABLE, and sends what it holds on SIGTERM",
    async () => {
      const workload = await startWorkload(60);
      const receiver = new GrpcReceiver();
      await receiver.start();
      const agent = new AgentProcess([
        "--otlp-endpoint",
        `http://127.0.0.1:${receiver.port}`,
        "--protocol",
        "grpc",
        "--interval",
        "1",
        "-F",
        "49",
        "--buffer-limit",
        "20",
        "--shutdown-timeout",
        "8",
      ]);
      try {
        await waitForExportedCpu(receiver.received, workload, EXPORTED_CPU_SECONDS);
        checkWorkloadExport(receiver.received, workload, 49);
        const headers = receiver.received[0]!.headers;
        assert.match(headers["content-type"]!, /^application\/grpc/);
        assert.equal(headers["grpc-encoding"], "gzip");
        assert.equal(headers["te"], "trailers");

        // UNAVAILABLE for three intervals, then back.
        receiver.down = true;
        await sleep(3000);
        assert.ok(receiver.unavailable > 0);
        receiver.down = false;
        await waitFor("the held profiles", 10_000, () => receiver.received.length >= agent.intervals().size);

        // Down again, then SIGTERM: the agent keeps retrying through the shutdown window and delivers once the
        // endpoint is back.
        receiver.down = true;
        await sleep(1500);
        agent.child.kill("SIGTERM");
        await sleep(1500);
        receiver.down = false;
        const stopping = performance.now();
        assert.equal(await agent.exit(), 0, agent.output);
        await receiver.settled();
        console.log(
          `exited ${((performance.now() - stopping) / 1000).toFixed(1)} s after the endpoint came back`,
        );
        const intervals = agent.intervals();
        const starts = new Set(receiver.received.map((r) => r.startMs));
        assert.equal(starts.size, receiver.received.length, "no interval is received twice");
        for (const [seq, start] of intervals) {
          assert.ok(starts.has(Date.parse(start)), `interval ${seq} arrived`);
        }
        assert.deepEqual(agent.summary(), { sent: intervals.size, dropped: 0, unsent: 0 });
        console.log(
          `gRPC: ${intervals.size} intervals sent, ${receiver.unavailable} UNAVAILABLE answers retried`,
        );
      } finally {
        await agent.kill();
        await receiver.stop();
        await workload.stop();
      }
    },
  ),
);

Deno.test(
  tracingTest("agent --pprof-dir writes each interval as a pprof file, without a collector", async () => {
    const workload = await startWorkload(30);
    const dir = tempDir();
    const agent = new AgentProcess(["--pprof-dir", dir, "--interval", "0.5", "-F", "49"]);
    try {
      // Three files or more, spanning enough of the workload's CPU time (their names give their starts).
      await waitFor(
        `pprof files spanning ${EXPORTED_CPU_SECONDS} s of the workload's CPU time`,
        120_000,
        () => {
          const starts = [...Deno.readDirSync(dir)].map((entry) =>
            /^omniprof-(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d\.\d{3})Z\.pb\.gz$/.exec(entry.name)
          ).filter((match) => match !== null).map((m) =>
            Date.parse(`${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}Z`)
          )
            .sort((a, b) => a - b);
          return starts.length >= 3 &&
            workload.timeline.between(starts[0]!, starts.at(-1)!).low >= EXPORTED_CPU_SECONDS;
        },
      );
      agent.child.kill("SIGTERM");
      assert.equal(await agent.exit(), 0, agent.output);
      const files = [...Deno.readDirSync(dir)].map((entry) => entry.name).sort();
      assert.ok(files.every((name) => /^omniprof-\d{8}T\d{6}\.\d{3}Z\.pb\.gz$/.test(name)), files.join(" "));
      assert.equal(files.length, agent.intervals().size, "one file per interval with samples");
      let workloadSamples = 0;
      let chainSamples = 0;
      let bystanderSamples = 0;
      let firstStart = 0;
      let previousEnd = 0;
      for (const name of files) {
        const profile = decodePprof(Deno.readFileSync(`${dir}/${name}`));
        if (previousEnd !== 0) {
          assert.ok(Math.abs(profile.startTimeNs - previousEnd) < 2e6, "intervals are contiguous");
        } else firstStart = profile.startTimeNs;
        previousEnd = profile.startTimeNs + profile.durationNs;
        // Kernel frames are named, without the addresses that tell where the kernel is loaded.
        const kernelAddresses = profile.locations.filter((l) => l.kind === "kernel" && l.address !== 0);
        assert.deepEqual(kernelAddresses, [], `${name} holds no kernel address`);
        for (const sample of profile.samples) {
          if (sample.pid === workload.bystanderTimeline.pid) bystanderSamples += sample.count;
          if (sample.pid !== workload.child.pid) continue;
          workloadSamples += sample.count;
          const frames = sample.locations.map((index) => profile.locations[index]!.functionName).reverse();
          if (hasChain(frames, ["main", "a", "b", "c"])) chainSamples += sample.count;
        }
      }
      console.log(`${files.length} pprof files, ${chainSamples}/${workloadSamples} samples of main;a;b;c`);
      // As many of the workload's and the busy shell's samples as their CPU time in the files' span brings.
      const [startMs, endMs] = [Math.round(firstStart / 1e6), Math.round(previousEnd / 1e6)];
      const steal = workload.steal.fraction();
      assertSampleCount(
        workloadSamples,
        workload.timeline.between(startMs, endMs),
        49,
        steal,
        "the workload",
      );
      assert.ok(
        chainSamples / workloadSamples >= 0.9,
        `${chainSamples}/${workloadSamples} samples of the chain`,
      );
      const bystanderCpu = workload.bystanderTimeline.between(startMs, endMs);
      assertSampleCount(bystanderSamples, bystanderCpu, 49, steal, "the busy shell beside it");
      assert.match(
        agent.output,
        new RegExp(
          `stopped after \\d+ intervals: 0 profiles sent, 0 dropped, 0 rejected, 0 unsent, ${files.length} pprof files`,
        ),
      );
      assert.equal([...Deno.readDirSync(dir)].filter((entry) => entry.name.endsWith(".tmp")).length, 0);
    } finally {
      await agent.kill();
      await workload.stop();
      Deno.removeSync(dir, { recursive: true });
    }
  }),
);

Deno.test(
  tracingTest(
    "agent --off-cpu: each interval's pprof file charges a sleeping program's wall time to the stack it sleeps in",
    async () => {
      // Sleeps 10 ms at a time under main;wait_a;wait_b;wait_c, using next to no CPU: its wall time is
      // its off-CPU time.
      const sleeper = await buildWorkload("sleeper", ["-O2", "-fomit-frame-pointer"], "-nofp");
      const workload = await startReadyProcess(sleeper, ["60"]);
      const dir = tempDir();
      const agent = new AgentProcess(["--pprof-dir", dir, "--interval", "1", "-F", "49", "--off-cpu"]);
      try {
        await waitFor("three pprof files", 60_000, () => [...Deno.readDirSync(dir)].length >= 3);
        agent.child.kill("SIGTERM");
        assert.equal(await agent.exit(), 0, agent.output);
        assert.match(agent.output, /sampling all CPUs at 49 Hz, with off-CPU time/);
        const files = [...Deno.readDirSync(dir)].map((entry) => entry.name).filter((name) =>
          name.endsWith(".pb.gz")
        ).sort();
        let spanNs = 0;
        let offCpuNs = 0;
        let underChainNs = 0;
        for (const name of files) {
          const profile = decodePprof(Deno.readFileSync(`${dir}/${name}`));
          assert.equal(profile.offCpu, true, `${name} has off_cpu/nanoseconds`);
          spanNs += profile.durationNs;
          for (const sample of profile.samples) {
            if (sample.pid !== workload.pid) continue;
            const ns = sample.offCpuNs ?? 0;
            offCpuNs += ns;
            const frames = sample.locations.map((index) => profile.locations[index]!.functionName).reverse();
            if (hasChain(frames, ["main", "wait_a", "wait_b", "wait_c"])) underChainNs += ns;
          }
        }
        console.log(
          `${files.length} files over ${(spanNs / 1e9).toFixed(2)} s: the sleeper ${
            (offCpuNs / 1e9).toFixed(2)
          } s ` +
            `off-CPU, ${(underChainNs / 1e9).toFixed(2)} s under its chain`,
        );
        assert.ok(Math.abs(offCpuNs - spanNs) <= 0.1 * spanNs, "off-CPU time is the files' span within 10%");
        assert.ok(underChainNs >= 0.9 * offCpuNs, "90% of it under main;wait_a;wait_b;wait_c");
      } finally {
        await agent.kill();
        await workload.stop();
        Deno.removeSync(dir, { recursive: true });
      }
    },
  ),
);

Deno.test(tracingTest("the agent logs its start and each interval without OMNIPROF_LOG", async () => {
  const dir = tempDir();
  // Busy, so that every interval has samples: an interval without any is not written, nor logged.
  const chain = await buildWorkload("chain", FP_FLAGS, "-fp");
  const workload = new Deno.Command(chain, { args: ["60"], stdout: "null" }).spawn();
  try {
    const env = { ...Deno.env.toObject(), ...DENO_RUN_ENV };
    delete env.OMNIPROF_LOG;
    const child = new Deno.Command(Deno.execPath(), {
      args: omniprofArgs(["agent", "--pprof-dir", dir, "--interval", "1"]),
      cwd: REPO_ROOT,
      env,
      clearEnv: true,
      stdout: "null",
      stderr: "piped",
    }).spawn();
    const stderr = (async () => {
      let text = "";
      let stopping = false;
      for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) {
        text += chunk;
        // Once: a second signal makes the agent exit without its summary.
        if (!stopping && /interval \d+ from/.test(text)) {
          stopping = true;
          child.kill("SIGTERM");
        }
      }
      return text;
    })();
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    const [text] = await Promise.all([stderr, child.status]);
    clearTimeout(timer);
    assert.match(text, /INF omniprof·agent sampling all CPUs at 20 Hz; a profile every 1 s to /);
    assert.match(text, /interval \d+ from \S+: \d+ samples of \d+ processes, wrote /);
    assert.match(text, /stopped after \d+ intervals/);
  } finally {
    workload.kill();
    await workload.status;
    Deno.removeSync(dir, { recursive: true });
  }
}));
