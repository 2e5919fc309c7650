// The admin HTTP listener on its own (port 0, loopback): routes, refusals with a message, a
// streamed answer, and that an idle or slow client never holds up the probes.
#include <doctest/doctest.h>

#include <poll.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "console/admin_http.hpp"
#include "gost/testing/http.hpp"
#include "gost/testing/process.hpp"

using namespace gost::runtime;
using namespace std::chrono_literals;

namespace {

struct listener {
  explicit listener(
    admin_http::options opts = {},
    admin_http::page_fn metrics = [] { return std::string{"gost_up 1\n"}; })
    : http(
      std::move(metrics), [] { return std::string{}; }, opts) {}

  void start() {
    std::string error;
    port = http.start("127.0.0.1", 0, error);
    REQUIRE_MESSAGE(port != 0, error);
  }

  std::string get(const std::string& path) { return gost::testing::http_get(port, path); }

  /// A connection that sends `bytes` and then nothing; closed at the end of the test.
  /// `rcvbuf`: its receive buffer (0: the system's), small for a reader that never reads.
  int hold(const std::string& bytes = "", int rcvbuf = 0) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0)
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    if (!bytes.empty())
      ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    timeval tv{10, 0}; // a hang fails the test rather than stalling it
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    held.push_back(fd);
    return fd;
  }

  ~listener() {
    http.stop();
    for (int fd : held)
      ::close(fd);
  }

  admin_http http;
  uint16_t port = 0;
  std::vector<int> held;
};

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;)
    out.append(buf, static_cast<size_t>(n));
  return out;
}

} // namespace

TEST_CASE("parse_target decodes the path and the query, refusing a bad escape") {
  http_request r;
  std::string error;
  REQUIRE(parse_target("/api/offer?id=a%20b+c&x&id2=%2F", r, error));
  CHECK(r.path == "/api/offer");
  CHECK(r.query.at("id") == "a b c");
  CHECK(r.query.at("x").empty());
  CHECK(r.query.at("id2") == "/");
  http_request bad;
  CHECK_FALSE(parse_target("/api/offer?id=%zz", bad, error));
  CHECK(error.find("%zz") != std::string::npos);
  CHECK_FALSE(parse_target("/x?id=%2", bad, error));
  CHECK_FALSE(parse_target("nope", bad, error));
}

