#include "gost/scheduled/http_call.hpp"

#include <memory>
#include <mutex>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <sys/socket.h>

#include "gost/scheduled/rules.hpp"

namespace gost::scheduled {

namespace {

struct easy_deleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct slist_deleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using easy_ptr = std::unique_ptr<CURL, easy_deleter>;
using slist_ptr = std::unique_ptr<curl_slist, slist_deleter>;

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t discard(char*, size_t size, size_t n, void*) {
  return size * n; // the answer's body is not kept: only the status counts
}

/// Refuses sockets to loopback/private addresses (CURLOPT_OPENSOCKETFUNCTION).
curl_socket_t open_public(void*, curlsocktype, curl_sockaddr* a) {
  char text[INET6_ADDRSTRLEN] = {};
  std::string host;
  if (a->family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&a->addr)->sin_addr, text, sizeof text);
    host = text;
  } else if (a->family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&a->addr)->sin6_addr, text, sizeof text);
    host = std::string{"["} + text + "]";
  }
  if (host.empty() || is_private_host(host))
    return CURL_SOCKET_BAD;
  return ::socket(a->family, a->socktype, a->protocol);
}

} // namespace

std::string call_http(const v1::HttpAction& h, const std::string& idempotency_key,
                      std::chrono::milliseconds deadline, bool allow_private_targets) {
  global_init();
  easy_ptr c{curl_easy_init()};
  if (!c)
    return "libcurl: no easy handle";
  slist_ptr headers;
  auto add = [&](const std::string& line) {
    auto* l = curl_slist_append(headers.get(), line.c_str());
    if (l != nullptr) {
      (void)headers.release();
      headers.reset(l);
    }
  };
  for (auto& [k, v] : h.headers())
    add(k + ": " + v);
  add("Idempotency-Key: " + idempotency_key);
  auto method = h.method().empty() ? std::string{"POST"} : h.method();
  curl_easy_setopt(c.get(), CURLOPT_URL, h.url().c_str());
  curl_easy_setopt(c.get(), CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c.get(), CURLOPT_TIMEOUT_MS, static_cast<long>(deadline.count()));
  curl_easy_setopt(c.get(), CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c.get(), CURLOPT_WRITEFUNCTION, &discard);
  if (method == "GET") {
    curl_easy_setopt(c.get(), CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(c.get(), CURLOPT_CUSTOMREQUEST, method.c_str());
    curl_easy_setopt(c.get(), CURLOPT_POSTFIELDS, h.body().data());
    curl_easy_setopt(c.get(), CURLOPT_POSTFIELDSIZE, static_cast<long>(h.body().size()));
  }
  if (!allow_private_targets)
    curl_easy_setopt(c.get(), CURLOPT_OPENSOCKETFUNCTION, &open_public);
  auto rc = curl_easy_perform(c.get());
  if (rc == CURLE_OPERATION_TIMEDOUT)
    return "timeout after " + std::to_string(deadline.count()) + " ms";
  if (rc == CURLE_COULDNT_CONNECT && !allow_private_targets)
    return std::string{curl_easy_strerror(rc)}
           + " (or the address is loopback/private: see scheduled.allow_private_targets)";
  if (rc != CURLE_OK)
    return curl_easy_strerror(rc);
  long status = 0;
  curl_easy_getinfo(c.get(), CURLINFO_RESPONSE_CODE, &status);
  if (status < 200 || status > 299)
    return "HTTP " + std::to_string(status);
  return {};
}

} // namespace gost::scheduled
