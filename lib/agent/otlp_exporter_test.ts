import assert from "node:assert/strict";
import http2 from "node:http2";
import { gunzipSync, gzipSync } from "node:zlib";
import { ProtobufWriter } from "../output/protobuf_writer.ts";
import { hasTool, run } from "../testing/commands.ts";
import { bootstrapped, requiring } from "../testing/requirements.ts";
import {
  createExporter,
  decodeExportResponse,
  frameGrpcMessage,
  httpExportUrl,
  MAX_RESPONSE_BYTES,
  OTLP_GRPC_PATH,
  parseEndpoint,
  parseRetryAfter,
  unframeGrpcMessage,
} from "./otlp_exporter.ts";

/** An ExportProfilesServiceResponse with a partial success. */
function partialSuccess(rejected: number, message: string): Uint8Array {
  const w = new ProtobufWriter();
  const mark = w.beginLengthDelimited(1);
  w.writeInt64Field(1, rejected);
  w.writeStringField(2, message);
  w.endLengthDelimited(mark);
  return w.finish();
}

const body = gzipSync(new TextEncoder().encode("an export request"));

/** A local HTTP server answering with `respond`; records the requests. */
function httpServer(respond: (request: Request) => Response | Promise<Response>) {
  const requests: Array<{ path: string; headers: Headers; body: Uint8Array }> = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (request) => {
    const bytes = new Uint8Array(await request.arrayBuffer());
    requests.push({ path: new URL(request.url).pathname, headers: request.headers, body: bytes });
    return respond(request);
  });
  return { server, requests, url: `http://127.0.0.1:${(server.addr as Deno.NetAddr).port}` };
}

