/**
 * Fuzzes what the agent reads from a collector: the ExportProfilesServiceResponse decoder and the gRPC
 * message framing (damaged, crafted, garbage and gzip bombs), then the HTTP and gRPC exporters end to end
 * against local receivers on 127.0.0.1 that answer at random (any status, garbage headers and trailers,
 * bodies of garbage, too long, cut off or endless). The decoders must return a well-formed answer or refuse
 * with their own error; the exporters must never throw and always return a well-formed result, within
 * their timeout. See `lib/testing/fuzz.ts` for what fails a test.
 *
 * @module
 */
import assert from "node:assert/strict";
import http2 from "node:http2";
import { gzipSync } from "node:zlib";
import type { SendResult } from "../lib/agent/export_queue.ts";
import {
  createExporter,
  decodeExportResponse,
  frameGrpcMessage,
  MAX_RESPONSE_BYTES,
  type ProfileExporter,
  unframeGrpcMessage,
} from "../lib/agent/otlp_exporter.ts";
import { ProtobufWriter } from "../lib/output/protobuf_writer.ts";
import { below, garbage, mutate, pick, registerFuzzTest } from "../lib/testing/fuzz.ts";

/** A valid response: a partial success, or nothing. */
function validResponse(random: () => number): Uint8Array {
  const w = new ProtobufWriter();
  if (random() < 0.8) {
    const m = w.beginLengthDelimited(1);
    if (random() < 0.8) w.writeInt64Field(1, below(random, 1000) - (random() < 0.1 ? 2000 : 0));
    if (random() < 0.8) w.writeStringField(2, "x".repeat(below(random, 300)));
    if (random() < 0.2) w.writeBytesField(3 + below(random, 10), garbage(random, 20));
    w.endLengthDelimited(m);
  }
  if (random() < 0.2) w.writeVarintField(2 + below(random, 30), below(random, 1 << 30));
  return w.finish();
}

function responseBytes(random: () => number): { kind: string; bytes: Uint8Array } {
  switch (below(random, 3)) {
    case 0:
      return { kind: "valid", bytes: validResponse(random) };
    case 1: {
      const damaged = mutate(random, validResponse(random));
      return { kind: `valid ${damaged.how}`, bytes: damaged.bytes };
    }
    default:
      return { kind: "garbage", bytes: garbage(random, 200) };
  }
}

function checkResponse(answer: { rejected: number; message: string }): void {
  assert.ok(Number.isInteger(answer.rejected), String(answer.rejected));
  assert.equal(typeof answer.message, "string");
}

const ownDecodeError = (error: unknown) =>
  error instanceof RangeError &&
  /^Cannot (decode|read) (ExportProfilesServiceResponse|a gRPC message)/.test(error.message);

registerFuzzTest(import.meta.url, {
  name: "decodeExportResponse() on damaged, crafted and garbage responses: an answer or its own error",
  cases: 10_000,
  seed: 0x07e1,
  makeCase(random) {
    const { kind, bytes } = responseBytes(random);
    return { kind, run: () => checkResponse(decodeExportResponse(bytes)) };
  },
  isOwnError: ownDecodeError,
});

/** gzip bombs just over and just under the response bound, made once per worker. */
let bombs: { over: Uint8Array; under: Uint8Array } | undefined;

