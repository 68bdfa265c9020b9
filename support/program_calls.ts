/**
 * The external programs and libraries the repository's TypeScript runs, read from its syntax, and which
 * module imports which. A program is found where it is written as a string:
 * - `new Deno.Command("gcc", ...)`, `Deno.dlopen("libc.so.6", ...)`, a `command -v ${tool}` probe, a
 *   `${dir}/${tool}` lookup in a function that walks PATH, and Playwright's `executablePath`;
 * - through helpers that pass a parameter on to one of those (lib/testing/commands.ts's run() and
 *   hasTool(), a file's own run()), followed across imports to the strings their callers give, also
 *   through `tools.filter((tool) => ...)`, `for (const tool of [...])` and local constants.
 *
 * What the source does not spell (a workload just built, an interpreter found at run time, a table's field) is
 * returned as a dynamic use with its text, for a person to classify.
 *
 * Parses with `Deno.lint.runPlugin`, which exists only under `deno test`: test-only.
 *
 * @module
 */

/** A place in the repository: a file relative to the root, and a 1-based line. */
export interface SourcePlace {
  file: string;
  line: number;
}

/** What a use starts: a program (`PATH` lookup or absolute path) or a shared library (dlopen). */
export type UseKind = "program" | "library";

/** A program or library named by a string in the source. */
export interface NamedUse extends SourcePlace {
  kind: UseKind;
  name: string;
}

/** A program or library whose name the source does not spell: the expression that gives it. */
export interface DynamicUse extends SourcePlace {
  kind: UseKind;
  expression: string;
}

/** The programs and libraries the scanned modules use, and the modules each module imports. */
export interface ProgramScan {
  named: NamedUse[];
  dynamic: DynamicUse[];
  /** Module -> the repository modules it imports (statically or with a literal `import()`). */
  imports: Map<string, string[]>;
}

/** What an expression in the source evaluates to, as far as its syntax tells. */
type Value =
  | { kind: "text"; text: string; at: SourcePlace }
  | { kind: "list"; items: Value[] }
  /** Each element of a list (the items of an array, the callers' arguments of a rest parameter). */
  | { kind: "elements"; of: Value }
  | { kind: "param"; fn: string; index: number; rest: boolean; at: SourcePlace; expression: string }
  /** Deno itself (`Deno.execPath()`): not an external program. */
  | { kind: "deno" }
  /** What a function returns, `fn` as the caller names it: looked up once every module is read. */
  | { kind: "returns"; fn: string; at: SourcePlace; expression: string }
  /** A constant another module exports: its value is looked up once every module is read. */
  | { kind: "imported"; module: string; name: string; at: SourcePlace; expression: string }
  | { kind: "unknown"; at: SourcePlace; expression: string };

/** A call of a function that may pass a program on: `name(args)` or `this.name(args)`. */
interface CallSite {
  file: string;
  callee: string;
  args: Value[];
}

/** Where a program or library name ends up. */
interface Sink {
  kind: UseKind;
  value: Value;
}

/** What one module says. */
interface ModuleFacts {
  /** Names of the functions and methods it defines (`#name` for private methods). */
  functions: Set<string>;
  /** Local name -> [module, exported name] of its imports and re-exports. */
  bindings: Map<string, [string, string]>;
  imports: string[];
  calls: CallSite[];
  sinks: Sink[];
  /** Its top-level constants' values, by name. */
  constants: Map<string, Value>;
  /** What its functions return, by function name. */
  returns: Map<string, Value[]>;
}

const ARRAY_CALLBACKS = new Set(["filter", "map", "flatMap", "some", "every", "find", "forEach"]);

type Node = Deno.lint.Node;

/** The node that holds `node` (none for the module itself). */
function parentOf(node: Node): Node | undefined {
  if (node.type === "Program" || node.type === "Line" || node.type === "Block") return undefined;
  const parent = node.parent;
  // A constructor's `private x` parameter sits in a node of its own, outside Deno.lint.Node.
  return parent.type === "TSParameterProperty" ? parent.parent : parent;
}

