/**
 * A program of a BPF object, and the links that attach it to events.
 *
 * @module
 */
import { libc } from "../sys/libc.ts";
import { libbpf, LibbpfError } from "./libbpf.ts";

/** An attachment of a program to an event; destroying it detaches the program. */
export class BpfLink {
  #pointer: Deno.PointerValue;
  readonly description: string;

  constructor(pointer: Deno.PointerObject, description: string) {
    this.#pointer = pointer;
    this.description = description;
  }

  /** Detaches. For perf events this also closes the perf event's descriptor. Safe to call twice. */
  close(): void {
    if (this.#pointer === null) return;
    libbpf().fn.bpf_link__destroy(this.#pointer);
    this.#pointer = null;
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/** One program of a {@linkcode BpfObject}; owned by the object. */
export class BpfProgram {
  readonly name: string;
  #pointer: Deno.PointerObject;

  /** @internal Created by BpfObject.program(). */
  constructor(pointer: Deno.PointerObject, name: string) {
    this.#pointer = pointer;
    this.name = name;
  }

  /** The program's file descriptor (valid after load). */
  get fd(): number {
    const fd = libbpf().fn.bpf_program__fd(this.#pointer);
    if (fd < 0) throw new LibbpfError(`get the descriptor of program ${this.name}`, -fd);
    return fd;
  }

  /** The program's type (BPF_PROG_TYPE_*), which libbpf takes from its section. */
  get type(): number {
    return libbpf().fn.bpf_program__type(this.#pointer);
  }

  /** The ELF section the program is in (`perf_event`, `raw_tp/sched_process_exec`...). */
  get sectionName(): string {
    return Deno.UnsafePointerView.getCString(libbpf().fn.bpf_program__section_name(this.#pointer)!);
  }

  /** Whether the program is loaded with the object; only before load. */
  setAutoload(autoload: boolean): void {
    const result = libbpf().fn.bpf_program__set_autoload(this.#pointer, autoload);
    if (result < 0) throw new LibbpfError(`set autoload of program ${this.name}`, -result);
  }

  /**
   * Makes the program of another type (BPF_PROG_TYPE_*) than its section says; only before load. The
   * unwinders are loaded again as the type of the probes that tail-call them (lib/record/probes.ts).
   */
  setType(type: number): void {
    const result = libbpf().fn.bpf_program__set_type(this.#pointer, type);
    if (result < 0) throw new LibbpfError(`set the type of program ${this.name}`, -result);
  }

  /**
   * Attaches a kprobe-type program to a uprobe (or, with `returns`, a uretprobe) at `fileOffset` of the
   * file at `path`, in every process that maps it.
   */
  attachUprobe(path: string, fileOffset: number, returns: boolean): BpfLink {
    const lib = libbpf();
    const { result: link, log } = lib.captureLog(() =>
      lib.fn.bpf_program__attach_uprobe(this.#pointer, returns, -1, cString(path), BigInt(fileOffset))
    );
    if (link === null) {
      throw new LibbpfError(
        `attach program ${this.name} to ${returns ? "a uretprobe" : "a uprobe"} at ${path}+0x${
          fileOffset.toString(16)
        }`,
        libc().errno(),
        log,
      );
    }
    return new BpfLink(link, `${this.name} on ${path}+0x${fileOffset.toString(16)}`);
  }

  /** Attaches a kprobe-type program to a kprobe at the entry of kernel function `name`. */
  attachKprobe(name: string): BpfLink {
    const lib = libbpf();
    const { result: link, log } = lib.captureLog(() =>
      lib.fn.bpf_program__attach_kprobe(this.#pointer, false, cString(name))
    );
    if (link === null) {
      throw new LibbpfError(`attach program ${this.name} to kprobe ${name}`, libc().errno(), log);
    }
    return new BpfLink(link, `${this.name} on kprobe ${name}`);
  }

  /** Attaches a tracepoint-type program to tracepoint `category`:`name` (tracefs must be mounted). */
  attachTracepoint(category: string, name: string): BpfLink {
    const lib = libbpf();
    const { result: link, log } = lib.captureLog(() =>
      lib.fn.bpf_program__attach_tracepoint(this.#pointer, cString(category), cString(name))
    );
    if (link === null) {
      throw new LibbpfError(
        `attach program ${this.name} to tracepoint ${category}:${name}`,
        libc().errno(),
        log,
      );
    }
    return new BpfLink(link, `${this.name} on tracepoint ${category}:${name}`);
  }

  /** Attaches to the event its section names (raw_tp/..., tp/...). */
  attach(): BpfLink {
    const lib = libbpf();
    const { result: link, log } = lib.captureLog(() => lib.fn.bpf_program__attach(this.#pointer));
    if (link === null) throw new LibbpfError(`attach program ${this.name}`, libc().errno(), log);
    return new BpfLink(link, this.name);
  }

  /**
   * Attaches to an opened perf event and enables it. The link takes ownership of `perfEventFd`: closing
   * the link closes it.
   */
  attachPerfEvent(perfEventFd: number): BpfLink {
    const lib = libbpf();
    const { result: link, log } = lib.captureLog(() =>
      lib.fn.bpf_program__attach_perf_event(this.#pointer, perfEventFd)
    );
    if (link === null) {
      throw new LibbpfError(`attach program ${this.name} to a perf event`, libc().errno(), log);
    }
    return new BpfLink(link, `${this.name} on perf event ${perfEventFd}`);
  }
}

/** `text` as a NUL-terminated C string. */
function cString(text: string): Uint8Array<ArrayBuffer> {
  return new TextEncoder().encode(`${text}\0`);
}