function grpcBody(random: () => number): { kind: string; bytes: Uint8Array; encoding: string } {
  const encoding = pick(random, ["gzip", "gzip", "identity", "snappy", ""]);
  switch (below(random, 10)) {
    case 0:
    case 1:
    case 2: {
      const payload = validResponse(random);
      const compressed = random() < 0.5;
      return {
        kind: "framed",
        bytes: frameGrpcMessage(compressed ? gzipSync(payload) : payload, compressed),
        encoding,
      };
    }
    case 3:
    case 4: {
      const damaged = mutate(random, frameGrpcMessage(gzipSync(validResponse(random)), true));
      return { kind: `framed ${damaged.how}`, bytes: damaged.bytes, encoding };
    }
    case 5: {
      bombs ??= {
        over: gzipSync(new Uint8Array(MAX_RESPONSE_BYTES + 1)),
        under: gzipSync(new Uint8Array(MAX_RESPONSE_BYTES)),
      };
      const over = random() < 0.5;
      return {
        kind: over ? "bomb over" : "bomb under",
        bytes: frameGrpcMessage(over ? bombs.over : bombs.under, true),
        encoding: "gzip",
      };
    }
    case 6:
    case 7: {
      // A length prefix that lies.
      const bytes = frameGrpcMessage(garbage(random, 40), random() < 0.5);
      new DataView(bytes.buffer).setUint32(
        1,
        pick(random, [0, 1, 0x7fffffff, 0xffffffff, bytes.length]),
        false,
      );
      return { kind: "lying length", bytes, encoding };
    }
    default:
      return { kind: "garbage", bytes: garbage(random, 100), encoding };
  }
}

registerFuzzTest(import.meta.url, {
  name: "unframeGrpcMessage() and decodeExportResponse() on damaged gRPC bodies and gzip bombs",
  cases: 4000,
  seed: 0x9c9c,
  makeCase(random) {
    const { kind, bytes, encoding } = grpcBody(random);
    return {
      kind,
      run: () => {
        const message = unframeGrpcMessage(bytes, encoding);
        assert.ok(message.length <= MAX_RESPONSE_BYTES, `${message.length} bytes`);
        checkResponse(decodeExportResponse(message));
      },
    };
  },
  isOwnError: ownDecodeError,
});

// ---------------------------------------------------------------------------------------------------
// The exporters end to end.

/** How long the exporters wait for one answer here: short, since some answers never come. */
const REQUEST_TIMEOUT_MS = 800;
/** Longest a failure's reason may be: the detail of an error page is cut to 200 characters. */
const MAX_REASON_LENGTH = 1000;

/** Printable text of up to `maxLength` characters, as header values must be. */
function printable(random: () => number, maxLength: number): string {
  return Array.from(
    { length: below(random, maxLength + 1) },
    () => String.fromCharCode(0x20 + below(random, 95)),
  )
    .join("");
}

function retryAfter(random: () => number): string {
  return pick(random, [
    "0",
    "3",
    "-5",
    "1e308",
    "NaN",
    "86400",
    "Wed, 21 Oct 2015 07:28:00 GMT",
    "Fri, 31 Dec 9999 23:59:59 GMT",
    printable(random, 40),
  ]);
}

/** A body for an HTTP answer: none, bytes, or a stream that is cut, endless, or stalls. */
function httpBody(random: () => number): { kind: string; body: BodyInit | null } {
  switch (below(random, 6)) {
    case 0:
      return { kind: "empty", body: null };
    case 1:
      return { kind: "response", body: validResponse(random) as Uint8Array<ArrayBuffer> };
    case 2:
      return { kind: "garbage", body: garbage(random, 4096) as Uint8Array<ArrayBuffer> };
    case 3:
      return { kind: "text", body: printable(random, 3000) };
    case 4: {
      const chunk = garbage(random, 1 << 16);
      let left = 1 + below(random, 40);
      return {
        kind: "long stream",
        body: new ReadableStream<Uint8Array>({
          pull(controller) {
            if (left-- > 0) controller.enqueue(chunk);
            else controller.close();
          },
        }),
      };
    }
    default:
      return random() < 0.9
        ? {
          kind: "endless stream",
          body: new ReadableStream<Uint8Array>({
            pull(controller) {
              controller.enqueue(new Uint8Array(1 << 16));
            },
          }),
        }
        : {
          kind: "stalled stream",
          body: new ReadableStream<Uint8Array>({ pull: () => new Promise(() => {}) }),
        };
  }
}

const HTTP_STATUSES = [
  200,
  200,
  200,
  202,
  204,
  299,
  301,
  302,
  303,
  307,
  308,
  400,
  401,
  404,
  413,
  429,
  500,
  502,
  503,
  599,
];

