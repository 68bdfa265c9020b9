/**
 * Sends gzip-compressed OTLP profiles export requests to a collector, over OTLP/HTTP or OTLP/gRPC, and
 * classifies the outcome the way the OTLP specification does: success (possibly partial), a failure worth
 * retrying (the endpoint is unreachable or overloaded), or a failure that retrying cannot fix.
 *
 * - HTTP: `POST` to the endpoint with `Content-Type: application/x-protobuf` and `Content-Encoding: gzip`.
 *   An endpoint URL without a path gets the signal's path, `/v1development/profiles`. 429 and 5xx are
 *   retried (honouring `Retry-After`), other statuses are not.
 * - gRPC: the unary call `ProfilesService/Export` over HTTP/2 (cleartext for `http://`, TLS for `https://`),
 *   the message gzip-compressed (`grpc-encoding: gzip`) in the length-prefixed gRPC framing, the outcome
 *   read from `grpc-status` (in the trailers, or the headers of a trailers-only response). The codes the
 *   specification lists as retryable are retried (UNAVAILABLE, RESOURCE_EXHAUSTED, ...).
 *
 * Both read the `ExportProfilesServiceResponse` for a partial success (profiles the endpoint rejected).
 *
 * The endpoint is trusted with profiles, not with the agent's memory or its headers: a response is read
 * up to {@linkcode MAX_RESPONSE_BYTES} and the connection dropped past it, a redirect is a failure (the
 * request's headers, credentials included, would go wherever it points), and a URL carrying credentials
 * is refused (a command line is readable by every user). With `https`, `caCerts` adds trusted
 * certificate authorities, for collectors whose certificate a private CA signed.
 *
 * @example
 * ```ts ignore
 * import { createExporter } from "./otlp_exporter.ts";
 * using exporter = createExporter({ endpoint: "http://collector:4318", protocol: "http" });
 * const result = await exporter.send(gzipSync(encodeOtlpProfiles(profile, options)), AbortSignal.timeout(10_000));
 * ```
 *
 * @module
 */
import http2 from "node:http2";
import { gunzipBounded } from "../output/gunzip.ts";
import { ProtobufReader, WireType } from "../output/protobuf_reader.ts";
import type { SendResult } from "./export_queue.ts";

/** How to reach the collector. */
export type OtlpProtocol = "http" | "grpc";

/** The HTTP path of the profiles signal. */
export const OTLP_HTTP_PATH = "/v1development/profiles";
/** The gRPC method of the profiles collector service. */
export const OTLP_GRPC_PATH = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export";

/** gRPC status codes the OTLP specification says to retry. */
const RETRYABLE_GRPC_CODES = new Set([1, 4, 8, 10, 11, 14, 15]);
const GRPC_CODE_NAMES: Readonly<Record<number, string>> = {
  0: "OK",
  1: "CANCELLED",
  2: "UNKNOWN",
  3: "INVALID_ARGUMENT",
  4: "DEADLINE_EXCEEDED",
  5: "NOT_FOUND",
  6: "ALREADY_EXISTS",
  7: "PERMISSION_DENIED",
  8: "RESOURCE_EXHAUSTED",
  9: "FAILED_PRECONDITION",
  10: "ABORTED",
  11: "OUT_OF_RANGE",
  12: "UNIMPLEMENTED",
  13: "INTERNAL",
  14: "UNAVAILABLE",
  15: "DATA_LOSS",
  16: "UNAUTHENTICATED",
};
/** Longest Retry-After honoured: a misconfigured server must not stall the agent for hours. */
const MAX_RETRY_AFTER_MS = 5 * 60_000;
/**
 * Longest response body read, and largest decompressed gRPC message: an export response is a few bytes (a
 * partial success with its message), an error page a few kilobytes.
 */
export const MAX_RESPONSE_BYTES = 1 << 20;

/** Options of {@linkcode createExporter}. */
export interface ExporterOptions {
  /** `http://host:port[/path]` or `https://...`. */
  endpoint: string;
  protocol: OtlpProtocol;
  /** Longest time one request may take, ms (default 10 s). */
  timeoutMs?: number;
  /** Extra request headers (authentication, tenant ids). */
  headers?: Readonly<Record<string, string>>;
  /** Sent as `User-Agent`. */
  userAgent?: string;
  /** PEM certificates of authorities trusted for `https` besides the system's (a private CA). */
  caCerts?: readonly string[];
}

