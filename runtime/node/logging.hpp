#pragma once

#include <string>

#include "gost/config/node_config.hpp"

namespace gost::runtime {

/// Sets up the node's named loggers (gost/core/log.hpp), once, before anything else starts:
/// every one of `config::logger_names()` is created here and writes to stderr, either as a
/// text line (`2026-11-25T10:00:00.123 info node=n1 logger=offers shard drained shard=3`) or
/// as one JSON object per line (`"logger":"offers"`, the message escaped). Levels: `log.level`
/// for all, `log.levels` for single loggers. Context such as shard and offer ids goes into the
/// message as key=value pairs so both formats carry it; the subsystem is the logger's name,
/// never a prefix of the message. spdlog's default logger becomes the `node` logger.
void setup_logging(const std::string& node_id, const config::log_config& cfg);

} // namespace gost::runtime