Deno.test("parseEndpoint() and httpExportUrl() accept collector URLs and add the signal path when none", () => {
  assert.equal(
    httpExportUrl(parseEndpoint("http://collector:4318")),
    "http://collector:4318/v1development/profiles",
  );
  assert.equal(
    httpExportUrl(parseEndpoint("https://otel.example/")),
    "https://otel.example/v1development/profiles",
  );
  assert.equal(httpExportUrl(parseEndpoint("http://c:4318/custom/path")), "http://c:4318/custom/path");
  assert.throws(() => parseEndpoint("collector:4318"), /use http:\/\/ or https:\/\//);
  assert.throws(() => parseEndpoint("not a url"), /not a URL/);
  assert.throws(() => parseEndpoint("ftp://c"), /use http:\/\/ or https:\/\//);
  assert.throws(() => parseEndpoint("http://c/?a=1"), /no query or fragment/);
});

Deno.test("parseRetryAfter() reads seconds and HTTP dates, capped at five minutes", () => {
  assert.equal(parseRetryAfter("3"), 3000);
  assert.equal(parseRetryAfter("0.5"), 500);
  assert.equal(parseRetryAfter(null), undefined);
  assert.equal(parseRetryAfter("soon"), undefined);
  const now = Date.parse("2025-01-01T00:00:00Z");
  assert.equal(parseRetryAfter("Wed, 01 Jan 2025 00:00:10 GMT", now), 10_000);
  assert.equal(parseRetryAfter("Tue, 31 Dec 2024 00:00:00 GMT", now), 0);
  assert.equal(parseRetryAfter("86400"), 300_000);
});

Deno.test("decodeExportResponse() reads a partial success; frameGrpcMessage() round-trips, gzip included", () => {
  assert.deepEqual(decodeExportResponse(new Uint8Array(0)), { rejected: 0, message: "" });
  assert.deepEqual(decodeExportResponse(partialSuccess(3, "too old")), { rejected: 3, message: "too old" });
  assert.throws(() => decodeExportResponse(new Uint8Array([0x0a, 0x05, 0x08])), /Cannot decode/);
  const payload = new TextEncoder().encode("payload");
  assert.deepEqual(unframeGrpcMessage(frameGrpcMessage(payload, false), "identity"), payload);
  assert.deepEqual(
    new Uint8Array(unframeGrpcMessage(frameGrpcMessage(gzipSync(payload), true), "gzip")),
    payload,
  );
  assert.equal(unframeGrpcMessage(new Uint8Array(0), "identity").length, 0);
  assert.throws(() => unframeGrpcMessage(new Uint8Array([0, 0, 0, 0, 9, 1]), "identity"), /exceeds/);
  assert.throws(
    () => unframeGrpcMessage(frameGrpcMessage(payload, true), "snappy"),
    /compressed with snappy/,
  );
});

Deno.test("HTTP exporter posts gzip protobuf and reads success, partial success and error statuses", async () => {
  let answer: () => Response = () => new Response(null, { status: 200 });
  const { server, requests, url } = httpServer(() => answer());
  using exporter = createExporter({
    endpoint: url,
    protocol: "http",
    headers: { authorization: "Bearer secret" },
    userAgent: "omniprof/test",
  });
  try {
    const signal = new AbortController().signal;
    assert.deepEqual(await exporter.send(body, signal), { ok: true, rejected: 0, message: "" });
    const [first] = requests;
    assert.equal(first!.path, "/v1development/profiles");
    assert.equal(first!.headers.get("content-type"), "application/x-protobuf");
    assert.equal(first!.headers.get("content-encoding"), "gzip");
    assert.equal(first!.headers.get("authorization"), "Bearer secret");
    assert.equal(first!.headers.get("user-agent"), "omniprof/test");
    assert.deepEqual(gunzipSync(first!.body), gunzipSync(body));

    answer = () => new Response(partialSuccess(2, "dropped 2") as Uint8Array<ArrayBuffer>, { status: 200 });
    assert.deepEqual(await exporter.send(body, signal), { ok: true, rejected: 2, message: "dropped 2" });

    answer = () => new Response("overloaded", { status: 503, headers: { "retry-after": "2" } });
    assert.deepEqual(await exporter.send(body, signal), {
      ok: false,
      retryable: true,
      reason: "HTTP 503 Service Unavailable: overloaded",
      retryAfterMs: 2000,
    });
    answer = () => new Response("slow down", { status: 429 });
    const throttled = await exporter.send(body, signal);
    assert.ok(!throttled.ok && throttled.retryable);
    answer = () => new Response("bad profile", { status: 400 });
    assert.deepEqual(await exporter.send(body, signal), {
      ok: false,
      retryable: false,
      reason: "HTTP 400 Bad Request: bad profile",
    });
  } finally {
    await server.shutdown();
  }
  // The server is gone: connection refused is worth retrying.
  const refused = await exporter.send(body, new AbortController().signal);
  assert.ok(!refused.ok && refused.retryable, JSON.stringify(refused));
});

Deno.test("HTTP exporter gives up on a request that outlasts its timeout or is aborted, to retry it", async () => {
  const { promise: release, resolve } = Promise.withResolvers<void>();
  const { server, url } = httpServer(async () => {
    await release;
    return new Response(null, { status: 200 });
  });
  try {
    using slow = createExporter({ endpoint: url, protocol: "http", timeoutMs: 200 });
    const started = performance.now();
    const result = await slow.send(body, new AbortController().signal);
    assert.ok(!result.ok && result.retryable, JSON.stringify(result));
    assert.ok(performance.now() - started < 2000);
    const controller = new AbortController();
    const pending = slow.send(body, controller.signal);
    controller.abort();
    const aborted = await pending;
    assert.ok(!aborted.ok && aborted.retryable);
  } finally {
    resolve();
    await server.shutdown();
  }
});

/** A local cleartext HTTP/2 gRPC server; `answer` decides each call's status. */
async function grpcServer(answer: () => { status: number; message?: string; response?: Uint8Array }) {
  const calls: Array<{ headers: http2.IncomingHttpHeaders; payload: Uint8Array }> = [];
  const server = http2.createServer();
  server.on("stream", (stream, headers) => {
    const chunks: Uint8Array[] = [];
    stream.on("data", (chunk: Uint8Array) => chunks.push(chunk));
    stream.on("end", () => {
      calls.push({
        headers,
        payload: unframeGrpcMessage(Buffer.concat(chunks), String(headers["grpc-encoding"])),
      });
      const { status, message, response } = answer();
      if (status !== 0) {
        stream.respond({
          ":status": 200,
          "content-type": "application/grpc",
          "grpc-status": String(status),
          "grpc-message": encodeURIComponent(message ?? ""),
        }, { endStream: true });
        return;
      }
      stream.respond({ ":status": 200, "content-type": "application/grpc", "grpc-encoding": "gzip" }, {
        waitForTrailers: true,
      });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(frameGrpcMessage(gzipSync(response ?? new Uint8Array(0)), true));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    calls,
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

Deno.test("gRPC exporter calls ProfilesService/Export and maps grpc-status to retry or not", async () => {
  let answer: () => { status: number; message?: string; response?: Uint8Array } = () => ({ status: 0 });
  const server = await grpcServer(() => answer());
  const exporter = createExporter({ endpoint: server.url, protocol: "grpc", userAgent: "omniprof/test" });
  try {
    const signal = new AbortController().signal;
    assert.deepEqual(await exporter.send(body, signal), { ok: true, rejected: 0, message: "" });
    const [call] = server.calls;
    assert.equal(call!.headers[":path"], OTLP_GRPC_PATH);
    assert.equal(call!.headers["content-type"], "application/grpc+proto");
    assert.equal(call!.headers["grpc-encoding"], "gzip");
    assert.equal(call!.headers["te"], "trailers");
    assert.match(String(call!.headers["grpc-timeout"]), /^\d+m$/);
    assert.deepEqual(call!.payload, new Uint8Array(gunzipSync(body)));

    answer = () => ({ status: 0, response: partialSuccess(1, "one too old") });
    assert.deepEqual(await exporter.send(body, signal), { ok: true, rejected: 1, message: "one too old" });
    answer = () => ({ status: 14, message: "down for maintenance" });
    assert.deepEqual(await exporter.send(body, signal), {
      ok: false,
      retryable: true,
      reason: "gRPC UNAVAILABLE: down for maintenance",
    });
    answer = () => ({ status: 8 });
    const exhausted = await exporter.send(body, signal);
    assert.ok(!exhausted.ok && exhausted.retryable);
    answer = () => ({ status: 3, message: "bad profile" });
    assert.deepEqual(await exporter.send(body, signal), {
      ok: false,
      retryable: false,
      reason: "gRPC INVALID_ARGUMENT: bad profile",
    });
    assert.equal(server.calls.length, 5, "one connection carried every call");
  } finally {
    exporter.close();
    await server.close();
  }
  const refused = await exporter.send(body, new AbortController().signal);
  assert.ok(!refused.ok && refused.retryable, JSON.stringify(refused));
  exporter.close();
});

Deno.test("parseEndpoint() refuses credentials in the URL without repeating them", () => {
  for (
    const endpoint of ["http://alice:s3cret@collector:4318", "https://t0ken@collector", "http://:s3cret@c"]
  ) {
    assert.throws(() => parseEndpoint(endpoint), (error: unknown) => {
      assert.ok(error instanceof RangeError);
      assert.match(error.message, /credentials in the URL are refused/);
      assert.match(error.message, /--header-file FILE or OTEL_EXPORTER_OTLP_HEADERS/);
      assert.doesNotMatch(error.message, /s3cret|t0ken|alice/);
      return true;
    });
  }
});

Deno.test("HTTP exporter does not follow a redirect, and says so", async () => {
  // The place the redirect points to: it must never see the request or its headers.
  const elsewhere = httpServer(() => new Response(null, { status: 200 }));
  const redirecting = httpServer(() =>
    new Response(null, { status: 307, headers: { location: `${elsewhere.url}/v1development/profiles` } })
  );
  try {
    using exporter = createExporter({
      endpoint: redirecting.url,
      protocol: "http",
      headers: { authorization: "Bearer secret" },
    });
    const result = await exporter.send(body, new AbortController().signal);
    assert.equal(result.ok, false);
    assert.ok(!result.ok && !result.retryable, "a redirect will not go away by itself");
    assert.match(
      result.reason,
      new RegExp(
        `^HTTP 307 Temporary Redirect to ${elsewhere.url}/v1development/profiles: redirects are not followed`,
      ),
    );
    assert.equal(redirecting.requests.length, 1);
    assert.equal(elsewhere.requests.length, 0, "nothing went where the redirect pointed");
  } finally {
    await redirecting.server.shutdown();
    await elsewhere.server.shutdown();
  }
});

/** A server whose answers never end: it counts what it wrote and resolves `closed` when the client leaves. */
function endlessHttpServer(status: number) {
  const chunk = new Uint8Array(1 << 16).fill(0x41);
  const state = { written: 0, closed: Promise.withResolvers<void>() };
  const { server, url } = httpServer(() =>
    new Response(
      new ReadableStream<Uint8Array>({
        pull(controller) {
          controller.enqueue(chunk);
          state.written += chunk.length;
        },
        cancel() {
          state.closed.resolve();
        },
      }),
      { status },
    )
  );
  return { server, url, state };
}

function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} not within ${ms} ms`)), ms);
    }),
  ]);
}

Deno.test("HTTP exporter stops reading an endless response at its bound and drops the connection", async () => {
  for (const status of [200, 500]) {
    const { server, url, state } = endlessHttpServer(status);
    try {
      using exporter = createExporter({ endpoint: url, protocol: "http", timeoutMs: 2000 });
      const result = await exporter.send(body, new AbortController().signal);
      if (status === 200) {
        assert.deepEqual(result, { ok: true }, "accepted; the cut body gives no partial-success details");
      } else {
        assert.ok(!result.ok && result.retryable, JSON.stringify(result).slice(0, 200));
        assert.match(result.reason, /^HTTP 500 Internal Server Error: A{200}$/);
      }
      // The server sees the connection close as soon as the bound is reached, not at the timeout.
      await within(2000, "the server noticing the client left", state.closed.promise);
      const written = state.written;
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(state.written, written, "nothing more was asked for once the connection closed");
      console.log(`HTTP ${status}: the server wrote ${written} bytes before the client left`);
    } finally {
      await server.shutdown();
    }
  }
});

Deno.test("gRPC exporter resets a stream whose answer outgrows its bound", async () => {
  const chunk = new Uint8Array(1 << 16).fill(0x41);
  let written = 0;
  const closed = Promise.withResolvers<void>();
  const server = http2.createServer();
  server.on("stream", (stream) => {
    stream.on("error", () => {});
    stream.on("close", () => closed.resolve());
    stream.on("data", () => {});
    stream.on("end", () => {
      stream.respond({ ":status": 200, "content-type": "application/grpc" });
      const pump = () => {
        while (!stream.destroyed && !stream.closed) {
          written += chunk.length;
          if (!stream.write(chunk)) return void stream.once("drain", pump);
        }
      };
      pump();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  const exporter = createExporter({ endpoint: url, protocol: "grpc", timeoutMs: 5000 });
  try {
    const result = await exporter.send(body, new AbortController().signal);
    assert.deepEqual(result, {
      ok: false,
      retryable: false,
      reason: `the answer is larger than ${MAX_RESPONSE_BYTES} bytes; not read`,
    });
    await within(2000, "the server seeing the stream reset", closed.promise);
    console.log(`gRPC: the server wrote ${written} bytes before the stream was reset`);
  } finally {
    exporter.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

Deno.test("unframeGrpcMessage() refuses a message that decompresses past the bound", () => {
  const bomb = frameGrpcMessage(gzipSync(new Uint8Array(MAX_RESPONSE_BYTES + 1)), true);
  assert.throws(
    () => unframeGrpcMessage(bomb, "gzip"),
    new RegExp(
      `^RangeError: Cannot decode a gRPC message: decompresses to more than ${MAX_RESPONSE_BYTES} bytes`,
    ),
  );
  const whole = new Uint8Array(MAX_RESPONSE_BYTES).fill(7);
  assert.deepEqual(unframeGrpcMessage(frameGrpcMessage(gzipSync(whole), true), "gzip"), whole);
});

/** A private CA and a certificate it signed for 127.0.0.1, made with openssl; null with the reason it cannot. */
function privateCa(): { ca: string; cert: string; key: string } | string {
  if (!hasTool("openssl")) {
    return "openssl is missing (Debian package openssl, installed by bootstrap for the tests)";
  }
  const dir = Deno.makeTempDirSync({ prefix: "omniprof-tls-" });
  try {
    const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    run(
      "openssl",
      ...["req", "-x509", ...ec, "-keyout", `${dir}/ca.key`, "-out", `${dir}/ca.pem`, "-days", "1"],
      ...["-subj", "/CN=omniprof test CA", "-addext", "basicConstraints=critical,CA:TRUE"],
      ...["-addext", "keyUsage=critical,keyCertSign"],
    );
    run(
      "openssl",
      "req",
      ...ec,
      "-keyout",
      `${dir}/server.key`,
      "-out",
      `${dir}/server.csr`,
      "-subj",
      "/CN=127.0.0.1",
    );
    Deno.writeTextFileSync(`${dir}/ext`, "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n");
    run(
      "openssl",
      ...["x509", "-req", "-in", `${dir}/server.csr`, "-CA", `${dir}/ca.pem`, "-CAkey", `${dir}/ca.key`],
      ...["-CAcreateserial", "-out", `${dir}/server.pem`, "-days", "1", "-extfile", `${dir}/ext`],
    );
    return {
      ca: Deno.readTextFileSync(`${dir}/ca.pem`),
      cert: Deno.readTextFileSync(`${dir}/server.pem`),
      key: Deno.readTextFileSync(`${dir}/server.key`),
    };
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

const tls = privateCa();

function tlsTest(name: string, fn: (pki: { ca: string; cert: string; key: string }) => Promise<void>) {
  return requiring([bootstrapped(typeof tls === "string" ? tls : null)], {
    name,
    fn: () => fn(tls as Exclude<typeof tls, string>),
  });
}

Deno.test(
  tlsTest(
    "HTTP exporter reaches an https collector signed by a private CA given with caCerts",
    async (pki) => {
      const requests: string[] = [];
      const server = Deno.serve(
        { hostname: "127.0.0.1", port: 0, cert: pki.cert, key: pki.key, onListen: () => {} },
        async (request) => {
          requests.push(
            `${request.headers.get("authorization")} ${(await request.arrayBuffer()).byteLength}`,
          );
          return new Response(partialSuccess(1, "one too old") as Uint8Array<ArrayBuffer>, { status: 200 });
        },
      );
      const url = `https://127.0.0.1:${(server.addr as Deno.NetAddr).port}`;
      try {
        {
          using trusting = createExporter({
            endpoint: url,
            protocol: "http",
            caCerts: [pki.ca],
            headers: { authorization: "Bearer secret" },
          });
          const result = await trusting.send(body, new AbortController().signal);
          assert.deepEqual(result, { ok: true, rejected: 1, message: "one too old" });
          assert.deepEqual(requests, [`Bearer secret ${body.length}`]);
        }
        // Without the CA the certificate is unknown: nothing is sent, and the failure names the certificate.
        using doubting = createExporter({
          endpoint: url,
          protocol: "http",
          headers: { authorization: "Bearer secret" },
        });
        const refused = await doubting.send(body, new AbortController().signal);
        assert.ok(!refused.ok && refused.retryable, JSON.stringify(refused));
        console.log(`without the CA: ${refused.reason}`);
        assert.match(refused.reason, /certificate|UnknownIssuer/i);
        assert.equal(requests.length, 1, "the untrusted server received nothing");
      } finally {
        await server.shutdown();
      }
    },
  ),
);

Deno.test(
  tlsTest("gRPC exporter reaches a TLS collector signed by a private CA given with caCerts", async (pki) => {
    const calls: string[] = [];
    const server = http2.createSecureServer({ cert: pki.cert, key: pki.key });
    server.on("stream", (stream, headers) => {
      stream.on("data", () => {});
      stream.on("end", () => {
        calls.push(String(headers["authorization"]));
        stream.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "0" }, {
          endStream: true,
        });
      });
    });
    // A failed handshake is the client's business; the server carries on.
    server.on("tlsClientError", () => {});
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const url = `https://127.0.0.1:${(server.address() as { port: number }).port}`;
    const trusting = createExporter({
      endpoint: url,
      protocol: "grpc",
      caCerts: [pki.ca],
      headers: { authorization: "Bearer secret" },
    });
    const doubting = createExporter({ endpoint: url, protocol: "grpc", timeoutMs: 5000 });
    try {
      assert.deepEqual(await trusting.send(body, new AbortController().signal), {
        ok: true,
        rejected: 0,
        message: "",
      });
      assert.deepEqual(calls, ["Bearer secret"]);
      const refused = await doubting.send(body, new AbortController().signal);
      assert.ok(!refused.ok && refused.retryable, JSON.stringify(refused));
      console.log(`without the CA: ${refused.reason}`);
      assert.match(refused.reason, /certificate/i);
      assert.equal(calls.length, 1, "the untrusted server received nothing");
    } finally {
      trusting.close();
      doubting.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }),
);
