/**
 * pprof files decoded by protobufjs from the published `profile.proto` (tests/proto/pprof/): a decoder
 * that shares no code with omniprof's encoder or reader, for tests that check what was written.
 *
 * @example
 * ```ts
 * import { decodePprofBySchema } from "./pprof_schema.ts";
 * const profile = decodePprofBySchema(Deno.readFileSync("profile.pb.gz"));
 * console.log(profile.sample.length, profile.stringTable[1]);
 * ```
 *
 * @module
 */

import { gunzipSync } from "node:zlib";
import protobuf from "protobufjs";
import { PROTO_DIR } from "./helpers.ts";

// The message shapes as protobufjs's toObject() gives them, with 64-bit integers as decimal strings.
export interface PbValueType {
  type: string;
  unit: string;
}
export interface PbLabel {
  key: string;
  str: string;
  num: string;
  numUnit: string;
}
export interface PbSample {
  locationId: string[];
  value: string[];
  label: PbLabel[];
}
export interface PbMapping {
  id: string;
  memoryStart: string;
  memoryLimit: string;
  fileOffset: string;
  filename: string;
  buildId: string;
  hasFunctions: boolean;
  hasFilenames: boolean;
  hasLineNumbers: boolean;
}
export interface PbLine {
  functionId: string;
  line: string;
}
export interface PbLocation {
  id: string;
  mappingId: string;
  address: string;
  line: PbLine[];
}
export interface PbFunction {
  id: string;
  name: string;
  systemName: string;
  filename: string;
}
export interface PbProfile {
  sampleType: PbValueType[];
  sample: PbSample[];
  mapping: PbMapping[];
  location: PbLocation[];
  function: PbFunction[];
  stringTable: string[];
  timeNanos: string;
  durationNanos: string;
  periodType: PbValueType;
  period: string;
}

let profileType: protobuf.Type | null = null;

/** Decodes a pprof file's bytes, gzipped (as written) or not, with every field present. */
export function decodePprofBySchema(bytes: Uint8Array): PbProfile {
  profileType ??= protobuf.loadSync(`${PROTO_DIR}pprof/profile.proto`).lookupType(
    "perftools.profiles.Profile",
  );
  const raw = bytes[0] === 0x1f && bytes[1] === 0x8b ? gunzipSync(bytes) : bytes;
  const message = profileType.decode(raw);
  return profileType.toObject(message, { longs: String, defaults: true, arrays: true }) as PbProfile;
}

/** Every address the file holds: location addresses and mapping ranges. */
export function pprofAddresses(profile: PbProfile): bigint[] {
  return [
    ...profile.location.map((location) => BigInt(location.address)),
    ...profile.mapping.flatMap((mapping) => [BigInt(mapping.memoryStart), BigInt(mapping.memoryLimit)]),
  ];
}
