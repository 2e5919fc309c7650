#include "gost/core/http_client.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>
#include <mutex>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace gost::http {

const char* to_string(failure f) {
  switch (f) {
    case failure::none: return "none";
    case failure::bad_url: return "bad_url";
    case failure::refused_address: return "refused_address";
    case failure::timeout: return "timeout";
    case failure::too_large: return "too_large";
    case failure::too_many_redirects: return "too_many_redirects";
    case failure::connect: return "connect";
    case failure::protocol: return "protocol";
  }
  return "unknown";
}

namespace {

bool private_v4(uint32_t a) { // host order
  auto in = [a](uint32_t net, int bits) { return (a >> (32 - bits)) == (net >> (32 - bits)); };
  return in(0x00000000, 8)     // 0/8 "this network"
         || in(0x0a000000, 8)  // 10/8
         || in(0x7f000000, 8)  // loopback
         || in(0xa9fe0000, 16) // link-local (cloud metadata services)
         || in(0xac100000, 12) // 172.16/12
         || in(0xc0a80000, 16) // 192.168/16
         || in(0x64400000, 10) // carrier-grade NAT
         || in(0xc0000000, 24) // IETF protocol assignments
         || in(0xe0000000, 4)  // multicast
         || in(0xf0000000, 4); // reserved, broadcast
}

bool private_v6(const uint8_t* b) {
  bool zero10 = std::all_of(b, b + 10, [](uint8_t x) { return x == 0; });
  if (zero10 && b[10] == 0xff && b[11] == 0xff) // ::ffff:a.b.c.d
    return private_v4((uint32_t{b[12]} << 24) | (uint32_t{b[13]} << 16) | (uint32_t{b[14]} << 8)
                      | b[15]);
  bool zero15 = std::all_of(b, b + 15, [](uint8_t x) { return x == 0; });
  return (zero15 && (b[15] == 0 || b[15] == 1))     // :: and ::1
         || (b[0] & 0xfe) == 0xfc                   // fc00::/7 unique local
         || (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) // fe80::/10 link-local
         || b[0] == 0xff;                           // multicast
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct call_state {
  const request* req = nullptr;
  response* resp = nullptr;
  bool refused = false;
  std::string refused_address;
  bool too_large = false;
  bool receiver_refused = false;
};

size_t keep_body(char* data, size_t size, size_t n, void* user) {
  auto* st = static_cast<call_state*>(user);
  auto bytes = size * n;
  auto& got = st->resp->body_bytes;
  if (st->req->max_body > 0 && got + bytes > st->req->max_body) {
    st->too_large = true;
    return 0; // aborts the transfer
  }
  got += bytes;
  if (st->req->on_body) {
    if (!st->req->on_body(data, bytes)) {
      st->receiver_refused = true;
      return 0;
    }
    return bytes;
  }
  if (st->req->max_body == 0)
    return bytes;
  st->resp->body.append(data, bytes);
  return bytes;
}

curl_socket_t open_socket(void* user, curlsocktype, curl_sockaddr* a) {
  auto* st = static_cast<call_state*>(user);
  // Through a proxy every socket goes to the proxy (trusted configuration): the URL's host is
  // checked by its text before the request instead.
  if (!st->req->allow_private && st->req->proxy.empty() && is_private_address(&a->addr)) {
    char text[INET6_ADDRSTRLEN] = {};
    if (a->family == AF_INET)
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&a->addr)->sin_addr, text, sizeof text);
    else if (a->family == AF_INET6)
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&a->addr)->sin6_addr, text, sizeof text);
    st->refused = true;
    st->refused_address = text;
    return CURL_SOCKET_BAD;
  }
  return ::socket(a->family, a->socktype, a->protocol);
}

struct easy_deleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct slist_deleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

} // namespace

bool is_private_address(const sockaddr* a) {
  if (a->sa_family == AF_INET)
    return private_v4(ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr));
  if (a->sa_family == AF_INET6)
    return private_v6(reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr.s6_addr);
  return true;
}

