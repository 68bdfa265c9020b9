/**
 * Generates a TypeScript module of layout constants from BTF, so the C structs and enums BPF programs share
 * with TypeScript are declared once, in C. The text is already in `deno fmt` shape and depends only on the
 * BTF and the spec, so a build can compare it with the checked-in copy.
 *
 * Each member gets `offset` and `size` in bytes; arrays add `count` and `elementSize`. A bitfield adds
 * `bitOffset` (from the start of the struct) and `bitSize`, and its `offset`/`size` cover the bytes its bits
 * touch: read those little-endian, shift right by `bitOffset - 8 * offset` and keep `bitSize` bits.
 *
 * @example
 * ```ts
 * import { parseBtf } from "./btf.ts";
 * import { generateLayoutModule } from "./codegen.ts";
 *
 * const btf = parseBtf(await Deno.readFile("omniprof.btf"));
 * const text = generateLayoutModule(btf, { structs: ["trace_event"], enums: ["frame_marker"] }, "omniprof.bpf.o");
 * await Deno.writeTextFile("bpf/layout.gen.ts", text);
 * ```
 *
 * @module
 */

import { type Btf, BtfKind } from "./btf.ts";
import { allEnumerators, enumValues, type MemberLayout, structLayout } from "./layout.ts";

/** What to generate. Each list is emitted in the order given. */
export interface LayoutSpec {
  /** Struct, union or typedef names; `trace_event` becomes `traceEventLayout`. */
  readonly structs: readonly string[];
  /** Enum (or typedef-of-enum) names; `frame_marker` becomes `FrameMarker` plus a type of its values. */
  readonly enums: readonly string[];
  /** Enumerator names, e.g. from an anonymous `enum { MAX_DEPTH = 127 }`; each becomes a const of its name. */
  readonly constants?: readonly string[];
}

const LINE_WIDTH = 110;
const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/**
 * Generates the layout module for `spec` from `btf`. `sourceLabel` names the BTF's origin in the header.
 * Throws an `Error` when a named type is missing or a name cannot become a TypeScript identifier.
 */
export function generateLayoutModule(btf: Btf, spec: LayoutSpec, sourceLabel: string): string {
  if (/[\r\n\u2028\u2029]/.test(sourceLabel)) {
    throw new Error(`Cannot use ${JSON.stringify(sourceLabel)} as a source label: it spans lines`);
  }
  const exported = new Set<string>();
  const claim = (name: string, what: string) => {
    if (!IDENTIFIER.test(name)) {
      throw new Error(`Cannot name the constant for ${what}: ${name} is no identifier`);
    }
    if (exported.has(name)) throw new Error(`Cannot emit ${what}: ${name} is already exported`);
    exported.add(name);
  };
  const blocks: string[] = [];

  for (const structName of spec.structs) {
    const layout = structLayout(btf, structName);
    const constName = `${camelCase(structName)}Layout`;
    const tagged = btf.findByName(structName, BtfKind.Struct, BtfKind.Union).length > 0;
    const what = tagged ? `${layout.union ? "union" : "struct"} ${structName}` : structName;
    claim(constName, what);
    const lines = [
      `/** Layout of C \`${what}\` (${layout.size} bytes). */`,
      `export const ${constName} = {`,
      `  sizeof: ${layout.size},`,
    ];
    const keys = new Set<string>(["sizeof"]);
    for (const member of layout.members) {
      // Unnamed bitfields only pad.
      if (member.name === "") continue;
      if (!IDENTIFIER.test(member.name) || member.name === "__proto__" || keys.has(member.name)) {
        throw new Error(`Cannot emit member ${member.name} of ${what} as a property`);
      }
      keys.add(member.name);
      lines.push(...memberLines(member));
    }
    lines.push("} as const;");
    blocks.push(lines.join("\n"));
  }

  for (const enumName of spec.enums) {
    const values = enumValues(btf, enumName);
    const constName = pascalCase(enumName);
    const what = btf.findByName(enumName, BtfKind.Enum, BtfKind.Enum64).length > 0
      ? `enum ${enumName}`
      : enumName;
    claim(constName, what);
    const names = [...values.keys()];
    const keys = enumeratorKeys(names, enumName);
    const lines = [`/** Values of C \`${what}\`. */`, `export const ${constName} = {`];
    names.forEach((name, i) => lines.push(`  ${keys[i]}: ${values.get(name)},`));
    lines.push(
      "} as const;",
      `/** One value of {@linkcode ${constName}}. */`,
      `export type ${constName} = (typeof ${constName})[keyof typeof ${constName}];`,
    );
    blocks.push(lines.join("\n"));
  }

  const constants = spec.constants ?? [];
  if (constants.length > 0) {
    const enumerators = allEnumerators(btf);
    const lines: string[] = [];
    for (const name of constants) {
      const values = enumerators.get(name);
      if (values === undefined) throw new Error(`Cannot find enumerator ${name} in the BTF`);
      if (values.length > 1) {
        throw new Error(`Cannot choose a value for enumerator ${name}: enums give it ${values.join(", ")}`);
      }
      claim(name, `enumerator ${name}`);
      lines.push(`/** C enumerator \`${name}\`. */`, `export const ${name} = ${values[0]};`);
    }
    blocks.push(lines.join("\n"));
  }

  const header = `// Code generated by build.ts from the BTF of ${sourceLabel}. DO NOT EDIT.`;
  return [header, ...blocks].join("\n\n") + "\n";
}