/** Sends export requests to one endpoint. */
export interface ProfileExporter extends Disposable {
  /** Where requests go, for messages. */
  readonly target: string;
  /** Sends one gzip-compressed ExportProfilesServiceRequest. Never throws: failures are results. */
  send(gzippedRequest: Uint8Array, signal: AbortSignal): Promise<SendResult>;
  /** Closes connections. Safe to call twice. */
  close(): void;
}

/** Creates the exporter for `options.protocol`. Throws a `RangeError` for an unusable endpoint URL. */
export function createExporter(options: ExporterOptions): ProfileExporter {
  const url = parseEndpoint(options.endpoint);
  return options.protocol === "grpc" ? new GrpcExporter(url, options) : new HttpExporter(url, options);
}

/** Checks an endpoint URL: http or https, a host, no credentials or query. */
export function parseEndpoint(endpoint: string): URL {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw new RangeError(
      `Cannot use ${endpoint} as an OTLP endpoint: not a URL (e.g. http://collector:4318)`,
    );
  }
  if (url.username !== "" || url.password !== "") {
    // Not echoed: the message would carry the secret into logs.
    url.username = "";
    url.password = "";
    throw new RangeError(
      `Cannot use the OTLP endpoint ${url.origin}: credentials in the URL are refused (every user can read ` +
        `a command line); send them as a header, from --header-file FILE or OTEL_EXPORTER_OTLP_HEADERS`,
    );
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new RangeError(`Cannot use ${endpoint} as an OTLP endpoint: use http:// or https://`);
  }
  if (url.search !== "" || url.hash !== "") {
    throw new RangeError(`Cannot use ${endpoint} as an OTLP endpoint: no query or fragment allowed`);
  }
  return url;
}

/** The URL OTLP/HTTP requests go to: the endpoint's own path, or the signal's path when it has none. */
export function httpExportUrl(url: URL): string {
  const path = url.pathname === "/" || url.pathname === "" ? OTLP_HTTP_PATH : url.pathname;
  return `${url.origin}${path}`;
}

/**
 * Reads an ExportProfilesServiceResponse: the number of rejected profiles and the server's message
 * (both zero/empty when it accepted everything).
 */
export function decodeExportResponse(bytes: Uint8Array): { rejected: number; message: string } {
  const r = new ProtobufReader(bytes, "ExportProfilesServiceResponse");
  let rejected = 0;
  let message = "";
  while (r.next()) {
    if (r.field !== 1) {
      r.skip();
      continue;
    }
    r.expectWireType(WireType.LengthDelimited, "partial_success");
    const outer = r.enterLengthDelimited();
    while (r.next()) {
      if (r.field === 1) {
        r.expectWireType(WireType.Varint, "rejected_profiles");
        rejected = r.readInt64();
      } else if (r.field === 2) {
        r.expectWireType(WireType.LengthDelimited, "error_message");
        message = r.readString();
      } else r.skip();
    }
    r.exitLengthDelimited(outer);
  }
  return { rejected, message };
}

