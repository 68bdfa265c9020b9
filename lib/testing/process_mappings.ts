/**
 * A process's executable mappings, each able to open its file through the process, without a process
 * manager: what runtime instances are handed, for tests that look at one process. Test-only.
 *
 * @module
 */
import type { OpenableMapping } from "../interpreter/process_libraries.ts";
import { openMappedFile } from "../process/mapped_file_opener.ts";
import { readProcMaps } from "../process/proc_maps.ts";
import type { Pid } from "../types.ts";

/**
 * The executable mappings of `pid`.
 *
 * @throws {Deno.errors.NotFound} when no process holds `pid`.
 */
export function openableMappings(pid: Pid): OpenableMapping[] {
  const { mappings } = readProcMaps(pid);
  if (mappings === null) throw new Deno.errors.NotFound(`No process ${pid}`);
  return mappings.map((mapping) => ({ ...mapping, file: { open: () => openMappedFile(pid, mapping) } }));
}
