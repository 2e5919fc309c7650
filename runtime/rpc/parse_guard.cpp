#include "rpc/parse_guard.hpp"

#include <chrono>
#include <mutex>

#include <google/protobuf/stubs/logging.h>

#include "gost/core/log.hpp"
#include "gost/core/rate_limited_log.hpp"

namespace gost::runtime::rpc {

namespace detail {

thread_local std::string* captured_log = nullptr;
thread_local const grpc::Status* pending_error = nullptr;

} // namespace detail

namespace {

const auto lg = gost::log::get("api");

google::protobuf::LogHandler* previous_handler = nullptr;
std::atomic<uint64_t> rejected{0};

/// libprotobuf's log: captured during a guarded parse, else passed on as before.
void log_hook(google::protobuf::LogLevel level, const char* file, int line,
              const std::string& msg) {
  if (detail::captured_log != nullptr && level < google::protobuf::LOGLEVEL_FATAL) {
    if (!detail::captured_log->empty())
      *detail::captured_log += "; ";
    *detail::captured_log += msg;
    return;
  }
  if (previous_handler != nullptr)
    previous_handler(level, file, line, msg);
}

gost::log::rate_limited& bad_request_log() {
  static gost::log::rate_limited log{lg, 5, std::chrono::seconds{10}};
  return log;
}

} // namespace

void install_protobuf_log_hook() {
  static std::once_flag once;
  std::call_once(once, [] { previous_handler = google::protobuf::SetLogHandler(&log_hook); });
}

uint64_t undecodable_requests() {
  return rejected.load(std::memory_order_relaxed);
}

namespace detail {

grpc::Status reject(const std::string& method, const std::string& type,
                    const grpc::Status& parse_status, const std::string& protobuf_log) {
  auto msg = method + ": the request is not a valid " + type;
  const std::string key = "String field '";
  if (auto p = protobuf_log.find(key); p != std::string::npos) {
    auto e = protobuf_log.find('\'', p + key.size());
    msg += ": string field " + protobuf_log.substr(p + key.size(), e - p - key.size())
           + " holds invalid UTF-8 (send text as UTF-8, or use a bytes field)";
  } else if (parse_status.error_message() == "No payload") {
    msg += ": no request message";
  } else {
    msg += ": the bytes are not this message's protobuf encoding";
  }
  rejected.fetch_add(1, std::memory_order_relaxed);
  bad_request_log().warn("bad request " + msg);
  return {grpc::StatusCode::INVALID_ARGUMENT, msg};
}

} // namespace detail

} // namespace gost::runtime::rpc
