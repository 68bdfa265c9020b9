# Prints the addresses (id()) of a few code objects with awkward names and file names, and what CPython
# says about them, as one JSON line; then "ready", and sleeps while symbolize_test.ts reads them.
import dis
import json
import sys
import time


class Outer:
    class Inner:
        def méthode(self):
            return 1


def fé():
    return 2


def 函数():
    return 3


def 𐐀():
    return 4


def make():
    def closure():
        a = 1
        b = a + 1
        return b
    return closure


CODES = [
    Outer.Inner.méthode.__code__,
    fé.__code__,
    函数.__code__,
    globals()["𐐀"].__code__,
    make().__code__,
    compile("x = 1\ny = 2\n", "/tmp/ünïcode/файл.py", "exec"),
]


def lines(code):
    if sys.version_info < (3, 10):
        starts = list(dis.findlinestarts(code))
        out = []
        for offset in range(0, len(code.co_code), 2):
            line = code.co_firstlineno
            for start, start_line in starts:
                if start <= offset:
                    line = start_line
            out.append([offset, line])
        return out
    return [[o, 0 if line is None else line] for s, e, line in code.co_lines() for o in range(s, e, 2)]


print(json.dumps([{
    "address": id(code),
    "name": code.co_name,
    "qualname": getattr(code, "co_qualname", code.co_name),
    "filename": code.co_filename,
    "firstLine": code.co_firstlineno,
    "lines": lines(code),
} for code in CODES] + [{"address": id("not a code object"), "name": None}]))
print("ready", flush=True)
while True:
    time.sleep(1)