/** The repository path of `specifier` imported from `file`, or null for npm:, node: and the like. */
function resolveImport(file: string, specifier: string): string | null {
  if (!specifier.startsWith("./") && !specifier.startsWith("../")) return null;
  return new URL(specifier, `file:///${file}`).pathname.slice(1);
}

/** The name of a function node as callers write it, or null for an anonymous one. */
function functionName(fn: Node): string | null {
  if (fn.type === "FunctionDeclaration") return fn.id?.name ?? null;
  const parent = parentOf(fn);
  if (!parent) return null;
  if (parent.type === "MethodDefinition") {
    return parent.key.type === "PrivateIdentifier"
      ? `#${parent.key.name}`
      : parent.key.type === "Identifier"
      ? parent.key.name
      : null;
  }
  if (parent.type === "VariableDeclarator" && parent.id.type === "Identifier") return parent.id.name;
  if (parent.type === "Property" && parent.key.type === "Identifier") return parent.key.name;
  return null;
}

/** The function a call names, as the module sees it: `name(...)` or `this.name(...)`; null for others. */
function calleeName(callee: Node): string | null {
  if (callee.type === "Identifier") return callee.name;
  if (callee.type !== "MemberExpression" || callee.object.type !== "ThisExpression") return null;
  const property = callee.property;
  return property.type === "PrivateIdentifier"
    ? `#${property.name}`
    : property.type === "Identifier"
    ? property.name
    : null;
}

/** The name a parameter binds, and whether it is a rest parameter. */
function paramName(param: Deno.lint.Parameter): { name: string; rest: boolean } | null {
  if (param.type === "Identifier") return { name: param.name, rest: false };
  if (param.type === "RestElement" && param.argument.type === "Identifier") {
    return { name: param.argument.name, rest: true };
  }
  if (param.type === "AssignmentPattern" && param.left.type === "Identifier") {
    return { name: param.left.name, rest: false };
  }
  if (param.type === "TSParameterProperty") return paramName(param.parameter);
  return null;
}

function isFunction(
  node: Node,
): node is Deno.lint.FunctionDeclaration | Deno.lint.FunctionExpression | Deno.lint.ArrowFunctionExpression {
  return node.type === "FunctionDeclaration" || node.type === "FunctionExpression" ||
    node.type === "ArrowFunctionExpression";
}

