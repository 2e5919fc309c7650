#pragma once
// Which malloc the process runs on. gost links jemalloc into every executable built on it
// (CMake option GOST_JEMALLOC, on unless a sanitizer is: docs/performance.md, "The
// allocator"): most of the engine's messages and write-sets are freed on a thread other than
// the one that allocated them, which glibc's allocator serves slowly. Shown in the start log
// line and in `gost_build_info{allocator=...}`; the benchmarks print it beside their figures.

#include <string>

namespace gost {

/// "jemalloc 5.3.0-0-g54eaed1d..." when jemalloc serves malloc (found at run time, so an
/// LD_PRELOAD counts too), "system" otherwise (glibc's, or a sanitizer's).
std::string allocator_name();

} // namespace gost
