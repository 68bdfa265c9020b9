/**
 * A file that code runs from, as processes map it: one object per distinct file of the session, made by
 * the file registry (file_registry.ts), which is the one owner of everything known about it. Mappings
 * resolved against a process's maps carry it.
 *
 * @module
 */
import { type FileRefusal, FileRefusedError, type RegularFile } from "../sys/regular_file.ts";
import type { RootDirectory } from "../sys/root_directory.ts";
import type { FileId } from "../types.ts";
import type { ProcMapping } from "./proc_maps.ts";

/** A file (or pseudo file) that code runs from. One object per distinct file in the session. */
export interface MappedFile {
  /**
   * Names this object in caches: "major:minor inode" (device in hex, as maps prints it) of the first
   * mapping seen of a file, `[vdso]`, or the pseudo name of anonymous memory (`[anonymous]`, `[heap]`...).
   */
  readonly key: string;
  readonly kind: "file" | "vdso" | "anonymous";
  /** The path as the first process that mapped it saw it. */
  readonly path: string;
  /**
   * Content identity: equal files (another path, another container) share one, and one object. Null when
   * the file could not be read, or for anonymous memory.
   */
  readonly fileId: FileId | null;
  /** Whether {@linkcode MappedFile.open} reads the file; false for anonymous memory and refused files. */
  readonly readable: boolean;
  /** Why a file could not be read, or null. */
  readonly refusal: FileRefusal | null;
  /** The root of the first process that mapped it, when not the host's: its debug files are there. */
  readonly root: RootDirectory | null;
  /**
   * Opens this very file (a new handle each time, which the caller closes).
   *
   * @throws {FileRefusedError} when it cannot be read.
   */
  open(): RegularFile;
}

/** An executable mapping of a process with the file it maps. */
export interface ResolvedMapping extends ProcMapping {
  readonly file: MappedFile;
}

/** Where an address lands: a file and the offset in it. */
export interface ResolvedAddress {
  readonly mapping: ResolvedMapping;
  readonly fileOffset: number;
}

/** A file that cannot be read (refused, or pseudo memory without a file): it opens nothing. */
export function unreadableFile(
  key: string,
  kind: MappedFile["kind"],
  path: string,
  refusal: FileRefusal | null,
): MappedFile {
  return {
    key,
    kind,
    path,
    fileId: null,
    readable: false,
    refusal,
    root: null,
    open: () => {
      throw new FileRefusedError(
        path,
        refusal ?? "not-regular",
        refusal === null ? "no file" : `refused (${refusal})`,
      );
    },
  };
}
