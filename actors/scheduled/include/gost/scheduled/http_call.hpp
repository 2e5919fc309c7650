#pragma once
// The HTTP action, on the shared outbound client (gost/core/http_client.hpp): one request
// within the attempt's deadline, carrying the occurrence's `Idempotency-Key`; success is a 2xx
// answer. Unless private targets are allowed, every address the request connects to is
// checked when the connection is opened (a public name pointing at 127.0.0.1 is refused too).

#include <chrono>
#include <string>

#include "gost/v1/scheduled_actions.pb.h"

namespace gost::scheduled {

/// Calls `h`; returns the error ("HTTP 503", "timeout after 2000 ms", ...), empty on a 2xx.
/// Thread-safe (one libcurl easy handle per call).
std::string call_http(const v1::HttpAction& h, const std::string& idempotency_key,
                      std::chrono::milliseconds deadline, bool allow_private_targets);

} // namespace gost::scheduled