/** Parses `Retry-After` (seconds or an HTTP date) into ms, capped; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, nowMs = Date.now()): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  const seconds = Number(value);
  let ms: number;
  if (Number.isFinite(seconds)) ms = seconds * 1000;
  else {
    const date = Date.parse(value);
    if (Number.isNaN(date)) return undefined;
    ms = date - nowMs;
  }
  return Math.min(MAX_RETRY_AFTER_MS, Math.max(0, ms));
}

function reasonOf(error: unknown): string {
  if (error instanceof Error) {
    const cause = (error as { cause?: unknown }).cause;
    return cause instanceof Error ? `${error.message}: ${cause.message}` : error.message;
  }
  return String(error);
}

class HttpExporter implements ProfileExporter {
  readonly target: string;
  #timeoutMs: number;
  #headers: Record<string, string>;
  #client: Deno.HttpClient | undefined;

  constructor(url: URL, options: ExporterOptions) {
    this.target = httpExportUrl(url);
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    if (options.caCerts !== undefined && options.caCerts.length > 0) {
      this.#client = Deno.createHttpClient({ caCerts: [...options.caCerts] });
    }
    this.#headers = {
      ...options.headers,
      "content-type": "application/x-protobuf",
      "content-encoding": "gzip",
      ...(options.userAgent ? { "user-agent": options.userAgent } : {}),
    };
  }

  async send(gzippedRequest: Uint8Array, signal: AbortSignal): Promise<SendResult> {
    let response: Response;
    try {
      response = await fetch(this.target, {
        method: "POST",
        headers: this.#headers,
        // Never backed by a SharedArrayBuffer here; the type only says it could be.
        body: gzippedRequest as Uint8Array<ArrayBuffer>,
        signal: AbortSignal.any([signal, AbortSignal.timeout(this.#timeoutMs)]),
        // A redirect is answered, not followed: following would send the headers to another place.
        redirect: "manual",
        client: this.#client,
      });
    } catch (error) {
      return { ok: false, retryable: true, reason: reasonOf(error) };
    }
    const status = `HTTP ${response.status} ${response.statusText}`.trim();
    // Decided by the status alone: a redirect's body says nothing, and one that cannot be read (endless,
    // stalled) must not turn a mistake in the endpoint into a failure that is retried for ever.
    if (response.status >= 300 && response.status < 400) {
      await response.body?.cancel().catch(() => {});
      const location = response.headers.get("location");
      return {
        ok: false,
        retryable: false,
        reason: `${status}${location === null ? "" : ` to ${location.slice(0, 200)}`}: redirects are not ` +
          `followed (they would take the request's headers elsewhere); give the final URL as the endpoint`,
      };
    }
    let body: Uint8Array;
    let complete: boolean;
    try {
      ({ bytes: body, complete } = await readCapped(response.body, MAX_RESPONSE_BYTES));
    } catch (error) {
      return { ok: false, retryable: true, reason: `reading the response: ${reasonOf(error)}` };
    }
    if (response.ok) {
      // Accepted; a body cut short or unreadable carries no partial-success details.
      if (!complete) return { ok: true };
      try {
        const { rejected, message } = decodeExportResponse(body);
        return { ok: true, rejected, message };
      } catch {
        return { ok: true };
      }
    }
    const detail = errorDetail(response.headers.get("content-type"), body);
    const reason = detail === "" ? status : `${status}: ${detail}`;
    if (response.status === 429 || response.status >= 500) {
      return {
        ok: false,
        retryable: true,
        reason,
        retryAfterMs: parseRetryAfter(response.headers.get("retry-after")),
      };
    }
    return { ok: false, retryable: false, reason };
  }

  close(): void {
    this.#client?.close();
    this.#client = undefined;
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/**
 * Reads a response body up to `maxBytes` and cancels the rest (which closes the connection), so a
 * collector that answers without end costs at most the bound. `complete` is false when the body was cut.
 */
async function readCapped(
  body: ReadableStream<Uint8Array> | null,
  maxBytes: number,
): Promise<{ bytes: Uint8Array; complete: boolean }> {
  if (body === null) return { bytes: new Uint8Array(0), complete: true };
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { bytes: concatChunks(chunks), complete: true };
      if (total + value.length > maxBytes) {
        chunks.push(value.subarray(0, maxBytes - total));
        await reader.cancel();
        return { bytes: concatChunks(chunks), complete: false };
      }
      chunks.push(value);
      total += value.length;
    }
  } finally {
    reader.releaseLock();
  }
}

/** A short readable detail of an error response: its text, or the message of a google.rpc.Status. */
function errorDetail(contentType: string | null, body: Uint8Array): string {
  const head = body.subarray(0, 2048);
  if (contentType?.includes("protobuf")) {
    try {
      const r = new ProtobufReader(head, "google.rpc.Status");
      while (r.next()) {
        if (r.field === 2 && r.wireType === WireType.LengthDelimited) return r.readString();
        r.skip();
      }
    } catch {
      // not a Status
    }
    return "";
  }
  return new TextDecoder().decode(head).replace(/\s+/g, " ").trim().slice(0, 200);
}