/** Checks a result and that it agrees with what the receiver answered. */
function checkResult(result: SendResult, status: number | null): void {
  if (result.ok) {
    if (status !== null) assert.ok(status >= 200 && status < 300, `ok for HTTP ${status}`);
    if (result.rejected !== undefined) assert.ok(Number.isInteger(result.rejected));
    if (result.message !== undefined) assert.equal(typeof result.message, "string");
    return;
  }
  assert.equal(typeof result.retryable, "boolean");
  assert.ok(
    result.reason.length > 0 && result.reason.length <= MAX_REASON_LENGTH,
    result.reason.slice(0, 300),
  );
  if (result.retryAfterMs !== undefined) {
    assert.ok(result.retryAfterMs >= 0 && result.retryAfterMs <= 300_000, String(result.retryAfterMs));
  }
  if (status !== null && status >= 300 && status < 400) assert.equal(result.retryable, false, "a redirect");
}

interface HttpRig {
  exporter: ProfileExporter;
  answer: () => Response;
}
let httpRig: HttpRig | undefined;

function startHttpRig(): HttpRig {
  const rig: HttpRig = {
    exporter: undefined as unknown as ProfileExporter,
    answer: () => new Response(null),
  };
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (request) => {
    await request.arrayBuffer();
    return rig.answer();
  });
  rig.exporter = createExporter({
    endpoint: `http://127.0.0.1:${(server.addr as Deno.NetAddr).port}`,
    protocol: "http",
    timeoutMs: REQUEST_TIMEOUT_MS,
  });
  return rig;
}

/** What a receiver that speaks HTTP badly sends: cut bodies, lying lengths, garbage, nothing. */
function rawAnswer(random: () => number): { kind: string; bytes: Uint8Array } {
  const text = (value: string) => new TextEncoder().encode(value);
  switch (below(random, 6)) {
    case 0:
      return { kind: "cut body", bytes: text("HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n0123456789") };
    case 1:
      return {
        kind: "lying chunk",
        bytes: text("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nffffffffffff\r\nabc"),
      };
    case 2:
      return { kind: "closed at once", bytes: new Uint8Array(0) };
    case 3:
      return {
        kind: "header flood",
        bytes: text(
          `HTTP/1.1 200 OK\r\n${"x-flood: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n".repeat(5000)}\r\n`,
        ),
      };
    case 4:
      return {
        kind: "odd status line",
        bytes: text(
          `HTTP/1.1 ${pick(random, ["999", "099", "2000", "abc", ""])} ${printable(random, 20)}\r\n\r\n`,
        ),
      };
    default:
      return { kind: "garbage", bytes: garbage(random, 300) };
  }
}

interface RawRig {
  exporter: ProfileExporter;
  reply: Uint8Array;
}
let rawRig: RawRig | undefined;

function startRawRig(): RawRig {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const rig: RawRig = {
    exporter: createExporter({
      endpoint: `http://127.0.0.1:${listener.addr.port}`,
      protocol: "http",
      timeoutMs: REQUEST_TIMEOUT_MS,
    }),
    reply: new Uint8Array(0),
  };
  (async () => {
    for await (const conn of listener) {
      const reply = rig.reply;
      (async () => {
        try {
          await conn.read(new Uint8Array(1 << 16));
          for (let offset = 0; offset < reply.length;) offset += await conn.write(reply.subarray(offset));
        } catch {
          // the client gave up first
        } finally {
          conn.close();
        }
      })();
    }
  })();
  return rig;
}

interface GrpcRig {
  exporter: ProfileExporter;
  answer: (stream: http2.ServerHttp2Stream) => void;
}
let grpcRig: GrpcRig | undefined;

async function startGrpcRig(): Promise<GrpcRig> {
  const rig: GrpcRig = { exporter: undefined as unknown as ProfileExporter, answer: () => {} };
  const server = http2.createServer();
  server.on("stream", (stream) => {
    stream.on("error", () => {});
    stream.on("data", () => {});
    stream.on("end", () => {
      try {
        rig.answer(stream);
      } catch {
        stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
      }
    });
  });
  server.on("sessionError", () => {});
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  rig.exporter = createExporter({
    endpoint: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    protocol: "grpc",
    timeoutMs: REQUEST_TIMEOUT_MS,
  });
  return rig;
}

