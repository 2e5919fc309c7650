#include "gost/core/log.hpp"

#include <map>
#include <mutex>
#include <string>

#include <spdlog/sinks/dist_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace gost::log {

namespace {

// Every logger writes into one distributing sink; set_sink swaps what that sink forwards to,
// so a logger a file cached at static initialization follows the node's configuration.
struct loggers {
  std::mutex mtx;
  std::shared_ptr<spdlog::sinks::dist_sink_mt> sink = [] {
    auto d = std::make_shared<spdlog::sinks::dist_sink_mt>();
    d->add_sink(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    return d;
  }();
  spdlog::level::level_enum level = spdlog::level::info;
  std::map<std::string, std::shared_ptr<spdlog::logger>, std::less<>> by_name;
};

loggers& all() {
  static loggers x;
  return x;
}

} // namespace

std::shared_ptr<spdlog::logger> get(std::string_view name) {
  auto& x = all();
  std::lock_guard<std::mutex> guard{x.mtx};
  if (auto i = x.by_name.find(name); i != x.by_name.end())
    return i->second;
  auto l = std::make_shared<spdlog::logger>(std::string{name}, x.sink);
  l->set_level(x.level);
  l->flush_on(spdlog::level::warn);
  x.by_name.emplace(std::string{name}, l);
  // Also known to spdlog (set_level, get, shutdown's flush). A logger of that name made by
  // someone else stays theirs.
  if (!spdlog::get(l->name()))
    spdlog::register_logger(l);
  return l;
}

void set_sink(spdlog::sink_ptr sink) {
  all().sink->set_sinks({std::move(sink)});
}

void set_level(spdlog::level::level_enum level) {
  auto& x = all();
  std::lock_guard<std::mutex> guard{x.mtx};
  x.level = level;
  for (auto& [name, l] : x.by_name)
    l->set_level(level);
}

} // namespace gost::log