TEST_CASE("admin_http: probes, routes, and refusals that say why") {
  listener l;
  l.http.route("/api/thing", [](const http_request& req) {
    auto it = req.query.find("id");
    if (it == req.query.end())
      return http_response::json(400, "{\"error\":\"id is required\"}");
    return http_response::json(200, "{\"id\":\"" + it->second + "\"}");
  });
  l.start();
  CHECK(l.get("/healthz").rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(l.get("/readyz").find("ready") != std::string::npos);
  auto m = l.get("/metrics");
  CHECK(m.find("Content-Type: text/plain; version=0.0.4") != std::string::npos);
  CHECK(m.find("gost_up 1") != std::string::npos);
  auto ok = l.get("/api/thing?id=7");
  CHECK(ok.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(ok.find("Content-Type: application/json") != std::string::npos);
  CHECK(ok.find("{\"id\":\"7\"}") != std::string::npos);
  CHECK(l.get("/api/thing").rfind("HTTP/1.1 400 ", 0) == 0);
  auto missing = l.get("/nope");
  CHECK(missing.rfind("HTTP/1.1 404 ", 0) == 0);
  CHECK(missing.find("not found: /nope") != std::string::npos);
  CHECK(l.get("/api/thing?id=%G1").rfind("HTTP/1.1 400 ", 0) == 0);
  CHECK(l.get("/healthz?x=%G1").rfind("HTTP/1.1 400 ", 0) == 0);
  int post = l.hold("POST /metrics HTTP/1.1\r\n\r\n");
  CHECK(read_all(post).rfind("HTTP/1.1 405 ", 0) == 0);
}

TEST_CASE("admin_http: an idle connection and a slow route do not hold up /metrics") {
  admin_http::options opts;
  opts.read_timeout = 300ms;
  listener l{opts};
  std::mutex m;
  std::condition_variable cv;
  bool release = false;
  l.http.route("/slow", [&](const http_request&) {
    std::unique_lock<std::mutex> lock{m};
    cv.wait(lock, [&] { return release; });
    return http_response::text(200, "slow\n");
  });
  l.start();
  int idle = l.hold();                           // a browser's spare connection: sends nothing
  int partial = l.hold("GET /metrics HTTP/1.1"); // a head that never ends
  int slow = l.hold("GET /slow HTTP/1.1\r\n\r\n");
  for (int i = 0; i < 3; ++i) {
    CHECK(l.get("/metrics").find("gost_up 1") != std::string::npos);
    CHECK(l.get("/readyz").rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  }
  // The idle ones are closed after the read timeout, with a word why.
  CHECK(read_all(idle).rfind("HTTP/1.1 408 ", 0) == 0);
  CHECK(read_all(partial).rfind("HTTP/1.1 408 ", 0) == 0);
  {
    std::lock_guard<std::mutex> lock{m};
    release = true;
  }
  cv.notify_all();
  CHECK(read_all(slow).find("slow") != std::string::npos);
}

TEST_CASE("admin_http: a streamed route sends pieces; one that never begins sends its answer") {
  listener l;
  l.http.stream_route("/api/stream", [](const http_request& req, http_stream& out) {
    if (req.query.count("off") != 0)
      return http_response::json(501, "{\"error\":\"not available\"}");
    if (!out.begin("application/x-ndjson"))
      return http_response{};
    for (int i = 0; i < 3; ++i)
      if (!out.write("{\"n\":" + std::to_string(i) + "}\n"))
        break;
    return http_response{};
  });
  l.start();
  auto s = l.get("/api/stream");
  CHECK(s.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(s.find("Content-Type: application/x-ndjson") != std::string::npos);
  CHECK(s.find("{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n") != std::string::npos);
  auto off = l.get("/api/stream?off");
  CHECK(off.rfind("HTTP/1.1 501 Not Implemented\r\n", 0) == 0);
  CHECK(off.find("not available") != std::string::npos);
}

TEST_CASE("admin_http: a bad escape or a malformed query under a JSON prefix is a JSON 400") {
  listener l;
  l.http.route("/api/thing", [](const http_request&) { return http_response::json(200, "{}"); });
  l.http.json_under("/api/");
  l.start();
  for (auto target : {"/api/thing?id=%zz", "/api/thing?id=%2", "/api/th%ing", "/api/thing?=7"}) {
    auto r = l.get(target);
    CHECK_MESSAGE(gost::testing::http_status(r) == 400, r);
    CHECK_MESSAGE(r.find("Content-Type: application/json") != std::string::npos, r);
    auto body = r.substr(r.find("\r\n\r\n") + 4);
    CHECK_MESSAGE(body.rfind("{\"error\":\"", 0) == 0, r);
    CHECK_MESSAGE(body.find("\"code\":\"INVALID_ARGUMENT\"}") != std::string::npos, r);
  }
  // The message says what to fix.
  auto bad = l.get("/api/thing?id=%zz");
  CHECK_MESSAGE(bad.find("%zz") != std::string::npos, bad);
  CHECK_MESSAGE(bad.find("two hex digits") != std::string::npos, bad);
  auto unnamed = l.get("/api/thing?=7");
  CHECK_MESSAGE(unnamed.find("without a name") != std::string::npos, unnamed);
  // Not found under the prefix is JSON too; elsewhere the listener answers text as before.
  auto missing = l.get("/api/nope");
  CHECK_MESSAGE(gost::testing::http_status(missing) == 404, missing);
  CHECK_MESSAGE(missing.find("Content-Type: application/json") != std::string::npos, missing);
  auto text = l.get("/healthz?x=%zz");
  CHECK_MESSAGE(gost::testing::http_status(text) == 400, text);
  CHECK_MESSAGE(text.find("Content-Type: text/plain") != std::string::npos, text);
}

TEST_CASE("admin_http: readers that never read do not hold the threads that answer probes") {
  // Issue 27: each answer was sent by the thread that computed it, blocking up to
  // `send_timeout` per send, so scrapers that stopped reading held the probe threads and
  // /healthz got 503 "busy" (a kubelet restarts the pod for that). The send timeout is long
  // here: a listener that still sent from the probe threads would hold them through the test.
  constexpr size_t big = 16u << 20;
  std::atomic<int> rendered{0};
  admin_http::options opts;
  opts.send_timeout = 120s;
  opts.probe_threads = 2;
  listener l{opts, [&] {
               ++rendered;
               return std::string(big, 'x');
             }};
  l.start();
  std::vector<int> stalled;
  for (int i = 0; i < opts.probe_threads; ++i)
    stalled.push_back(l.hold("GET /metrics HTTP/1.1\r\n\r\n", 4096));
  REQUIRE(gost::testing::eventually(20s, [&] { return rendered.load() == 2; }));
  // Both answers are rendered and cannot be sent; the probes answer meanwhile.
  std::string probe;
  CHECK_MESSAGE(gost::testing::eventually(20s,
                                          [&] {
                                            probe = l.get("/healthz");
                                            return gost::testing::http_status(probe) == 200;
                                          }),
                probe);
  // (eventually: the thread that answered /healthz frees its slot just after closing.)
  CHECK(gost::testing::eventually(
    20s, [&] { return gost::testing::http_status(l.get("/readyz")) == 200; }));
  // The stalled connections were kept, not cut: read now, each gets its whole answer.
  for (int fd : stalled) {
    auto r = read_all(fd);
    auto head = r.find("\r\n\r\n");
    REQUIRE(head != std::string::npos);
    CHECK(r.find("Content-Length: " + std::to_string(big)) != std::string::npos);
    CHECK(r.size() - head - 4 == big);
  }
}

TEST_CASE("admin_http: a reader that stops reading is closed after the send timeout") {
  constexpr size_t big = 16u << 20;
  admin_http::options opts;
  opts.send_timeout = 300ms;
  listener l{opts, [&] { return std::string(big, 'x'); }};
  l.start();
  int fd = l.hold("GET /metrics HTTP/1.1\r\n\r\n", 4096);
  // Nothing read for longer than the timeout: the listener gives up on the connection, so
  // what can still be read ends before the body's length.
  char byte = 0;
  REQUIRE(::recv(fd, &byte, 1, MSG_PEEK) == 1); // the answer has begun
  std::string r;
  bool closed = gost::testing::eventually(20s, [&] {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0 || (p.revents & (POLLHUP | POLLERR)) == 0)
      return false;
    r = read_all(fd);
    return true;
  });
  REQUIRE(closed);
  CHECK(r.size() < big);
}