/** A random gRPC answer on `stream`; returns what it was, for the tally. */
function grpcAnswer(
  random: () => number,
): { kind: string; answer: (stream: http2.ServerHttp2Stream) => void } {
  const status = pick(random, [200, 200, 200, 200, 301, 404, 503]);
  const grpcStatus = pick(random, ["0", "0", "1", "3", "8", "14", "16", "99", "-1", "abc", "1e3", ""]);
  const message = pick(random, ["", "down%20for%20maintenance", "%E0%A4%A", printable(random, 300)]);
  const encoding = pick(random, ["gzip", "identity", "snappy"]);
  switch (below(random, 5)) {
    case 0:
      return {
        kind: "trailers only",
        answer: (stream) =>
          stream.respond({
            ":status": status,
            "content-type": "application/grpc",
            "grpc-status": grpcStatus,
            "grpc-message": message,
          }, { endStream: true }),
      };
    case 1:
    case 2: {
      const { bytes } = grpcBody(random);
      return {
        kind: "message and trailers",
        answer: (stream) => {
          stream.respond(
            { ":status": status, "content-type": "application/grpc", "grpc-encoding": encoding },
            {
              waitForTrailers: true,
            },
          );
          stream.on(
            "wantTrailers",
            () => stream.sendTrailers({ "grpc-status": grpcStatus, "grpc-message": message }),
          );
          stream.end(bytes);
        },
      };
    }
    case 3:
      return {
        kind: "endless data",
        answer: (stream) => {
          stream.respond({ ":status": 200, "content-type": "application/grpc" });
          const chunk = new Uint8Array(1 << 16);
          const pump = () => {
            while (!stream.destroyed && !stream.closed) {
              if (!stream.write(chunk)) return void stream.once("drain", pump);
            }
          };
          pump();
        },
      };
    default:
      return {
        kind: "reset",
        answer: (stream) =>
          stream.close(
            pick(random, [http2.constants.NGHTTP2_INTERNAL_ERROR, http2.constants.NGHTTP2_REFUSED_STREAM]),
          ),
      };
  }
}

const request = gzipSync(new TextEncoder().encode("an export request"));

registerFuzzTest(import.meta.url, {
  name: "the HTTP and gRPC exporters on random answers of local receivers: a well-formed result, in time",
  cases: 400,
  seed: 0xc011,
  caseTimeBoundMs: REQUEST_TIMEOUT_MS + 3000,
  makeCase(random) {
    if (random() < 0.15) {
      const { kind, bytes } = rawAnswer(random);
      return {
        kind: `raw ${kind}`,
        run: async () => {
          rawRig ??= startRawRig();
          rawRig.reply = bytes;
          checkResult(await rawRig.exporter.send(request, new AbortController().signal), null);
        },
      };
    }
    if (random() < 0.6) {
      const status = pick(random, HTTP_STATUSES);
      const { kind, body } = httpBody(random);
      const headers: Record<string, string> = {};
      if (random() < 0.5) headers["retry-after"] = retryAfter(random);
      if (random() < 0.5) {
        headers["content-type"] = pick(random, [
          "application/x-protobuf",
          "text/plain",
          printable(random, 30),
        ]);
      }
      if (random() < 0.5) {
        headers["location"] = pick(random, ["/elsewhere", "http://127.0.0.1:9/x", printable(random, 500)]);
      }
      const nullBody = status === 204 || status === 205 || status === 304;
      return {
        kind: `HTTP ${kind}`,
        run: async () => {
          httpRig ??= startHttpRig();
          httpRig.answer = () => new Response(nullBody ? null : body, { status, headers });
          checkResult(await httpRig.exporter.send(request, new AbortController().signal), status);
        },
      };
    }
    const { kind, answer } = grpcAnswer(random);
    return {
      kind: `gRPC ${kind}`,
      run: async () => {
        grpcRig ??= await startGrpcRig();
        grpcRig.answer = answer;
        checkResult(await grpcRig.exporter.send(request, new AbortController().signal), null);
      },
    };
  },
  isOwnError: () => false,
  expectRefusals: false,
});
