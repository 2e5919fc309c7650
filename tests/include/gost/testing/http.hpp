#pragma once
// Test support: a minimal blocking HTTP GET against 127.0.0.1.

#include <arpa/inet.h>
#include <cerrno>
#include <cstdlib>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace gost::testing {

/// Returns the whole response (status line, headers, body), or "" when the connection failed.
/// `headers`: more request header lines, each ending in "\r\n" (`"Authorization: Bearer t\r\n"`).
inline std::string http_get(uint16_t port, const std::string& path,
                            const std::string& headers = {}) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return {};
  }
  auto req =
    "GET " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n" + headers + "\r\n";
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string resp;
  char buf[4096];
  for (;;) {
    auto n = ::recv(fd, buf, sizeof(buf), 0);
    if (n > 0)
      resp.append(buf, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR)
      break;
  }
  ::close(fd);
  return resp;
}

/// The status code of a response http_get returned ("HTTP/1.1 404 Not Found" -> 404; HTTP/1.0
/// too, as Python's http.server answers); 0 when there was none. Check it with the response as
/// the message, so a failure shows what came:
/// `CHECK_MESSAGE(http_status(r) == 404, r)`.
inline int http_status(const std::string& resp) {
  bool http1 = resp.rfind("HTTP/1.1 ", 0) == 0 || resp.rfind("HTTP/1.0 ", 0) == 0;
  return http1 ? std::atoi(resp.c_str() + 9) : 0;
}

} // namespace gost::testing
