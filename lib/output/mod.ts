/**
 * Profile output: pprof (write and read) and folded stacks, plus the protobuf primitives under them.
 *
 * @example
 * ```ts
 * import { decodePprof, encodePprofGzip, formatFolded } from "./mod.ts";
 * import type { Profile } from "../profile/profile.ts";
 * declare const profile: Profile;
 * const bytes = await encodePprofGzip(profile);
 * console.log(formatFolded(decodePprof(bytes)));
 * ```
 *
 * @module
 */

export { encodePprof, encodePprofGzip, frameKindOfMapping, KIND_MAPPING_NAMES } from "./pprof.ts";
export { decodePprof } from "./pprof_reader.ts";
export type { DecodePprofOptions } from "./pprof_reader.ts";
export { formatFolded, sanitizeFoldedName, UNKNOWN_NAME } from "./folded.ts";
export { gzip } from "./gzip.ts";
export { ProtobufWriter, varintSize, WireType } from "./protobuf_writer.ts";
export { ProtobufReader } from "./protobuf_reader.ts";