bool is_private_host(std::string_view raw) {
  std::string host{raw};
  std::transform(host.begin(), host.end(), host.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (!host.empty() && host.back() == '.')
    host.pop_back();
  if (host == "localhost" || (host.size() > 10 && host.rfind(".localhost") == host.size() - 10))
    return true;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  in6_addr a6{};
  if (inet_pton(AF_INET6, host.c_str(), &a6) == 1)
    return private_v6(a6.s6_addr);
  in_addr a4{};
  // inet_aton takes every form a resolver does ("127.1", "2130706433"), not only dotted quads.
  if (inet_aton(host.c_str(), &a4) != 0)
    return private_v4(ntohl(a4.s_addr));
  return false;
}

response perform(const request& r) {
  global_init();
  response out;
  std::unique_ptr<CURL, easy_deleter> c{curl_easy_init()};
  if (!c) {
    out.error = failure::protocol;
    out.message = "libcurl: no handle";
    return out;
  }
  call_state st{&r, &out};
  if (!r.proxy.empty() && !r.allow_private) {
    std::unique_ptr<CURLU, void (*)(CURLU*)> u{curl_url(), curl_url_cleanup};
    char* host = nullptr;
    if (u && curl_url_set(u.get(), CURLUPART_URL, r.url.c_str(), 0) == CURLUE_OK
        && curl_url_get(u.get(), CURLUPART_HOST, &host, 0) == CURLUE_OK && host) {
      std::string name = host;
      curl_free(host);
      if (is_private_host(name)) {
        out.error = failure::refused_address;
        out.message = "host " + name
                      + " is loopback, private or link-local: not fetched (allowed only when "
                        "configured)";
        return out;
      }
    }
  }
  std::unique_ptr<curl_slist, slist_deleter> headers;
  for (auto& [k, v] : r.headers) {
    auto line = k + ": " + v;
    if (auto* l = curl_slist_append(headers.get(), line.c_str())) {
      (void)headers.release();
      headers.reset(l);
    }
  }
  auto* h = c.get();
  curl_easy_setopt(h, CURLOPT_URL, r.url.c_str());
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(r.deadline.count()));
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &keep_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &st);
  curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, &open_socket);
  curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, &st);
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, r.max_redirects > 0 ? 1L : 0L);
  curl_easy_setopt(h, CURLOPT_MAXREDIRS, static_cast<long>(r.max_redirects));
  if (!r.proxy.empty())
    curl_easy_setopt(h, CURLOPT_PROXY, r.proxy.c_str());
  if (r.max_body > 0)
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(r.max_body));
  if (r.method == "GET") {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  } else if (r.method == "HEAD") {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r.method.c_str());
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, r.body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
  }
  auto rc = curl_easy_perform(h);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out.status);
  if (char* url = nullptr; curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &url) == CURLE_OK && url)
    out.final_url = url;
  if (char* ct = nullptr; curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct)
    out.content_type = ct;
  if (rc == CURLE_OK)
    return out;
  if (st.refused) {
    out.error = failure::refused_address;
    out.message = "address " + st.refused_address
                  + " is loopback, private or link-local: not fetched (allowed only when "
                    "configured)";
  } else if (st.receiver_refused) {
    out.error = failure::protocol;
    out.message = "the body's receiver refused it (e.g. the disk is full)";
  } else if (st.too_large || rc == CURLE_FILESIZE_EXCEEDED) {
    out.error = failure::too_large;
    out.message = "body larger than " + std::to_string(r.max_body) + " bytes";
  } else if (rc == CURLE_OPERATION_TIMEDOUT) {
    out.error = failure::timeout;
    out.message = "no complete answer within " + std::to_string(r.deadline.count()) + " ms";
  } else if (rc == CURLE_TOO_MANY_REDIRECTS) {
    out.error = failure::too_many_redirects;
    out.message = "more than " + std::to_string(r.max_redirects) + " redirects";
  } else if (rc == CURLE_URL_MALFORMAT || rc == CURLE_UNSUPPORTED_PROTOCOL) {
    out.error = failure::bad_url;
    out.message = std::string{"bad URL: "} + curl_easy_strerror(rc);
  } else if (rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_CONNECT
             || rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR || rc == CURLE_GOT_NOTHING) {
    out.error = failure::connect;
    out.message = curl_easy_strerror(rc);
  } else {
    out.error = failure::protocol;
    out.message = curl_easy_strerror(rc);
  }
  return out;
}

} // namespace gost::http
