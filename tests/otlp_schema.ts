/**
 * The published OpenTelemetry profiles schema (tests/proto/opentelemetry/), loaded at test time with
 * protobufjs, so that what omniprof exports is decoded by code that shares nothing with its encoder. Also flattens a decoded request into per-sample records that tests
 * can assert on.
 *
 * @module
 */
import protobuf from "protobufjs";
import { PROTO_DIR } from "./helpers.ts";

/** The include root of the published .proto files (they import each other as `opentelemetry/proto/...`). */
export const OTEL_PROTO_ROOT = PROTO_DIR;
const SERVICE_PROTO = "opentelemetry/proto/collector/profiles/v1development/profiles_service.proto";

/** The request and response types of the profiles collector service. */
export interface OtelSchema {
  request: protobuf.Type;
  response: protobuf.Type;
}

let schema: OtelSchema | undefined;

/** Loads (once) the collector service's messages. */
export function loadOtelSchema(): OtelSchema {
  if (schema) return schema;
  const root = new protobuf.Root();
  root.resolvePath = (_origin: string, target: string) =>
    target.startsWith("/") ? target : `${OTEL_PROTO_ROOT}${target}`;
  root.loadSync(SERVICE_PROTO, { keepCase: true });
  root.resolveAll();
  const ns = "opentelemetry.proto.collector.profiles.v1development.";
  schema = {
    request: root.lookupType(`${ns}ExportProfilesServiceRequest`),
    response: root.lookupType(`${ns}ExportProfilesServiceResponse`),
  };
  return schema;
}

// The decoded request as plain data (protobufjs's toObject with every field present): 64-bit integers as
// decimal strings, bytes as arrays of numbers, oneofs named in `value`.

/** common.v1.AnyValue; `value` names the member that is set. */
export interface DecodedAnyValue {
  value?: string;
  string_value?: string;
  bool_value?: boolean;
  int_value?: string;
  double_value?: number;
  string_value_strindex?: number;
}

/** common.v1.KeyValue. */
export interface DecodedKeyValue {
  key: string;
  value: DecodedAnyValue | null;
  key_strindex: number;
}

/** profiles.v1development.ValueType. */
export interface DecodedValueType {
  type_strindex: number;
  unit_strindex: number;
}

/** profiles.v1development.Sample. */
export interface DecodedSample {
  stack_index: number;
  attribute_indices: number[];
  link_index: number;
  values: string[];
  timestamps_unix_nano: string[];
}

/** profiles.v1development.Profile. */
export interface DecodedProfile {
  sample_type: DecodedValueType;
  samples: DecodedSample[];
  time_unix_nano: string;
  duration_nano: string;
  period_type: DecodedValueType;
  period: string;
  profile_id: number[];
  attribute_indices: number[];
}

/** profiles.v1development.ResourceProfiles with its ScopeProfiles. */
export interface DecodedResourceProfiles {
  resource: { attributes: DecodedKeyValue[] };
  scope_profiles: Array<
    { scope: { name: string; version: string }; profiles: DecodedProfile[]; schema_url: string }
  >;
  schema_url: string;
}

/** profiles.v1development.Mapping. */
export interface DecodedMapping {
  memory_start: string;
  memory_limit: string;
  file_offset: string;
  filename_strindex: number;
  attribute_indices: number[];
}

/** profiles.v1development.Location. */
export interface DecodedLocation {
  mapping_index: number;
  address: string;
  lines: Array<{ function_index: number; line: string; column: string }>;
  attribute_indices: number[];
}

/** profiles.v1development.Function. */
export interface DecodedFunction {
  name_strindex: number;
  system_name_strindex: number;
  filename_strindex: number;
  start_line: string;
}

/** profiles.v1development.ProfilesDictionary. */
export interface DecodedDictionary {
  mapping_table: DecodedMapping[];
  location_table: DecodedLocation[];
  function_table: DecodedFunction[];
  link_table: Array<{ trace_id: number[]; span_id: number[] }>;
  string_table: string[];
  attribute_table: Array<{ key_strindex: number; value: DecodedAnyValue | null; unit_strindex: number }>;
  stack_table: Array<{ location_indices: number[] }>;
}