/** The property line(s) for one member, with its C type as a trailing comment when that fits. */
function memberLines(member: MemberLayout): string[] {
  const fields: [string, number][] = [["offset", member.offset], ["size", member.size]];
  if (member.arrayLength !== undefined && member.elementSize !== undefined) {
    fields.push(["count", member.arrayLength], ["elementSize", member.elementSize]);
  }
  if (member.bitSize !== 0) fields.push(["bitOffset", member.bitOffset], ["bitSize", member.bitSize]);
  const oneLine = `  ${member.name}: { ${fields.map(([k, v]) => `${k}: ${v}`).join(", ")} },`;
  // The formatter breaks an object that overflows the line; emit it already broken.
  if (oneLine.length > LINE_WIDTH) {
    return [`  ${member.name}: {`, ...fields.map(([k, v]) => `    ${k}: ${v},`), "  },"];
  }
  const comment = ` // ${member.typeName.replace(/[^\x20-\x7e]/g, "?")}`;
  return [oneLine.length + comment.length <= LINE_WIDTH ? oneLine + comment : oneLine];
}

/**
 * TypeScript keys for the enumerators `names` of one enum: the longest `PREFIX_` they share is dropped
 * (keeping every key a valid identifier that starts with a letter) and the rest is PascalCased, so
 * `FRAME_MARKER_UNKNOWN, FRAME_MARKER_NATIVE` become `Unknown, Native`. Throws when two keys collide.
 */
export function enumeratorKeys(names: readonly string[], enumName = "(anon)"): string[] {
  let prefix = names[0] ?? "";
  for (const name of names) {
    let i = 0;
    while (i < prefix.length && i < name.length && prefix[i] === name[i]) i++;
    prefix = prefix.slice(0, i);
  }
  let cut = prefix.lastIndexOf("_") + 1;
  for (;;) {
    const keys = names.map((name) => pascalCase(name.slice(cut)));
    if (keys.every((key) => /^[A-Za-z]/.test(key) && IDENTIFIER.test(key))) {
      const seen = new Set<string>();
      for (const [i, key] of keys.entries()) {
        if (seen.has(key)) {
          throw new Error(`Cannot name enumerator ${names[i]} of enum ${enumName}: ${key} repeats`);
        }
        seen.add(key);
      }
      return keys;
    }
    if (cut === 0) throw new Error(`Cannot turn the enumerators of enum ${enumName} into identifiers`);
    cut = cut >= 2 ? prefix.lastIndexOf("_", cut - 2) + 1 : 0;
  }
}

/** `frame_marker` -> `FrameMarker`, `NATIVE_CODE` -> `NativeCode`. */
export function pascalCase(name: string): string {
  return name.split("_").filter((w) => w !== "").map(capitalize).join("");
}

/** `trace_event` -> `traceEvent`. */
export function camelCase(name: string): string {
  const pascal = pascalCase(name);
  return pascal.charAt(0).toLowerCase() + pascal.slice(1);
}

function capitalize(word: string): string {
  // An all-caps word is a C constant's spelling; a mixed-case one keeps its inner capitals.
  const rest = word === word.toUpperCase() ? word.slice(1).toLowerCase() : word.slice(1);
  return word.charAt(0).toUpperCase() + rest;
}
