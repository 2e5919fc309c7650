#include "gost/images/request.hpp"

#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <openssl/sha.h>

namespace gost::images {

namespace {

constexpr std::array<const char*, 4> names{"rotate", "preview", "ratio", "main_color"};

failure bad(std::string message) {
  return {image_error::bad_argument, std::move(message)};
}

std::string lower(std::string_view s) {
  std::string out{s};
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

} // namespace

const char* to_string(function f) {
  auto i = static_cast<size_t>(f) - 1;
  return i < names.size() ? names[i] : "unknown";
}

bool parse_function(std::string_view name, function& out) {
  for (size_t i = 0; i < names.size(); ++i)
    if (name == names[i]) {
      out = static_cast<function>(i + 1);
      return true;
    }
  return false;
}

outcome<std::string> canonical_url(std::string_view url) {
  if (url.empty())
    return bad("url is empty");
  if (url.size() > 2048)
    return bad("url is longer than 2048 bytes");
  for (unsigned char c : url)
    if (c <= 0x20 || c == 0x7f)
      return bad("url contains a space or a control character (percent-encode it)");
  auto colon = url.find("://");
  if (colon == std::string_view::npos)
    return bad("url `" + std::string{url} + "` has no scheme (http:// or https://)");
  auto scheme = lower(url.substr(0, colon));
  if (scheme != "http" && scheme != "https")
    return bad("url scheme `" + scheme + "` is not http or https");
  auto rest = url.substr(colon + 3);
  if (auto hash = rest.find('#'); hash != std::string_view::npos)
    rest = rest.substr(0, hash);
  auto path_at = rest.find_first_of("/?");
  auto authority = rest.substr(0, path_at);
  std::string path{path_at == std::string_view::npos ? std::string_view{"/"}
                                                     : rest.substr(path_at)};
  if (path.front() == '?')
    path.insert(path.begin(), '/');
  if (authority.find('@') != std::string_view::npos)
    return bad("url has user information (user@host): not accepted");
  std::string_view host = authority, port;
  if (!authority.empty() && authority.front() == '[') { // [IPv6]:port
    auto close = authority.find(']');
    if (close == std::string_view::npos)
      return bad("url host `" + std::string{authority} + "` has an unclosed [");
    host = authority.substr(0, close + 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':')
        return bad("url host `" + std::string{authority} + "` is malformed");
      port = authority.substr(close + 2);
    }
  } else if (auto c = authority.rfind(':'); c != std::string_view::npos) {
    host = authority.substr(0, c);
    port = authority.substr(c + 1);
  }
  if (host.empty() || host == "[]")
    return bad("url has no host");
  if (!port.empty()) {
    if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos
        || std::stoi(std::string{port}) == 0 || std::stoi(std::string{port}) > 65535)
      return bad("url port `" + std::string{port} + "` is not a port number");
    if ((scheme == "http" && port == "80") || (scheme == "https" && port == "443"))
      port = {};
  }
  std::string out = scheme + "://" + lower(host);
  if (!port.empty())
    out += ":" + std::string{port};
  return out + path;
}

std::string task_key::result_key() const {
  std::string input = to_string(fn);
  input.push_back('\0');
  input += args;
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
  static const char hex[] = "0123456789abcdef";
  std::string out(32, '0');
  for (size_t i = 0; i < 16; ++i) {
    out[2 * i] = hex[digest[i] >> 4];
    out[2 * i + 1] = hex[digest[i] & 0xf];
  }
  return out;
}

uint32_t task_key::partition(uint32_t partitions) const {
  if (partitions == 0)
    return 0;
  auto key = result_key();
  // The first 64 bits of the key: uniform, and the same on every node.
  uint64_t h = std::stoull(key.substr(0, 16), nullptr, 16);
  return static_cast<uint32_t>(h % partitions);
}

outcome<task_key> make_task(function fn, std::string_view url, double degrees) {
  auto canon = canonical_url(url);
  if (!canon)
    return canon.error;
  task_key t{fn, std::move(*canon)};
  if (fn == function::rotate) {
    if (!std::isfinite(degrees) || degrees < -360 || degrees > 360)
      return bad("angle must be within -360..360 degrees");
    double turn = std::fmod(degrees, 360.0);
    if (turn < 0)
      turn += 360.0;
    turn = std::round(turn * 1000) / 1000;
    if (turn >= 360)
      turn = 0;
    char text[32];
    std::snprintf(text, sizeof text, "%.3f", turn);
    // Trailing zeros off: 90.000 → 90, 12.500 → 12.5.
    std::string angle{text};
    angle.erase(angle.find_last_not_of('0') + 1);
    if (angle.back() == '.')
      angle.pop_back();
    t.args += "\n" + angle;
  }
  return t;
}

} // namespace gost::images
