// Outbound HTTP against a local server: bodies within the limit, redirects limited, deadlines,
// and internal addresses refused unless allowed — on every hop, not only the first URL.
#include <doctest/doctest.h>

#include <sys/socket.h>

#include <chrono>

#include "gost/core/http_client.hpp"
#include <atomic>

#include "gost/testing/http_server.hpp"

using namespace std::chrono_literals;
using gost::testing::http_server;
namespace http = gost::http;

namespace {

http_server::reply serve(const http_server::call& c) {
  if (c.path == "/small")
    return {200, "hello", {{"Content-Type", "text/plain"}}};
  if (c.path == "/big")
    return {200, std::string(100'000, 'x')};
  if (c.path == "/missing")
    return {404, "no"};
  if (c.path == "/hang")
    return {200, {}, {}, true};
  if (c.path == "/echo")
    return {200, c.method + " " + c.body + " " + c.headers.at("x-key")};
  return {500, "unexpected " + c.path};
}

http::request get(const std::string& url) {
  http::request r;
  r.url = url;
  r.max_body = 1 << 16;
  r.deadline = 5s;
  r.allow_private = true; // the server is on 127.0.0.1
  return r;
}

} // namespace

TEST_CASE("a GET keeps the body, status and content type") {
  http_server srv{serve};
  auto r = http::perform(get(srv.url("/small")));
  REQUIRE_MESSAGE(r.answered(), r.message);
  CHECK(r.success());
  CHECK(r.status == 200);
  CHECK(r.body == "hello");
  CHECK(r.content_type == "text/plain");
  auto missing = http::perform(get(srv.url("/missing")));
  CHECK(missing.answered());
  CHECK_FALSE(missing.success());
  CHECK(missing.status == 404);
}

TEST_CASE("a POST carries its body and headers") {
  http_server srv{serve};
  auto r = get(srv.url("/echo"));
  r.method = "POST";
  r.body = "payload";
  r.headers = {{"X-Key", "k1"}};
  auto resp = http::perform(r);
  REQUIRE(resp.success());
  CHECK(resp.body == "POST payload k1");
}

TEST_CASE("a body over the limit fails as too_large") {
  http_server srv{serve};
  auto r = get(srv.url("/big"));
  r.max_body = 10'000;
  auto resp = http::perform(r);
  CHECK(resp.error == http::failure::too_large);
  CHECK(resp.message == "body larger than 10000 bytes");
}

TEST_CASE("a server that never answers fails at the deadline") {
  http_server srv{serve};
  auto r = get(srv.url("/hang"));
  r.deadline = 300ms;
  auto t0 = std::chrono::steady_clock::now();
  auto resp = http::perform(r);
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK(resp.error == http::failure::timeout);
  CHECK(took >= 250ms); // libcurl checks its deadline on its own clock, a few ms either way
  CHECK(took < 3s);
}

TEST_CASE("redirects are followed up to the limit, and never into internal addresses") {
  http_server target{serve};
  http_server hops{[&](const http_server::call& c) -> http_server::reply {
    if (c.path == "/to-small")
      return {302, {}, {{"Location", target.url("/small")}}};
    if (c.path == "/loop")
      return {302, {}, {{"Location", "/loop"}}};
    if (c.path == "/to-file")
      return {302, {}, {{"Location", "file:///etc/passwd"}}};
    return {404, {}};
  }};
  auto r = get(hops.url("/to-small"));
  r.max_redirects = 3;
  auto ok = http::perform(r);
  REQUIRE_MESSAGE(ok.success(), ok.message);
  CHECK(ok.body == "hello");
  CHECK(ok.final_url == target.url("/small"));
  r.url = hops.url("/loop");
  CHECK(http::perform(r).error == http::failure::too_many_redirects);
  r.url = hops.url("/to-file");
  CHECK(http::perform(r).error == http::failure::bad_url);
  // Without redirects allowed, the 302 is the answer.
  auto plain = get(hops.url("/to-small"));
  auto first = http::perform(plain);
  CHECK(first.answered());
  CHECK(first.status == 302);
}

TEST_CASE("internal addresses are refused unless allowed, whatever the URL says") {
  http_server srv{serve};
  int before = srv.requests();
  for (auto url : {srv.url("/small"), "http://localhost:" + std::to_string(srv.port()) + "/small",
                   "http://127.1:" + std::to_string(srv.port()) + "/small",
                   "http://[::ffff:127.0.0.1]:" + std::to_string(srv.port()) + "/small"}) {
    CAPTURE(url);
    auto r = get(url);
    r.allow_private = false;
    auto resp = http::perform(r);
    CHECK(resp.error == http::failure::refused_address);
    CHECK(resp.message.find("is loopback, private or link-local") != std::string::npos);
  }
  CHECK(srv.requests() == before);                        // nothing reached the server
  CHECK(http::perform(get(srv.url("/small"))).success()); // allowed: fetched
}

TEST_CASE("which hosts are internal by their text") {
  for (auto h :
       {"localhost", "LOCALHOST.", "a.localhost", "127.0.0.1", "127.1", "2130706433", "10.1.2.3",
        "172.16.0.1", "172.31.255.255", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0",
        "[::1]", "::1", "[::]", "[fe80::1]", "[fc00::1]", "[::ffff:10.0.0.1]"})
    CHECK_MESSAGE(http::is_private_host(h), h);
  for (auto h : {"example.com", "8.8.8.8", "172.32.0.1", "192.169.0.1", "[2001:db8::1]",
                 "img.example.com", "100.128.0.1"})
    CHECK_FALSE_MESSAGE(http::is_private_host(h), h);
}

TEST_CASE("a streamed body goes to its receiver piece by piece, bounded like a kept one") {
  http_server srv{serve};
  auto r = get(srv.url("/big"));
  r.max_body = 200'000;
  std::string got;
  int pieces = 0;
  r.on_body = [&](const char* data, size_t n) {
    got.append(data, n);
    ++pieces;
    return true;
  };
  auto resp = http::perform(r);
  REQUIRE_MESSAGE(resp.success(), resp.message);
  CHECK(resp.body.empty());
  CHECK(resp.body_bytes == 100'000);
  CHECK(got == std::string(100'000, 'x'));
  CHECK(pieces >= 1);

  r.max_body = 10'000;
  got.clear();
  auto over = http::perform(r);
  CHECK(over.error == http::failure::too_large);
  CHECK(got.size() <= 10'000);

  r.max_body = 200'000;
  r.on_body = [](const char*, size_t) { return false; }; // e.g. the disk is full
  auto refused = http::perform(r);
  CHECK(refused.error == http::failure::protocol);
  CHECK(refused.message.find("receiver refused") != std::string::npos);
}

TEST_CASE("through a proxy: the proxy is asked for the URL; an internal host is refused by its "
          "name before the proxy is asked") {
  std::atomic<int> asked{0};
  http_server proxy{[&](const http_server::call& c) {
    ++asked;
    return http_server::reply{200, "via proxy " + c.path};
  }};
  http::request r;
  r.url = "http://feeds.example.invalid/f.xml";
  r.deadline = 5s;
  r.max_body = 1 << 16;
  r.proxy = proxy.url("");
  auto resp = http::perform(r); // the proxy itself is on 127.0.0.1: trusted configuration
  REQUIRE_MESSAGE(resp.success(), resp.message);
  CHECK(resp.body == "via proxy http://feeds.example.invalid/f.xml");
  CHECK(asked == 1);

  r.url = "http://10.1.2.3/f.xml";
  auto internal = http::perform(r);
  CHECK(internal.error == http::failure::refused_address);
  CHECK(internal.message.find("10.1.2.3") != std::string::npos);
  r.url = "http://localhost/f.xml";
  CHECK(http::perform(r).error == http::failure::refused_address);
  CHECK(asked == 1);
}
