#pragma once
// The node's small admin HTTP endpoint on http.listen: /healthz (liveness: the process
// answers), /readyz (readiness: 200, or 503 with the reason), /metrics (Prometheus text), and
// whatever routes the node adds before start (the web console and its /api/..., web_api.hpp).
// It is for operators, probes and scrapers, not for traffic: one connection per request
// (Connection: close), GET only.
//
// Threads: one loop thread accepts and reads requests without blocking (every connection gets
// `read_timeout` to send its request head, then it is closed), and each complete request is
// answered on a thread of its own. The probes (/healthz, /readyz, /metrics) have their own
// bound of such threads, so an idle or slow browser, a slow console query or a long trace
// stream never holds them up; beyond a bound the answer is 503 at once.
// A thread only computes its answer: the bytes the client's socket does not take at once are
// handed back to the loop thread, which sends them as the client reads (non-blocking, as
// nginx does), so a client that reads slowly or not at all holds a buffer and a socket, never
// a thread. A connection that takes nothing for `send_timeout` is reset (nginx's
// `send_timeout` with `reset_timedout_connection`); at most `writing_max` wait so.
// Streamed answers (the live trace, CSV downloads) are written by their own thread, each
// write bounded by `send_timeout`, within `stream_threads`.
// Requests under a prefix given to `json_under` (the console's /api/) get the listener's own
// refusals (a bad escape, no such route, busy) as JSON, `{"error": ..., "code": ...}`, as the
// routes there answer theirs.
// With an access check (`check_access`, node/start_http.cpp: auth configured and not on
// loopback), every request but /healthz and /readyz asks it first; a refusal (401, 403) is the
// listener's own, JSON under /api/.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace gost::runtime {

struct http_request {
  std::string path;                         ///< without the query
  std::map<std::string, std::string> query; ///< decoded; a name given twice: the last
  std::string authorization;                ///< the `Authorization` header's value, if any
  std::string peer;                         ///< the client's address (`ipv4:10.0.0.7:51234`)
};

struct http_response {
  int status = 200;
  std::string type = "text/plain; charset=utf-8";
  std::string body;

  static http_response text(int status, std::string body);
  static http_response json(int status, std::string body);
};

/// Sends one piece of a streamed answer; false once the client has gone away or the listener
/// stops (then the producer stops).
using http_writer = std::function<bool(const std::string&)>;

/// A streamed answer's two steps: `begin` sends the head (200, the content type given, no
/// length: the body ends when the connection closes), `write` one piece of the body. `open`
/// tells, without writing, whether the client is still there and the listener not stopping:
/// a producer waiting for something to write asks it now and then (say every 100 ms).
struct http_stream {
  std::function<bool(const std::string& type)> begin;
  http_writer write;
  std::function<bool()> open;
};

using http_handler = std::function<http_response(const http_request&)>;
/// A streamed route: returns a response that is sent as is when it never called `begin`
/// (an error, 501); after `begin` what it returns is ignored.
using http_stream_handler = std::function<http_response(const http_request&, http_stream&)>;

class admin_http {
public:
  using page_fn = std::function<std::string()>;
  /// Whether a request may be served: {0, ""} when it may, else {401 or 403, why}.
  using access_fn = std::function<std::pair<int, std::string>(const http_request&)>;

  struct options {
    std::chrono::milliseconds read_timeout{5000}; ///< to send the request head
    std::chrono::milliseconds send_timeout{5000}; ///< the client taking nothing of the answer
    int probe_threads = 4;                        ///< /healthz, /readyz, /metrics at once
    int route_threads = 8;                        ///< everything else at once
    int stream_threads = 2;                       ///< of those, streamed answers
    int pending_max = 64;                         ///< connections still sending their head
    int writing_max = 256;                        ///< answers waiting for their client to read
    /// What serves only in part while the node is ready (a shard group's database away, ADR
    /// 0023), as lines added to `/readyz`'s answer (200 or 503 stays as readiness says); empty
    /// function or text: nothing.
    page_fn degraded;
  };

  /// `not_ready`: why the node should not get calls, empty when it should (api/readiness.hpp).
  admin_http(page_fn metrics, page_fn not_ready, options opts);
  admin_http(page_fn metrics, page_fn not_ready) : admin_http(metrics, not_ready, options{}) {}
  ~admin_http() { stop(); }

  /// Adds a route (an exact path, or with a trailing '/' every path under it); only before
  /// start.
  void route(std::string path, http_handler h);
  void stream_route(std::string path, http_stream_handler h);
  /// The listener's own refusals of requests under `prefix` are JSON (`{"error","code"}`);
  /// only before start.
  void json_under(std::string prefix);
  /// Every request but the liveness and readiness probes asks `check` first; only before
  /// start.
  void check_access(access_fn check);

  /// Binds and starts serving; returns the bound port, or 0 and sets `error`.
  uint16_t start(const std::string& host, uint16_t port, std::string& error);
  /// Stops accepting, closes waiting connections and waits for the answers in progress (each
  /// bounded by `send_timeout`; streams see their writer fail).
  void stop();

private:
  void serve();
  /// Parses a complete head and hands it to a thread of its own (503 when none is free).
  void dispatch(int fd, const std::string& head);
  http_response answer(const http_request& req);
  /// A refusal by the listener itself: text, or JSON under a `json_under` prefix.
  http_response refusal(const std::string& target, int status, const std::string& msg) const;
  /// From an answering thread: sends what the socket takes now, hands the rest (and the
  /// socket) to the loop thread.
  void respond(int fd, const http_response& r);

  struct outgoing {
    int fd;
    std::string data;
    size_t sent = 0;
    std::chrono::steady_clock::time_point deadline;
  };

  page_fn metrics_;
  page_fn not_ready_;
  options opts_;
  std::map<std::string, http_handler> routes_;
  std::map<std::string, http_stream_handler> streams_;
  std::vector<std::string> json_prefixes_;
  access_fn access_;
  int listen_fd_ = -1;
  int wake_fd_ = -1; // an eventfd: an answer was handed to the loop thread
  std::atomic<bool> stopping_{false};
  std::mutex mtx_; // guards the counts below
  std::condition_variable idle_;
  int probes_ = 0, others_ = 0, streaming_ = 0;
  std::vector<outgoing> handed_; // to the loop thread, which takes them at its next turn
  std::thread thread_;
};

/// Parses a request target ("/api/offer?id=a%20b"); false (and `error`) on a bad escape.
bool parse_target(const std::string& target, http_request& out, std::string& error);

} // namespace gost::runtime
