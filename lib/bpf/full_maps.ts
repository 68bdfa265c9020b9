/**
 * Kernel maps that refuse updates because they hold `max_entries` already: what does not fit is left to a
 * fallback (frame pointers), and the session goes on. Each map is reported once, or a full map would warn
 * for every process and file after it.
 *
 * @example
 * ```ts ignore
 * import { FullMaps } from "./full_maps.ts";
 * const full = new FullMaps(logger);
 * try { trie.install(...) } catch (error) { if (!full.reported("BPF map pid_page_to_mapping_info", error)) throw error; }
 * ```
 *
 * @module
 */
import type { Logger } from "../log/logger.ts";
import { isMapFull } from "./map.ts";

/** Which maps were found full, each warned about once. */
export class FullMaps {
  readonly #logger: Logger;
  readonly #warned = new Set<string>();

  /** Warnings go to `logger`. */
  constructor(logger: Logger) {
    this.#logger = logger;
  }

  /** Whether `error` is `map` refusing an update because it is full; warns the first time. */
  reported(map: string, error: unknown): boolean {
    if (!isMapFull(error)) return false;
    if (!this.#warned.has(map)) {
      this.#warned.add(map);
      this.#logger.warn("{map} is full: samples of what does not fit unwind by frame pointers", { map });
    }
    return true;
  }
}