/** Reads one module's facts. */
function readModule(file: string, source: string): ModuleFacts {
  const facts: ModuleFacts = {
    functions: new Set(),
    bindings: new Map(),
    imports: [],
    calls: [],
    sinks: [],
    constants: new Map(),
    returns: new Map(),
  };
  const lineStarts = [0];
  for (let i = 0; i < source.length; i++) if (source[i] === "\n") lineStarts.push(i + 1);
  const placeOf = (node: Node): SourcePlace => {
    const offset = node.range[0];
    let low = 0;
    let high = lineStarts.length - 1;
    while (low < high) {
      const mid = (low + high + 1) >> 1;
      if (lineStarts[mid]! <= offset) low = mid;
      else high = mid - 1;
    }
    return { file, line: low + 1 };
  };
  const textOf = (node: Node) => source.slice(node.range[0], node.range[1]);
  const unknown = (node: Node): Value => ({ kind: "unknown", at: placeOf(node), expression: textOf(node) });

  /** The value a variable named `name` has where `from` reads it. */
  const variableValue = (name: string, from: Node, depth: number): Value | null => {
    for (let node = parentOf(from); node; node = parentOf(node)) {
      if (isFunction(node)) {
        const index = node.params.findIndex((param) => paramName(param)?.name === name);
        if (index >= 0) {
          const call = node.parent;
          if (
            index === 0 && call.type === "CallExpression" && call.arguments[0] === node &&
            call.callee.type === "MemberExpression" && call.callee.property.type === "Identifier" &&
            ARRAY_CALLBACKS.has(call.callee.property.name)
          ) {
            return { kind: "elements", of: valueOf(call.callee.object, depth + 1) };
          }
          const fn = functionName(node);
          const at = placeOf(from);
          if (fn === null) return { kind: "unknown", at, expression: name };
          return {
            kind: "param",
            fn,
            index,
            rest: paramName(node.params[index]!)!.rest,
            at,
            expression: name,
          };
        }
      }
      if (node.type === "ForOfStatement" && node.left.type === "VariableDeclaration") {
        const declared = node.left.declarations.some((d) => d.id.type === "Identifier" && d.id.name === name);
        if (declared) return { kind: "elements", of: valueOf(node.right, depth + 1) };
      }
      if (node.type === "Program" || node.type === "BlockStatement") {
        for (const statement of node.body) {
          const declaration = statement.type === "ExportNamedDeclaration" ? statement.declaration : statement;
          if (declaration?.type !== "VariableDeclaration" || declaration.kind !== "const") continue;
          for (const declarator of declaration.declarations) {
            if (declarator.id.type === "Identifier" && declarator.id.name === name && declarator.init) {
              return valueOf(declarator.init, depth + 1);
            }
          }
        }
      }
    }
    return null;
  };

  /** A name bound by an import: resolved later, against the module that exports it. */
  const importedValue = (node: Deno.lint.Identifier): Value | null => {
    const binding = facts.bindings.get(node.name);
    if (!binding) return null;
    return {
      kind: "imported",
      module: binding[0],
      name: binding[1],
      at: placeOf(node),
      expression: node.name,
    };
  };

  const valueOf = (node: Node, depth = 0): Value => {
    if (depth > 20) return unknown(node);
    switch (node.type) {
      case "Literal":
        if (node.value === null) return { kind: "list", items: [] };
        return typeof node.value === "string"
          ? { kind: "text", text: node.value, at: placeOf(node) }
          : unknown(node);
      case "TemplateLiteral":
        return node.expressions.length === 0
          ? { kind: "text", text: node.quasis[0]!.cooked, at: placeOf(node) }
          : unknown(node);
      case "ArrayExpression":
        return {
          kind: "list",
          items: node.elements.filter((e) => e !== null).map((e) => valueOf(e!, depth + 1)),
        };
      case "SpreadElement":
        return { kind: "elements", of: valueOf(node.argument, depth + 1) };
      case "LogicalExpression":
        return { kind: "list", items: [valueOf(node.left, depth + 1), valueOf(node.right, depth + 1)] };
      case "ConditionalExpression":
        return {
          kind: "list",
          items: [valueOf(node.consequent, depth + 1), valueOf(node.alternate, depth + 1)],
        };
      case "TSAsExpression":
      case "TSSatisfiesExpression":
      case "TSNonNullExpression":
        return valueOf(node.expression, depth + 1);
      case "CallExpression": {
        if (textOf(node.callee) === "Deno.execPath") return { kind: "deno" };
        const fn = calleeName(node.callee);
        return fn === null
          ? unknown(node)
          : { kind: "returns", fn, at: placeOf(node), expression: textOf(node) };
      }
      case "Identifier":
        return variableValue(node.name, node, depth) ?? importedValue(node) ?? unknown(node);
      default:
        return unknown(node);
    }
  };

  const addReturn = (fn: string, value: Value) =>
    facts.returns.set(fn, [...(facts.returns.get(fn) ?? []), value]);

  const addImport = (specifier: string, names: [string, string][]) => {
    const target = resolveImport(file, specifier);
    if (target === null) return;
    facts.imports.push(target);
    for (const [local, imported] of names) facts.bindings.set(local, [target, imported]);
  };

  const plugin: Deno.lint.Plugin = {
    name: "program-calls",
    rules: {
      scan: {
        create() {
          return {
            Program(node) {
              // Imports first (they are hoisted), then the constants, whose values may name them.
              for (const statement of node.body) {
                if (statement.type === "ImportDeclaration") {
                  addImport(
                    statement.source.value,
                    statement.specifiers.map((s) =>
                      s.type === "ImportSpecifier"
                        ? [
                          s.local.name,
                          s.imported.type === "Identifier" ? s.imported.name : s.imported.value,
                        ]
                        : [s.local.name, s.type === "ImportDefaultSpecifier" ? "default" : "*"]
                    ),
                  );
                } else if (statement.type === "ExportNamedDeclaration" && statement.source) {
                  addImport(
                    statement.source.value,
                    statement.specifiers.map((s) => [
                      s.exported.type === "Identifier" ? s.exported.name : s.exported.value,
                      s.local.type === "Identifier" ? s.local.name : s.local.value,
                    ]),
                  );
                } else if (statement.type === "ExportAllDeclaration") {
                  addImport(statement.source.value, []);
                }
              }
              for (const statement of node.body) {
                const declaration = statement.type === "ExportNamedDeclaration"
                  ? statement.declaration
                  : statement;
                if (declaration?.type !== "VariableDeclaration" || declaration.kind !== "const") continue;
                for (const declarator of declaration.declarations) {
                  if (declarator.id.type === "Identifier" && declarator.init) {
                    facts.constants.set(declarator.id.name, valueOf(declarator.init));
                  }
                }
              }
            },
            FunctionDeclaration(node) {
              const name = functionName(node);
              if (name) facts.functions.add(name);
            },
            MethodDefinition(node) {
              const name = functionName(node.value);
              if (name) facts.functions.add(name);
            },
            VariableDeclarator(node) {
              const init = node.init;
              if (init && isFunction(init) && node.id.type === "Identifier") {
                facts.functions.add(node.id.name);
              }
            },
            ReturnStatement(node) {
              let fn = parentOf(node);
              while (fn && !isFunction(fn)) fn = parentOf(fn);
              const name = fn ? functionName(fn) : null;
              if (name !== null && node.argument) addReturn(name, valueOf(node.argument));
            },
            ArrowFunctionExpression(node) {
              const name = functionName(node);
              if (name !== null && node.body.type !== "BlockStatement") addReturn(name, valueOf(node.body));
            },
            ImportExpression(node) {
              if (node.source.type === "Literal" && typeof node.source.value === "string") {
                addImport(node.source.value, []);
              }
            },
            NewExpression(node) {
              if (textOf(node.callee) === "Deno.Command" && node.arguments[0]) {
                facts.sinks.push({ kind: "program", value: valueOf(node.arguments[0]) });
              }
            },
            CallExpression(node) {
              const callee = textOf(node.callee);
              if (callee === "Deno.dlopen" && node.arguments[0]) {
                facts.sinks.push({ kind: "library", value: valueOf(node.arguments[0]) });
                return;
              }
              const name = calleeName(node.callee);
              if (name !== null) {
                facts.calls.push({ file, callee: name, args: node.arguments.map((arg) => valueOf(arg)) });
              }
            },
            TemplateLiteral(node) {
              const first = node.quasis[0]?.cooked ?? "";
              if (/^command -v\s*$/.test(first) && node.expressions.length === 1) {
                facts.sinks.push({ kind: "program", value: valueOf(node.expressions[0]!) });
              }
              // `${dir}/${tool}` in a function that walks PATH: a lookup of the program `tool`.
              const [, slash, end] = node.quasis.map((quasi) => quasi.cooked);
              if (node.expressions.length === 2 && slash === "/" && end === "") {
                let walksPath = false;
                for (let fn = parentOf(node); fn && !walksPath; fn = parentOf(fn)) {
                  walksPath = isFunction(fn) && textOf(fn).includes('Deno.env.get("PATH")');
                }
                if (walksPath) {
                  facts.sinks.push({ kind: "program", value: valueOf(node.expressions[1]!) });
                }
              }
            },
            Property(node) {
              // Playwright starts the browser named by `executablePath` in its launch options.
              if (node.key.type !== "Identifier" || node.key.name !== "executablePath") return;
              const call = node.parent.parent;
              if (call?.type === "CallExpression" && /\.launch\w*$/.test(textOf(call.callee))) {
                facts.sinks.push({ kind: "program", value: valueOf(node.value) });
              }
            },
          };
        },
      },
    },
  };
  Deno.lint.runPlugin(plugin, file, source);
  return facts;
}

