#pragma once
// The request edge's door (issue 27 §4): applies the caller rule (api/caller_rule.hpp) to every
// call of the public gRPC API — installed on each service by node/start_grpc.cpp, asked by
// rpc::guarded before a method runs — and to the admin HTTP listener's requests.
//
// A refusal is UNAUTHENTICATED (no or unknown credential) or PERMISSION_DENIED (role too low,
// or a verb off loopback without `console.token`) with a message saying what to fix; counted in
// gost_auth_refused_total{reason} (grpc_stats) and logged at warn once per caller and reason
// (at most 256 distinct pairs remembered; more are rate-limited). Tokens are never logged.

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "api/call.hpp"
#include "api/caller_rule.hpp"
#include "gost/core/rate_limited_log.hpp"
#include "rpc/parse_guard.hpp"

namespace gost::runtime {

class caller_gate final : public rpc::call_gate {
public:
  caller_gate(caller_rule rule, std::shared_ptr<grpc_stats> stats);

  grpc::Status admit(const std::string& method, grpc::CallbackServerContext* ctx) const override;

  /// The same for an HTTP request: `authorization` is its header's value (may be empty).
  verdict admit_http(role needs, const std::string& path, std::string_view authorization,
                     std::string_view peer) const;

  const caller_rule& rule() const noexcept { return rule_; }

  /// `authorization: Bearer <token>` (the scheme in any case) into `facts`; a value that is not
  /// one sets `malformed`. `facts.bearer` views `value`, which must outlive `facts`.
  static void read_authorization(std::string_view value, caller_facts& facts);

private:
  /// Counts and logs a refusal (once per caller and reason).
  void refused(const verdict& v, std::string_view what, std::string_view peer) const;

  caller_rule rule_;
  std::shared_ptr<grpc_stats> stats_;
  mutable std::mutex mtx_;
  mutable std::set<std::pair<std::string, std::string>> logged_;
  mutable log::rate_limited flood_;
};

} // namespace gost::runtime
