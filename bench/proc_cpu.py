#!/usr/bin/env python3
"""CPU time of gostd and of PostgreSQL from /proc, for the benchmark scripts that run gostd.

The same method as bench/proc_cpu.hpp (read there): utime + stime of /proc/PID/stat for a
process; for the server, the postmaster's own time, its live children's and its reaped
children's (cutime + cstime), the postmaster found as the parent of the server's checkpointer.

    proc_cpu.py postmaster DSN           the server's postmaster pid (asks it with psql)
    proc_cpu.py sample POSTMASTER PID... "GOST_S PG_S": CPU seconds so far of the PIDs (summed)
                                         and of the server
    proc_cpu.py fields FROM TO OPS       the JSON fields between two samples, per operation:
                                         "gost_cpu_us_per_op": X, "pg_cpu_us_per_op": Y
"""

import os
import subprocess
import sys

TICK = os.sysconf("SC_CLK_TCK")
# A server process whose parent is the postmaster (bench/proc_cpu.hpp, kPostmasterChildSql).
POSTMASTER_CHILD_SQL = "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'"


def stat(pid):
    """(ppid, utime + stime, cutime + cstime) in seconds, or None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            line = f.read()
    except OSError:
        return None
    # Fields after the command, which is in parentheses and may hold anything.
    rest = line[line.rindex(")") + 2:].split()  # rest[0] is field 3
    field = lambda n: int(rest[n - 3])
    return field(4), (field(14) + field(15)) / TICK, (field(16) + field(17)) / TICK


def process_cpu(pid):
    s = stat(pid)
    return s[1] if s else 0.0


def server_cpu(postmaster):
    for attempt in range(5):
        pm = stat(postmaster)
        if pm is None:
            return 0.0
        live = 0.0
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) != postmaster:
                s = stat(int(name))
                if s and s[0] == postmaster:
                    live += s[1]
        after = stat(postmaster)
        # A child reaped during the scan moved from one term to the other: sample again.
        if after is None or after[2] == pm[2] or attempt == 4:
            return pm[1] + pm[2] + live


def main(argv):
    if len(argv) >= 2 and argv[0] == "postmaster":
        out = subprocess.run(["psql", argv[1], "-qAtc", POSTMASTER_CHILD_SQL], check=True,
                             capture_output=True, text=True).stdout.split()
        pm = stat(int(out[0]))[0] if out else 0
        if pm <= 1:
            sys.exit("proc_cpu.py: cannot find the server's postmaster")
        print(pm)
    elif len(argv) >= 2 and argv[0] == "sample":
        pids = [int(p) for p in argv[2:]]
        print(f"{sum(process_cpu(p) for p in pids):.2f} {server_cpu(int(argv[1])):.2f}")
    elif len(argv) == 4 and argv[0] == "fields":
        g0, p0 = map(float, argv[1].split())
        g1, p1 = map(float, argv[2].split())
        ops = float(argv[3])
        per_op = lambda a, b: (b - a) * 1e6 / ops if ops > 0 else 0.0
        print(f'"gost_cpu_us_per_op": {per_op(g0, g1):.1f}, "pg_cpu_us_per_op": {per_op(p0, p1):.1f}')
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
