#include <doctest/doctest.h>

#include "api/call.hpp"
#include "gost/core/stats_registry.hpp"

using namespace gost;
using namespace gost::runtime;
using namespace std::chrono_literals;

namespace {

std::string text_of(const grpc_stats& s) {
  metric_families out;
  s.collect(out);
  return out.text();
}

} // namespace

TEST_CASE("grpc_stats: calls by full method name and code, OK always shown, with their latency") {
  grpc_stats s;
  s.count("/gost.v1.EntityService/Ask", grpc::StatusCode::OK, 3ms);
  s.count("/gost.v1.EntityService/Ask", grpc::StatusCode::FAILED_PRECONDITION, 1ms);
  s.count("/gost.v1.TaskService/GetTask", grpc::StatusCode::INVALID_ARGUMENT, 10us);
  // A code gRPC does not define counts as UNKNOWN.
  s.count("/gost.v1.TaskService/GetTask", static_cast<grpc::StatusCode>(99), 10us);
  CHECK(s.calls("/gost.v1.EntityService/Ask", grpc::StatusCode::OK) == 1);
  CHECK(s.calls("/gost.v1.TaskService/GetTask", grpc::StatusCode::UNKNOWN) == 1);
  CHECK(s.calls("/gost.v1.OfferService/GetOffer", grpc::StatusCode::OK) == 0);
  auto text = text_of(s);
  INFO(text);
  CHECK(text.find("gost_grpc_requests_total{method=\"/gost.v1.EntityService/Ask\",code=\"OK\"} "
                  "1\n")
        != std::string::npos);
  CHECK(text.find("gost_grpc_requests_total{method=\"/gost.v1.EntityService/Ask\",code="
                  "\"FAILED_PRECONDITION\"} 1\n")
        != std::string::npos);
  CHECK(text.find("gost_grpc_requests_total{method=\"/gost.v1.TaskService/GetTask\",code=\"OK\"} "
                  "0\n")
        != std::string::npos);
  CHECK(text.find("code=\"NOT_FOUND\"") == std::string::npos); // codes never seen: no series
  CHECK(text.find("# TYPE gost_grpc_request_seconds histogram\n") != std::string::npos);
  CHECK(text.find("gost_grpc_request_seconds_count{method=\"/gost.v1.EntityService/Ask\"} 2\n")
        != std::string::npos);
}

TEST_CASE("grpc_stats: the method label stays bounded; further names count as `other`") {
  grpc_stats s;
  for (size_t i = 0; i < grpc_stats::max_methods; ++i)
    s.count("/m/" + std::to_string(i), grpc::StatusCode::OK, 1us);
  s.count("/m/0", grpc::StatusCode::OK, 1us); // a known name still counts as itself
  s.count("/not/registered", grpc::StatusCode::UNIMPLEMENTED, 1us);
  s.count("/also/not", grpc::StatusCode::UNIMPLEMENTED, 1us);
  CHECK(s.calls("/m/0", grpc::StatusCode::OK) == 2);
  CHECK(s.calls("other", grpc::StatusCode::UNIMPLEMENTED) == 2);
  CHECK(s.calls("/not/registered", grpc::StatusCode::UNIMPLEMENTED) == 0);
}
