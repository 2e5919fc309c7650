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

std::string masked_password(const std::string& text, const std::string& dsn) {
  std::vector<std::string> secrets;
  std::smatch m;
  // key=value form: password=secret, password = 'se cr\'et'.
  static const std::regex kv{R"((^|\s)password\s*=\s*('((?:[^'\\]|\\.)*)'|(\S+)))"};
  for (auto it = dsn.cbegin(); std::regex_search(it, dsn.cend(), m, kv); it = m[0].second)
    secrets.push_back(m[3].matched ? m[3].str() : m[4].str());
  // URI form: postgresql://user:secret@host/db, ...?password=secret&...
  static const std::regex user_info{R"(://[^:@/?#]*:([^@/?#]*)@)"};
  if (std::regex_search(dsn, m, user_info))
    secrets.push_back(m[1].str());
  static const std::regex query{R"([?&]password=([^&#]*))"};
  for (auto it = dsn.cbegin(); std::regex_search(it, dsn.cend(), m, query); it = m[0].second)
    secrets.push_back(m[1].str());
  std::string out = text;
  for (auto& secret : secrets) {
    if (secret.empty())
      continue;
    for (auto at = out.find(secret); at != std::string::npos; at = out.find(secret, at + 3))
      out.replace(at, secret.size(), "***");
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