/**
 * Scans `files` (paths relative to `root`, which ends in a slash) and returns what they run. Calls are
 * followed between the scanned files only.
 */
export function scanPrograms(root: string, files: string[]): ProgramScan {
  const modules = new Map<string, ModuleFacts>();
  for (const file of files) modules.set(file, readModule(file, Deno.readTextFileSync(`${root}${file}`)));

  /** The defining module and name of `name` as `file` sees it: its own function, or an import. */
  const resolve = (file: string, name: string, hops = 0): string | null => {
    const facts = modules.get(file);
    if (!facts || hops > 10) return null;
    if (facts.functions.has(name)) return `${file}:${name}`;
    const binding = facts.bindings.get(name);
    return binding ? resolve(binding[0], binding[1], hops + 1) : null;
  };
  /** The value of the constant `name` that `file` exports, following re-exports. */
  const exportedConstant = (file: string, name: string, hops = 0): Value | undefined => {
    const facts = modules.get(file);
    if (!facts || hops > 10) return undefined;
    const constant = facts.constants.get(name);
    if (constant !== undefined) return constant;
    const binding = facts.bindings.get(name);
    return binding ? exportedConstant(binding[0], binding[1], hops + 1) : undefined;
  };
  const callers = new Map<string, CallSite[]>();
  for (const facts of modules.values()) {
    for (const call of facts.calls) {
      const fn = resolve(call.file, call.callee);
      if (fn === null) continue;
      if (!callers.has(fn)) callers.set(fn, []);
      callers.get(fn)!.push(call);
    }
  }

  const named: NamedUse[] = [];
  const dynamic: DynamicUse[] = [];
  const seen = new Set<string>();
  const expand = (kind: UseKind, value: Value, file: string, followed: Set<string>): void => {
    switch (value.kind) {
      case "text":
        return void named.push({ kind, name: value.text, ...value.at });
      case "list":
        return value.items.forEach((item) => expand(kind, item, file, followed));
      case "elements":
        return expand(kind, value.of, file, followed);
      case "deno":
        return;
      case "returns": {
        const fn = resolve(file, value.fn);
        const owner = fn?.slice(0, fn.lastIndexOf(":"));
        const returned = fn && owner
          ? modules.get(owner)?.returns.get(fn.slice(owner.length + 1))
          : undefined;
        if (!fn || !owner || !returned || returned.length === 0) {
          return void dynamic.push({ kind, expression: value.expression, ...value.at });
        }
        const key = `${fn}:return`;
        if (followed.has(key)) return;
        const deeper = new Set(followed).add(key);
        return returned.forEach((item) => expand(kind, item, owner, deeper));
      }
      case "imported": {
        const constant = exportedConstant(value.module, value.name);
        if (constant === undefined) {
          return void dynamic.push({ kind, expression: value.expression, ...value.at });
        }
        return expand(kind, constant, value.module, followed);
      }
      case "unknown":
        return void dynamic.push({ kind, expression: value.expression, ...value.at });
      case "param": {
        const fn = resolve(file, value.fn);
        const key = `${fn}:${value.index}`;
        if (fn === null) return void dynamic.push({ kind, expression: value.expression, ...value.at });
        if (followed.has(key)) return;
        const sites = callers.get(fn) ?? [];
        if (sites.length === 0) {
          return void dynamic.push({
            kind,
            expression: `${value.expression} (no caller found)`,
            ...value.at,
          });
        }
        const deeper = new Set(followed).add(key);
        for (const site of sites) {
          const args = value.rest
            ? site.args.slice(value.index)
            : site.args.slice(value.index, value.index + 1);
          for (const arg of args) expand(kind, arg, site.file, deeper);
        }
      }
    }
  };
  for (const [file, facts] of modules) {
    for (const sink of facts.sinks) expand(sink.kind, sink.value, file, new Set());
  }
  const unique = <T extends SourcePlace>(uses: T[], key: (use: T) => string): T[] =>
    uses.filter((use) => {
      const id = `${use.file}:${use.line}:${key(use)}`;
      if (seen.has(id)) return false;
      seen.add(id);
      return true;
    }).sort((a, b) => a.file.localeCompare(b.file) || a.line - b.line);
  return {
    named: unique(named, (use) => `${use.kind}:${use.name}`),
    dynamic: unique(dynamic, (use) => `${use.kind}:${use.expression}`),
    imports: new Map([...modules].map(([file, facts]) => [file, [...new Set(facts.imports)].sort()])),
  };
}
