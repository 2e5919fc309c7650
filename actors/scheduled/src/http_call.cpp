#include "gost/scheduled/http_call.hpp"

#include "gost/core/http_client.hpp"

namespace gost::scheduled {

std::string call_http(const v1::HttpAction& h, const std::string& idempotency_key,
                      std::chrono::milliseconds deadline, bool allow_private_targets) {
  http::request r;
  r.method = h.method().empty() ? std::string{"POST"} : h.method();
  r.url = h.url();
  for (auto& [k, v] : h.headers())
    r.headers.emplace_back(k, v);
  r.headers.emplace_back("Idempotency-Key", idempotency_key);
  r.body = h.body();
  r.deadline = deadline;
  r.allow_private = allow_private_targets;
  // The answer's body is not kept (only the status counts), and a redirect is an answer.
  auto resp = http::perform(r);
  switch (resp.error) {
    case http::failure::none: break;
    case http::failure::timeout: return "timeout after " + std::to_string(deadline.count()) + " ms";
    case http::failure::refused_address:
      return resp.message + " (see scheduled.allow_private_targets)";
    default: return resp.message;
  }
  if (!resp.success())
    return "HTTP " + std::to_string(resp.status);
  return {};
}

} // namespace gost::scheduled
