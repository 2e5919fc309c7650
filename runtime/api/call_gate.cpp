#include "api/call_gate.hpp"

#include <cctype>

#include "api/status.hpp"
#include "gost/core/log.hpp"

namespace gost::runtime {

namespace {

const auto lg = gost::log::get("api");

constexpr size_t max_logged = 256;

/// `ipv4:10.0.0.7:51234` → `ipv4:10.0.0.7` (a caller keeps its host across connections).
std::string host_of(std::string_view peer) {
  auto colon = peer.rfind(':');
  auto first = peer.find(':');
  return std::string{colon != std::string_view::npos && colon != first ? peer.substr(0, colon)
                                                                       : peer};
}

} // namespace

caller_gate::caller_gate(caller_rule rule, std::shared_ptr<grpc_stats> stats)
  : rule_(std::move(rule)), stats_(std::move(stats)), flood_(lg, 5, std::chrono::seconds{10}) {}

void caller_gate::read_authorization(std::string_view value, caller_facts& facts) {
  constexpr std::string_view scheme = "bearer ";
  if (value.size() <= scheme.size()) {
    facts.malformed = true;
    return;
  }
  for (size_t i = 0; i < scheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(value[i])) != scheme[i]) {
      facts.malformed = true;
      return;
    }
  auto token = value.substr(scheme.size());
  while (!token.empty() && token.front() == ' ')
    token.remove_prefix(1);
  if (token.empty())
    facts.malformed = true;
  else
    facts.bearer = token;
}

grpc::Status caller_gate::admit(const std::string& method, grpc::CallbackServerContext* ctx) const {
  if (caller_rule::required(method) == role::none)
    return grpc::Status::OK;
  caller_facts facts;
  auto& md = ctx->client_metadata();
  if (auto a = md.find("authorization"); a != md.end())
    read_authorization({a->second.data(), a->second.size()}, facts);
  else if (auto t = md.find("x-gost-token"); t != md.end()) // gostctl before the roles
    facts.bearer = {t->second.data(), t->second.size()};
  if (auto auth = ctx->auth_context(); auth && auth->IsPeerAuthenticated()) {
    for (auto* prop : {"x509_common_name", "x509_subject_alternative_name"})
      for (auto& v : auth->FindPropertyValues(prop))
        facts.cert_subjects.emplace_back(v.data(), v.size());
  }
  auto peer = ctx->peer();
  facts.peer = peer;
  auto v = rule_.decide(method, facts);
  if (v.admitted())
    return grpc::Status::OK;
  refused(v, method, peer);
  return {v.what == verdict::kind::denied ? grpc::StatusCode::PERMISSION_DENIED
                                          : grpc::StatusCode::UNAUTHENTICATED,
          v.message};
}

verdict caller_gate::admit_http(role needs, const std::string& path, std::string_view authorization,
                                std::string_view peer) const {
  caller_facts facts;
  if (!authorization.empty())
    read_authorization(authorization, facts);
  facts.peer = peer;
  auto v = rule_.decide_role(needs, path, facts);
  if (!v.admitted())
    refused(v, path, peer);
  return v;
}

void caller_gate::refused(const verdict& v, std::string_view what, std::string_view peer) const {
  if (stats_)
    stats_->count_refused(v.reason);
  // The caller: its entry's name when known, else its host (an unknown token is not named).
  auto caller = v.caller.empty() ? host_of(peer) : v.caller;
  bool first = false;
  bool full = false;
  {
    std::lock_guard<std::mutex> lock{mtx_};
    full = logged_.size() >= max_logged;
    if (!full)
      first = logged_.emplace(caller, v.reason).second;
  }
  if (first)
    lg->warn("call refused caller={} reason={} method={} peer={} (logged once per caller and "
             "reason; gost_auth_refused_total counts them all): {}",
             caller, v.reason, what, peer, v.message);
  else if (full)
    flood_.warn("call refused caller=" + caller + " reason=" + v.reason
                + " method=" + std::string{what});
}

} // namespace gost::runtime
