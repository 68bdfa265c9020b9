#!/usr/bin/python3
# Test workload for off-CPU time in Python: main -> wait_a -> wait_b -> wait_c, where wait_c sleeps 10 ms
# at a time for SECONDS of wall time. Prints "ready PID" once it runs. Usage: sleeper.py SECONDS
import os
import sys
import time


def wait_c(end):
    while time.monotonic() < end:
        time.sleep(0.01)


def wait_b(end):
    wait_c(end)


def wait_a(end):
    wait_b(end)


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    print(f"ready {os.getpid()}", flush=True)
    wait_a(time.monotonic() + seconds)


main()
