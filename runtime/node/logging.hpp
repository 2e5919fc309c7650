#pragma once

#include <string>

namespace gost::runtime {

/// Sets spdlog's default logger: stderr, the configured level, and either a text line
/// (`2026-11-25T10:00:00.123 info node=n1 offer created shard=3 offer=ab12`) or one JSON object
/// per line with the message escaped. Context such as shard and offer ids goes into the
/// message as key=value pairs so both formats carry it.
void setup_logging(const std::string& node_id, const std::string& level, const std::string& format);

} // namespace gost::runtime
