/**
 * A folder that receives new files over a long run (the agent's `--pprof-dir`): opened once at the start,
 * then each file is written into that folder through its descriptor, as a complete new file that never
 * replaces anything (see replace_file.ts). A name already taken when its file is written (a link planted
 * there, say) is left alone, and the file is kept under a new name that the error gives.
 *
 * @example
 * ```ts ignore
 * import { OutputDirectory } from "./output_directory.ts";
 * using folder = OutputDirectory.open("/var/lib/profiles");
 * folder.write("omniprof-20250101T000000.pb.gz", bytes);
 * ```
 *
 * @module
 */
import { Directory } from "../sys/directory.ts";
import { type FileOwner, invokingUser } from "../sys/invoking_user.ts";
import { SystemError } from "../sys/libc.ts";
import { checkCreatable, OutputChangedError, replaceFile } from "./replace_file.ts";

/** A folder held open for new files; see the module documentation. */
export class OutputDirectory implements Disposable {
  /** The folder's path as given. */
  readonly path: string;
  #dir: Directory;
  #owner: FileOwner | null;

  private constructor(path: string, dir: Directory, owner: FileOwner | null) {
    this.path = path;
    this.#dir = dir;
    this.#owner = owner;
  }

  /**
   * Opens the folder `path` and checks that new files can be made in it, leaving nothing behind.
   * New files belong to `owner` (default: the user who ran sudo, if any).
   *
   * @throws {Error} "Cannot write in PATH: reason".
   */
  static open(path: string, options: { owner?: FileOwner | null } = {}): OutputDirectory {
    let dir: Directory | null = null;
    try {
      const owner = options.owner === undefined ? invokingUser() : options.owner;
      dir = Directory.open(path);
      checkCreatable(dir);
      return new OutputDirectory(path, dir, owner);
    } catch (error) {
      dir?.close();
      const reason = error instanceof SystemError
        ? error.message.replace(/^Cannot [^:]*: /, "")
        : error instanceof Error
        ? error.message
        : String(error);
      throw new Error(`Cannot write in ${path}: ${reason}`, { cause: error });
    }
  }

  /**
   * Writes `data` as the new file `name` in the folder (0644 less the umask, 0600 when `private`).
   *
   * @returns the path written.
   * @throws {Error} when the name was taken (the message says where the data was kept instead), or the file
   *   cannot be written (a full disk...): nothing else is left behind.
   */
  write(name: string, data: Uint8Array, options: { private?: boolean } = {}): string {
    if (name.includes("/") || name === "" || name === "." || name === "..") {
      throw new Error(`Cannot write ${JSON.stringify(name)} in ${this.path}: not a file name`);
    }
    const replace = { mode: options.private ? 0o600 : 0o644, owner: this.#owner };
    try {
      replaceFile(this.#dir, name, null, data, replace);
      return `${this.path}/${name}`;
    } catch (error) {
      if (error instanceof OutputChangedError) {
        throw new Error(
          `Cannot write ${name} in ${this.path}: ${error.reason}, so it was left alone; the data is in ` +
            `${this.path}/${error.keptName}`,
          { cause: error },
        );
      }
      throw new Error(
        `Cannot write ${name} in ${this.path}: ${error instanceof Error ? error.message : error}`,
        { cause: error },
      );
    }
  }

  /** Releases the folder; idempotent. */
  close(): void {
    this.#dir.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}
