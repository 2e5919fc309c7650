#include "node/logging.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "gost/core/log.hpp"

namespace gost::runtime {

namespace {

// %* : the log message, escaped for a JSON string.
class json_message final : public spdlog::custom_flag_formatter {
public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    for (char c : std::string_view{msg.payload.data(), msg.payload.size()}) {
      switch (c) {
        case '"': dest.append(std::string_view{"\\\""}); break;
        case '\\': dest.append(std::string_view{"\\\\"}); break;
        case '\n': dest.append(std::string_view{"\\n"}); break;
        case '\t': dest.append(std::string_view{"\\t"}); break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            snprintf(buf, sizeof(buf), "\\u%04x", c);
            dest.append(std::string_view{buf});
          } else {
            dest.push_back(c);
          }
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<json_message>();
  }
};

} // namespace

void setup_logging(const std::string& node_id, const config::log_config& cfg) {
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto f = std::make_unique<spdlog::pattern_formatter>();
  if (cfg.format == "json") {
    f->add_flag<json_message>('*').set_pattern(
      R"({"ts":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l","node":")" + node_id
      + R"(","logger":"%n","msg":"%*"})");
  } else {
    f->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ node=" + node_id + " logger=%n %v");
  }
  sink->set_formatter(std::move(f));
  gost::log::set_sink(sink);
  gost::log::set_level(spdlog::level::from_str(cfg.level));
  for (auto& name : config::logger_names())
    gost::log::get(name);
  for (auto& l : cfg.levels)
    gost::log::get(l.logger)->set_level(spdlog::level::from_str(l.level));
  spdlog::set_default_logger(gost::log::get("node"));
}

} // namespace gost::runtime
