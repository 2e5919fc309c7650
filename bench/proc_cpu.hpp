#pragma once
// CPU time of processes from /proc, for the benchmarks' "gost_cpu_us_per_op" and
// "pg_cpu_us_per_op" (bench/README.md). Header only, no dependencies beyond the C++ library;
// bench/proc_cpu.py does the same for the scripts that run gostd.
//
// Method:
//  - A process's CPU time is utime + stime of /proc/PID/stat (fields 14 and 15, clock ticks):
//    every thread of it, user and kernel time.
//  - PostgreSQL's is the sum over the whole server: the postmaster's own utime + stime, the
//    utime + stime of each of its live children (backends, parallel workers, autovacuum,
//    checkpointer, WAL writer, ...: every process whose parent is the postmaster), and its
//    cutime + cstime (fields 16 and 17), the time of the children that exited and were reaped
//    — so a backend that ends within the interval still counts, whole, at the next sample:
//    what it used before the first sample is subtracted as part of that sample's live sum.
//    A child reaped while the children are being read would be missed or counted twice; the
//    postmaster's cutime is read before and after the scan and the sample is taken again
//    when it moved.
//  - The postmaster is the parent of the server's checkpointer, whose pid any user can read
//    in pg_stat_activity (kPostmasterChildSql): the benchmark asks its server, so the figure
//    is that server's, whatever else runs on the machine. It must run in the same PID
//    namespace as the server (the benchmarks start a private one on the same machine).
//  - Over an interval: the difference of two samples, divided by the operations done in it.
//    Resolution: one clock tick (10 ms) per process and sample, negligible over seconds.

#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace gost::bench {

/// A server process whose parent is the postmaster and that lives as long as the server.
inline constexpr const char* kPostmasterChildSql =
  "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'";

/// What the CPU helpers need of /proc/PID/stat, in seconds.
struct proc_stat {
  bool ok = false;
  pid_t ppid = 0;
  double cpu = 0;      ///< utime + stime
  double children = 0; ///< cutime + cstime: reaped children
};

inline proc_stat read_proc_stat(pid_t pid) {
  proc_stat out;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line))
    return out;
  // The command (field 2) is in parentheses and may hold spaces or parentheses: the fields
  // after it start behind the last ')'.
  auto close = line.rfind(')');
  if (close == std::string::npos)
    return out;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  std::vector<std::string> f; // f[0] is field 3 (state)
  while (f.size() < 15 && rest >> field)
    f.push_back(field);
  if (f.size() < 15)
    return out;
  static const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  auto num = [&](size_t field_no) { return std::strtod(f[field_no - 3].c_str(), nullptr); };
  out.ok = true;
  out.ppid = static_cast<pid_t>(num(4));
  out.cpu = (num(14) + num(15)) / tick;
  out.children = (num(16) + num(17)) / tick;
  return out;
}

/// CPU seconds one process (all its threads) has used so far; 0 when it is gone.
inline double process_cpu_seconds(pid_t pid) {
  return read_proc_stat(pid).cpu;
}

/// CPU seconds a PostgreSQL server has used so far: the postmaster, its live children and
/// its reaped children (see the method above).
inline double server_cpu_seconds(pid_t postmaster) {
  for (int attempt = 0;; ++attempt) {
    auto pm = read_proc_stat(postmaster);
    if (!pm.ok)
      return 0;
    double live = 0;
    if (DIR* d = opendir("/proc")) {
      while (auto* e = readdir(d)) {
        char* end = nullptr;
        auto pid = static_cast<pid_t>(std::strtol(e->d_name, &end, 10));
        if (pid <= 0 || *end != '\0' || pid == postmaster)
          continue;
        auto st = read_proc_stat(pid);
        if (st.ok && st.ppid == postmaster)
          live += st.cpu;
      }
      closedir(d);
    }
    // A child reaped during the scan moved from one term to the other: sample again.
    if (read_proc_stat(postmaster).children == pm.children || attempt == 4)
      return pm.cpu + pm.children + live;
  }
}

/// The parent of a process (the postmaster, for a server process); 0 when it is gone.
inline pid_t parent_pid(pid_t pid) {
  return read_proc_stat(pid).ppid;
}

/// CPU seconds of gost's processes and of the PostgreSQL server at one moment.
struct cpu_sample {
  double gost = 0;
  double pg = 0;
};

/// Samples the CPU time of `gost` (summed: one gostd, several, or this process) and of the
/// server of `postmaster` (0: no server measured).
class cpu_meter {
public:
  cpu_meter(std::vector<pid_t> gost, pid_t postmaster)
    : gost_(std::move(gost)), postmaster_(postmaster) {}

  cpu_sample sample() const {
    cpu_sample s;
    for (auto pid : gost_)
      s.gost += process_cpu_seconds(pid);
    if (postmaster_ > 0)
      s.pg = server_cpu_seconds(postmaster_);
    return s;
  }

private:
  std::vector<pid_t> gost_;
  pid_t postmaster_;
};

/// The JSON fields of the CPU used between two samples per operation, in µs:
/// `"gost_cpu_us_per_op": X, "pg_cpu_us_per_op": Y` (no braces, to go into a benchmark's line),
/// or under other names.
inline std::string cpu_fields(const cpu_sample& from, const cpu_sample& to, double ops,
                              const char* gost_name = "gost_cpu_us_per_op",
                              const char* pg_name = "pg_cpu_us_per_op") {
  auto per_op = [&](double a, double b) { return ops > 0 ? (b - a) * 1e6 / ops : 0.0; };
  char buf[200];
  std::snprintf(buf, sizeof buf, "\"%s\": %.1f, \"%s\": %.1f", gost_name,
                per_op(from.gost, to.gost), pg_name, per_op(from.pg, to.pg));
  return buf;
}

} // namespace gost::bench