class GrpcExporter implements ProfileExporter {
  readonly target: string;
  #origin: string;
  #timeoutMs: number;
  #headers: Record<string, string>;
  #caCerts: string[] | undefined;
  #session: http2.ClientHttp2Session | null = null;

  constructor(url: URL, options: ExporterOptions) {
    this.#origin = url.origin;
    if (options.caCerts !== undefined && options.caCerts.length > 0) this.#caCerts = [...options.caCerts];
    this.target = `${url.origin}${OTLP_GRPC_PATH}`;
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#headers = {
      ...options.headers,
      ...(options.userAgent ? { "user-agent": options.userAgent } : {}),
    };
  }

  #connect(): http2.ClientHttp2Session {
    const session = this.#session;
    if (session && !session.closed && !session.destroyed) return session;
    const fresh = this.#caCerts === undefined
      ? http2.connect(this.#origin)
      : http2.connect(this.#origin, { ca: this.#caCerts });
    // Errors also reach the request; this keeps an unhandled 'error' event from ending the process.
    fresh.on("error", () => {});
    const forget = () => {
      if (this.#session === fresh) this.#session = null;
    };
    fresh.on("close", forget);
    fresh.on("goaway", forget);
    this.#session = fresh;
    return fresh;
  }

  send(gzippedRequest: Uint8Array, signal: AbortSignal): Promise<SendResult> {
    return new Promise<SendResult>((resolve) => {
      let settled = false;
      let session: http2.ClientHttp2Session;
      const finish = (result: SendResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        if (!result.ok && result.retryable) {
          // A broken connection is not reused: the next attempt connects again.
          if (
            session && this.#session === session && /connect|ECONN|socket|session|GOAWAY/i.test(result.reason)
          ) {
            session.destroy();
            this.#session = null;
          }
        }
        resolve(result);
      };
      const timer = setTimeout(() => {
        request?.close(http2.constants.NGHTTP2_CANCEL);
        finish({
          ok: false,
          retryable: true,
          reason: `no answer within ${this.#timeoutMs} ms (DEADLINE_EXCEEDED)`,
        });
      }, this.#timeoutMs);
      const onAbort = () => {
        request?.close(http2.constants.NGHTTP2_CANCEL);
        finish({ ok: false, retryable: true, reason: "cancelled" });
      };
      let request: http2.ClientHttp2Stream | undefined;
      try {
        session = this.#connect();
        signal.addEventListener("abort", onAbort);
        if (signal.aborted) return onAbort();
        request = session.request({
          ...this.#headers,
          ":method": "POST",
          ":path": OTLP_GRPC_PATH,
          "content-type": "application/grpc+proto",
          te: "trailers",
          "grpc-encoding": "gzip",
          "grpc-accept-encoding": "gzip,identity",
          "grpc-timeout": `${this.#timeoutMs}m`,
        });
      } catch (error) {
        return finish({ ok: false, retryable: true, reason: reasonOf(error) });
      }
      let httpStatus = 0;
      let headerStatus: string | undefined;
      let headerMessage: string | undefined;
      let responseEncoding = "identity";
      const chunks: Uint8Array[] = [];
      let received = 0;
      request.on("response", (headers) => {
        httpStatus = Number(headers[":status"] ?? 0);
        headerStatus = headerValue(headers["grpc-status"]);
        headerMessage = headerValue(headers["grpc-message"]);
        responseEncoding = headerValue(headers["grpc-encoding"]) ?? "identity";
      });
      request.on("data", (chunk: Uint8Array) => {
        if (settled) return;
        received += chunk.length;
        if (received <= MAX_RESPONSE_BYTES) {
          chunks.push(chunk);
          return;
        }
        // Past the bound the stream is reset: the rest is neither read nor waited for. Whether the
        // collector took the profile cannot be known; resending would meet the same answer.
        request?.close(http2.constants.NGHTTP2_CANCEL);
        finish({
          ok: false,
          retryable: false,
          reason: `the answer is larger than ${MAX_RESPONSE_BYTES} bytes; not read`,
        });
      });
      let trailerStatus: string | undefined;
      let trailerMessage: string | undefined;
      request.on("trailers", (trailers) => {
        trailerStatus = headerValue(trailers["grpc-status"]);
        trailerMessage = headerValue(trailers["grpc-message"]);
      });
      request.on("error", (error) => finish({ ok: false, retryable: true, reason: reasonOf(error) }));
      request.on("close", () => {
        if (settled) return;
        if (httpStatus !== 200) {
          // Not a gRPC answer (a proxy's error page, say): map the HTTP status as gRPC does.
          const retryable = httpStatus === 0 || [429, 502, 503, 504].includes(httpStatus);
          const redirect = httpStatus >= 300 && httpStatus < 400 ? " (a redirect: not followed)" : "";
          return finish({
            ok: false,
            retryable,
            reason: httpStatus === 0
              ? "the connection closed without an answer"
              : `HTTP ${httpStatus}${redirect}`,
          });
        }
        const code = Number(trailerStatus ?? headerStatus ?? NaN);
        const message = decodeGrpcMessage(trailerMessage ?? headerMessage ?? "");
        if (!Number.isInteger(code)) {
          return finish({ ok: false, retryable: true, reason: "the answer had no grpc-status" });
        }
        if (code !== 0) {
          const name = GRPC_CODE_NAMES[code] ?? `code ${code}`;
          return finish({
            ok: false,
            retryable: RETRYABLE_GRPC_CODES.has(code),
            reason: message === "" ? `gRPC ${name}` : `gRPC ${name}: ${message}`,
          });
        }
        try {
          const payload = unframeGrpcMessage(concatChunks(chunks), responseEncoding);
          const { rejected, message: partial } = decodeExportResponse(payload);
          finish({ ok: true, rejected, message: partial });
        } catch {
          finish({ ok: true });
        }
      });
      request.end(frameGrpcMessage(gzippedRequest, true));
    });
  }

  close(): void {
    this.#session?.close();
    this.#session = null;
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

function headerValue(value: string | string[] | number | undefined): string | undefined {
  if (value === undefined) return undefined;
  return Array.isArray(value) ? value[0] : String(value);
}

/** grpc-message is percent-encoded. */
function decodeGrpcMessage(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

/** The gRPC length-prefixed framing of one message: compressed flag, u32 big-endian length, bytes. */
export function frameGrpcMessage(payload: Uint8Array, compressed: boolean): Uint8Array {
  const framed = new Uint8Array(5 + payload.length);
  framed[0] = compressed ? 1 : 0;
  new DataView(framed.buffer).setUint32(1, payload.length, false);
  framed.set(payload, 5);
  return framed;
}

/**
 * The first message of a gRPC response body (empty when there is none), decompressed if flagged, at most
 * {@linkcode MAX_RESPONSE_BYTES} once decompressed. Throws a `RangeError` "Cannot ..." for a malformed one.
 */
export function unframeGrpcMessage(body: Uint8Array, encoding: string): Uint8Array {
  if (body.length === 0) return body;
  if (body.length < 5) throw new RangeError(`Cannot read a gRPC message: ${body.length} bytes, need 5`);
  const length = new DataView(body.buffer, body.byteOffset, body.byteLength).getUint32(1, false);
  if (length > body.length - 5) {
    throw new RangeError(
      `Cannot read a gRPC message: length ${length} exceeds the ${body.length - 5} bytes left`,
    );
  }
  const payload = body.subarray(5, 5 + length);
  if (body[0] === 0) return payload;
  if (encoding !== "gzip") throw new RangeError(`Cannot read a gRPC message compressed with ${encoding}`);
  return gunzipBounded(payload, MAX_RESPONSE_BYTES, "a gRPC message");
}

function concatChunks(chunks: Uint8Array[]): Uint8Array {
  let size = 0;
  for (const chunk of chunks) size += chunk.length;
  const out = new Uint8Array(size);
  let pos = 0;
  for (const chunk of chunks) {
    out.set(chunk, pos);
    pos += chunk.length;
  }
  return out;
}
