#include "gost/persistence/conninfo.hpp"

#include <algorithm>
#include <regex>

namespace gost::persistence {

std::string with_conninfo_defaults(const std::string& dsn,
                                   const std::vector<std::pair<std::string, std::string>>& params) {
  bool uri = dsn.find("://") != std::string::npos;
  std::string out = dsn;
  for (auto& [key, value] : params) {
    // Set by the DSN: `key=` at the start, after a blank (key=value form) or after ? or &
    // (URI form).
    std::regex own{"(^|[\\s?&])" + key + "\\s*="};
    if (std::regex_search(dsn, own))
      continue;
    if (uri)
      out += (out.find('?') == std::string::npos ? "?" : "&") + key + "=" + value;
    else
      out += (out.empty() ? "" : " ") + key + "=" + value;
  }
  return out;
}

std::string with_tcp_timeouts(const std::string& dsn, std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0)
    return dsn;
  // Keepalive probes (whole seconds): idle + 3 x interval is about `timeout`.
  auto probe = std::to_string(std::max<int64_t>(1, timeout.count() / 4000));
  return with_conninfo_defaults(dsn, {{"keepalives", "1"},
                                      {"keepalives_idle", probe},
                                      {"keepalives_interval", probe},
                                      {"keepalives_count", "3"},
                                      {"tcp_user_timeout", std::to_string(timeout.count())}});
}

} // namespace gost::persistence
