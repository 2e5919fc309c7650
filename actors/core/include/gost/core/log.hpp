#pragma once
// Named loggers (Seastar's `logger io_log("io")`): one spdlog logger per runtime folder or
// actor domain, every one writing through the same sink in the same format, so that levels can
// be set per subsystem (`log.levels`) and each line names its logger. A file uses the logger of
// its folder:
//
//   namespace { const auto lg = gost::log::get("offers"); }
//   lg->warn("dead letter shard={} offer={}", shard, id);
//
// The names a node knows are `config::logger_names()` (node, pg, cluster, api, kafka, feeds,
// console, offers, kit). The node sets the sink, its format and the levels once, before it
// starts anything (runtime/node/logging.cpp); until then (unit tests, tools) lines go to
// stderr in spdlog's default format. The loggers are also in spdlog's registry, so
// `spdlog::set_level` and `spdlog::get` reach them.

#include <memory>
#include <string_view>

#include <spdlog/common.h>
#include <spdlog/logger.h>

namespace gost::log {

/// The logger named `name`: created on first use, the same object on every later call (cache
/// it, as above). Thread-safe.
std::shared_ptr<spdlog::logger> get(std::string_view name);

/// Where every logger writes from now on, loggers already handed out included. Call it before
/// other threads log (the sink's own format is kept).
void set_sink(spdlog::sink_ptr sink);

/// Sets the level of every logger, and of those created later.
void set_level(spdlog::level::level_enum level);

} // namespace gost::log
