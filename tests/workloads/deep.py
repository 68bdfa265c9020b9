#!/usr/bin/python3
# Benchmark workload: a 20-frame Python stack, <module> -> main -> level x 17 -> burn, where burn spins
# in Python code. Run as an executable named python_bench (its thread name). Usage: deep.py SECONDS
import sys
import time


def burn(end):
    n = 0
    while time.monotonic() < end:
        for i in range(20000):
            n += i


def level(depth, end):
    if depth == 0:
        burn(end)
    else:
        level(depth - 1, end)


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    level(16, time.monotonic() + seconds)


main()