/** collector.profiles.v1development.ExportProfilesServiceRequest. */
export interface DecodedRequest {
  resource_profiles: DecodedResourceProfiles[];
  dictionary: DecodedDictionary;
}

/** Decodes an (uncompressed) ExportProfilesServiceRequest, with every field present (defaults filled). */
export function decodeRequest(bytes: Uint8Array): DecodedRequest {
  const { request } = loadOtelSchema();
  return request.toObject(request.decode(bytes), {
    longs: String,
    bytes: Array,
    defaults: true,
    arrays: true,
    oneofs: true,
  }) as DecodedRequest;
}

/** Encodes an ExportProfilesServiceResponse (what a receiver answers). */
export function encodeResponse(rejected = 0, message = ""): Uint8Array {
  const { response } = loadOtelSchema();
  const value = rejected === 0 && message === ""
    ? {}
    : { partial_success: { rejected_profiles: rejected, error_message: message } };
  return response.encode(response.fromObject(value)).finish();
}

/** A value of an AnyValue as a JS value (strings resolved through the dictionary's string table). */
export function anyValue(value: DecodedAnyValue | null, strings: string[]): string | number | boolean | null {
  switch (value?.value) {
    case "string_value":
      return value!.string_value ?? null;
    case "string_value_strindex":
      return strings[value!.string_value_strindex ?? 0] ?? null;
    case "bool_value":
      return value!.bool_value ?? null;
    case "int_value":
      return Number(value!.int_value);
    case "double_value":
      return value!.double_value ?? null;
    default:
      return null;
  }
}

/** One sample of a decoded request, with its resource, frames and attributes resolved. */
export interface FlatSample {
  resource: Record<string, string | number | boolean | null>;
  attributes: Record<string, string | number | boolean | null>;
  /** Function names, root first. */
  frames: string[];
  /** `profile.frame.type` of each frame, root first. */
  frameTypes: string[];
  values: number[];
  /** The profile's sample type, `type/unit` ("samples/count", "off_cpu/nanoseconds"). */
  sampleType: string;
  /** The profile's time_unix_nano, exact. */
  timeUnixNano: bigint;
  durationNano: bigint;
}

/** Resolves every sample of a decoded request through the dictionary. */
export function flattenRequest(request: DecodedRequest): FlatSample[] {
  const dictionary = request.dictionary;
  const strings: string[] = dictionary.string_table;
  const attribute = (index: number): [string, string | number | boolean | null] => {
    const entry = dictionary.attribute_table[index]!;
    return [strings[entry.key_strindex]!, anyValue(entry.value, strings)];
  };
  const out: FlatSample[] = [];
  for (const rp of request.resource_profiles) {
    const resource: FlatSample["resource"] = {};
    for (const kv of rp.resource.attributes) {
      resource[kv.key !== "" ? kv.key : strings[kv.key_strindex]!] = anyValue(kv.value, strings);
    }
    for (const sp of rp.scope_profiles) {
      for (const profile of sp.profiles) {
        for (const sample of profile.samples) {
          const stack = dictionary.stack_table[sample.stack_index]!;
          const frames: string[] = [];
          const frameTypes: string[] = [];
          for (const locationIndex of stack.location_indices) {
            const location = dictionary.location_table[locationIndex]!;
            const line = location.lines[0];
            const fn = line ? dictionary.function_table[line.function_index] : undefined;
            frames.push(fn ? strings[fn.name_strindex]! : "");
            const types = location.attribute_indices.map(attribute).filter(([key]) =>
              key === "profile.frame.type"
            );
            frameTypes.push(types.length > 0 ? String(types[0]![1]) : "");
          }
          frames.reverse();
          frameTypes.reverse();
          out.push({
            resource,
            attributes: Object.fromEntries(sample.attribute_indices.map(attribute)),
            frames,
            frameTypes,
            values: sample.values.map(Number),
            sampleType: `${strings[profile.sample_type.type_strindex]}/${
              strings[profile.sample_type.unit_strindex]
            }`,
            timeUnixNano: BigInt(profile.time_unix_nano),
            durationNano: BigInt(profile.duration_nano),
          });
        }
      }
    }
  }
  return out;
}
