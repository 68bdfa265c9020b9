# Prints, for every code object of a module with awkward line structure, its line table and the line
# CPython itself gives each instruction offset, as JSON for line_table_test.ts.
import dis
import json
import sys

SOURCE = (
    "def simple(a):\n"
    "    b = a + 1\n"
    "    return b\n"
    "\n"
    "def big_gap():\n"
    "    x = 1\n" + "\n" * 300 + "    y = 2\n"
    "    return x + y\n"
    "\n"
    "def loops(n):\n"
    "    total = 0\n"
    "    for i in range(n):\n"
    "        if i % 2:\n"
    "            continue\n"
    "        total += max(\n"
    "            i,\n"
    "            total,\n"
    "        )\n"
    "    return total\n"
    "\n"
    "class K:\n"
    "    def method(self):\n"
    "        try:\n"
    "            raise ValueError\n"
    "        except ValueError:\n"
    "            pass\n"
    "        finally:\n"
    "            z = [q for q in range(2)]\n"
    "        return z\n"
    "\n"
    "def long_function():\n" + "".join("    v%d = %d\n" % (i, i) for i in range(400)) + "    return v0\n"
)

minor = sys.version_info[1]
fmt = "lnotab" if minor <= 9 else "linetable" if minor == 10 else "locations"


def expected(code):
    size = len(code.co_code)
    lines = {}
    if minor <= 9:
        starts = list(dis.findlinestarts(code))
        for offset in range(0, size, 2):
            line = code.co_firstlineno
            for start, start_line in starts:
                if start <= offset:
                    line = start_line
            lines[offset] = line
    else:
        for start, end, line in code.co_lines():
            for offset in range(start, end, 2):
                lines[offset] = 0 if line is None else line
    return sorted(lines.items())


def walk(code, out):
    table = code.co_lnotab if minor <= 9 else code.co_linetable
    out.append({
        "name": code.co_name,
        "firstLine": code.co_firstlineno,
        "table": table.hex(),
        "size": len(code.co_code),
        "expected": expected(code),
    })
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            walk(const, out)


result = []
walk(compile(SOURCE, "<line tables>", "exec"), result)
print(json.dumps({"format": fmt, "codes": result}))
