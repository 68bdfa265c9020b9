/**
 * A hostile pprof for tests of the readers' bounds: one sample naming location 1 `frames` times, as a
 * packed list. Sixty million frames are 60 MB that gzip makes 58 KB; stored whole, such a sample once
 * took 1.8 GB and ten seconds to read.
 *
 * @example
 * ```ts ignore
 * import { deepPprof } from "./deep_pprof.ts";
 * const bytes = deepPprof(60_000_000); // uncompressed: gzip it for a file
 * ```
 *
 * @module
 */
import { ProtobufWriter } from "../output/protobuf_writer.ts";

/** The uncompressed profile: one sample type ("samples"/"count"), one location, one deep sample. */
export function deepPprof(frames: number): Uint8Array {
  const w = new ProtobufWriter(frames + 64);
  const sampleType = w.beginLengthDelimited(1);
  w.writeVarintField(1, 1);
  w.writeVarintField(2, 2);
  w.endLengthDelimited(sampleType);
  const sample = w.beginLengthDelimited(2);
  w.writeBytesField(1, new Uint8Array(frames).fill(1));
  w.writeInt64Field(2, 1);
  w.endLengthDelimited(sample);
  const location = w.beginLengthDelimited(4);
  w.writeVarintField(1, 1);
  w.endLengthDelimited(location);
  for (const text of ["", "samples", "count"]) w.writeStringField(6, text);
  return w.finish();
}
