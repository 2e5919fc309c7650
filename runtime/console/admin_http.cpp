#include "console/admin_http.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <vector>

#include "rpc/proto_types.hpp"

namespace gost::runtime {

namespace {

constexpr size_t head_max = 16384;

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return status < 500 ? "Error" : "Internal Server Error";
  }
}

std::string head_of(int status, const std::string& type, const std::string* body) {
  auto h = "HTTP/1.1 " + std::to_string(status) + " " + reason(status) + "\r\nContent-Type: " + type
           + "\r\nCache-Control: no-store\r\n"
           + "X-Content-Type-Options: nosniff\r\nContent-Security-Policy: default-src 'self'\r\n";
  if (body != nullptr)
    h += "Content-Length: " + std::to_string(body->size()) + "\r\n";
  return h + "Connection: close\r\n\r\n";
}

bool send_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    auto n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0)
      return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

/// Best effort on a non-blocking socket, from the loop thread: a refusal must not wait.
void refuse(int fd, const http_response& r) {
  auto bytes = head_of(r.status, r.type, &r.body) + r.body;
  [[maybe_unused]] auto n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::close(fd);
}

void refuse(int fd, int status, const std::string& msg) {
  refuse(fd, http_response::text(status, msg));
}

/// Sends what the socket takes now; false on an error (the client is gone).
bool send_some(int fd, const std::string& data, size_t& off) {
  while (off < data.size()) {
    auto n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0)
      off += static_cast<size_t>(n);
    else if (n < 0 && errno == EINTR)
      continue;
    else
      return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  return true;
}

/// Closes with a reset: what the client never read is dropped at once, not kept by the kernel
/// for an orphaned connection's retries.
void reset(int fd) {
  linger l{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  ::close(fd);
}

int hex(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/// Decodes %XX and '+'; false with the bad escape in `bad`.
bool decode(const std::string& in, std::string& out, std::string& bad) {
  out.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '+') {
      out += ' ';
    } else if (in[i] == '%') {
      int hi = i + 1 < in.size() ? hex(in[i + 1]) : -1;
      int lo = i + 2 < in.size() ? hex(in[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        bad = in.substr(i, 3);
        return false;
      }
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += in[i];
    }
  }
  return true;
}

/// A handler's exception becomes a 500 naming it, not the end of the process.
template <class F>
http_response guarded(F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return http_response::text(500, std::string{"internal error: "} + e.what() + "\n");
  }
}

bool is_probe(const std::string& path) {
  return path == "/healthz" || path == "/readyz" || path == "/metrics";
}

/// The value of header `name` (lower case) in a request head; "" when absent.
std::string header(const std::string& head, const std::string& name) {
  size_t at = head.find("\r\n");
  while (at != std::string::npos && at + 2 < head.size()) {
    auto start = at + 2;
    auto end = head.find("\r\n", start);
    auto line = head.substr(start, end == std::string::npos ? std::string::npos : end - start);
    auto colon = line.find(':');
    if (colon == name.size()) {
      bool same = true;
      for (size_t i = 0; i < colon && same; ++i)
        same = std::tolower(static_cast<unsigned char>(line[i])) == name[i];
      if (same) {
        auto v = line.substr(colon + 1);
        auto b = v.find_first_not_of(" \t");
        return b == std::string::npos ? std::string{}
                                      : v.substr(b, v.find_last_not_of(" \t") - b + 1);
      }
    }
    at = end;
  }
  return {};
}

/// `ipv4:10.0.0.7:51234`, as gRPC names peers.
std::string peer_of(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || a.sin_family != AF_INET)
    return "unknown";
  char ip[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a.sin_addr, ip, sizeof(ip));
  return std::string{"ipv4:"} + ip + ":" + std::to_string(ntohs(a.sin_port));
}

} // namespace

http_response http_response::text(int status, std::string body) {
  return {status, "text/plain; charset=utf-8", std::move(body)};
}

http_response http_response::json(int status, std::string body) {
  return {status, "application/json; charset=utf-8", std::move(body)};
}

bool parse_target(const std::string& target, http_request& out, std::string& error) {
  static const std::string hint =
    ": `%` must be followed by two hex digits (write `%25` for a `%` itself)";
  auto q = target.find('?');
  std::string bad;
  if (!decode(target.substr(0, q), out.path, bad)) {
    error = "bad escape `" + bad + "` in the path `" + target.substr(0, q) + "`" + hint;
    return false;
  }
  if (out.path.empty() || out.path[0] != '/') {
    error = "bad path `" + target.substr(0, q) + "`: it must begin with `/`";
    return false;
  }
  if (q == std::string::npos)
    return true;
  auto rest = target.substr(q + 1);
  size_t pos = 0;
  while (pos <= rest.size()) {
    auto amp = rest.find('&', pos);
    auto part = rest.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
    if (!part.empty()) {
      auto eq = part.find('=');
      std::string name, value;
      if (!decode(part.substr(0, eq), name, bad)
          || (eq != std::string::npos && !decode(part.substr(eq + 1), value, bad))) {
        error = "bad escape `" + bad + "` in the query `" + part + "`" + hint;
        return false;
      }
      if (name.empty()) {
        error = "a query parameter without a name `" + part + "`: write `name=value`";
        return false;
      }
      out.query[name] = value;
    }
    if (amp == std::string::npos)
      break;
    pos = amp + 1;
  }
  return true;
}

admin_http::admin_http(page_fn metrics, page_fn not_ready, options opts)
  : metrics_(std::move(metrics)), not_ready_(std::move(not_ready)), opts_(opts) {}

void admin_http::route(std::string path, http_handler h) {
  routes_[std::move(path)] = std::move(h);
}

void admin_http::stream_route(std::string path, http_stream_handler h) {
  streams_[std::move(path)] = std::move(h);
}

void admin_http::check_access(access_fn check) {
  access_ = std::move(check);
}

void admin_http::json_under(std::string prefix) {
  json_prefixes_.push_back(std::move(prefix));
}

http_response admin_http::refusal(const std::string& target, int status,
                                  const std::string& msg) const {
  for (auto& p : json_prefixes_)
    if (target.rfind(p, 0) == 0) {
      const char* code = status == 400   ? "INVALID_ARGUMENT"
                         : status == 401 ? "UNAUTHENTICATED"
                         : status == 403 ? "PERMISSION_DENIED"
                         : status == 404 ? "NOT_FOUND"
                         : status == 405 ? "UNIMPLEMENTED"
                         : status == 503 ? "UNAVAILABLE"
                                         : "INTERNAL";
      return http_response::json(status, "{\"error\":" + rpc::json_quoted(msg) + ",\"code\":\""
                                           + code + "\"}\n");
    }
  return http_response::text(status, msg + "\n");
}

uint16_t admin_http::start(const std::string& host, uint16_t port, std::string& error) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    error = "http.listen host `" + host + "` is not an IPv4 address";
    return 0;
  }
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0
      || ::listen(listen_fd_, 64) != 0) {
    error = std::string{"cannot listen on http.listen="} + host + ":" + std::to_string(port) + " ("
            + std::strerror(errno) + "); choose another `http.listen`";
    return 0;
  }
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    error =
      std::string{"cannot make the admin HTTP listener's eventfd ("} + std::strerror(errno) + ")";
    return 0;
  }
  socklen_t len = sizeof(addr);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  thread_ = std::thread{[this] { serve(); }};
  return ntohs(addr.sin_port);
}

void admin_http::stop() {
  stopping_ = true;
  if (thread_.joinable())
    thread_.join();
  if (listen_fd_ >= 0)
    ::close(listen_fd_);
  listen_fd_ = -1;
  // The answers in progress hold `this`; each ends within its send timeout (a stream's writer
  // fails once stopping_ is set). What they hand over now has no loop to send it: dropped.
  std::unique_lock<std::mutex> lock{mtx_};
  idle_.wait(lock, [this] { return probes_ + others_ == 0; });
  for (auto& o : handed_)
    reset(o.fd);
  handed_.clear();
  if (wake_fd_ >= 0)
    ::close(wake_fd_);
  wake_fd_ = -1;
}

void admin_http::serve() {
  using clock = std::chrono::steady_clock;
  struct conn {
    int fd;
    std::string head;
    clock::time_point deadline;
  };
  std::vector<conn> conns;
  std::vector<outgoing> writers; // answers their clients have not taken yet, oldest first
  std::vector<pollfd> fds;
  constexpr size_t first_conn = 2; // after the listening socket and the eventfd
  while (!stopping_) {
    fds.assign({pollfd{listen_fd_, POLLIN, 0}, pollfd{wake_fd_, POLLIN, 0}});
    for (auto& c : conns)
      fds.push_back(pollfd{c.fd, POLLIN, 0});
    for (auto& w : writers)
      fds.push_back(pollfd{w.fd, POLLOUT, 0});
    ::poll(fds.data(), fds.size(), 100);
    auto now = clock::now();
    // Answers: sent as far as each client takes them; one that took nothing for send_timeout
    // is reset. Before the handed ones are taken: their pollfds are not in this turn.
    std::vector<outgoing> still;
    for (size_t i = 0; i < writers.size(); ++i) {
      auto& w = writers[i];
      if (fds[first_conn + conns.size() + i].revents != 0) {
        auto before = w.sent;
        if (!send_some(w.fd, w.data, w.sent)) {
          ::close(w.fd);
          continue;
        }
        if (w.sent == w.data.size()) {
          ::close(w.fd);
          continue;
        }
        if (w.sent > before)
          w.deadline = now + opts_.send_timeout;
      }
      if (now >= w.deadline) {
        reset(w.fd);
        continue;
      }
      still.push_back(std::move(w));
    }
    writers = std::move(still);
    if (fds[1].revents != 0) {
      uint64_t n = 0;
      [[maybe_unused]] auto r = ::read(wake_fd_, &n, sizeof(n));
      std::lock_guard<std::mutex> lock{mtx_};
      for (auto& o : handed_)
        writers.push_back(std::move(o));
      handed_.clear();
    }
    while (static_cast<int>(writers.size()) > opts_.writing_max) {
      reset(writers.front().fd); // many clients not reading: the longest waiting makes room
      writers.erase(writers.begin());
    }
    std::vector<conn> kept;
    for (size_t i = 0; i < conns.size(); ++i) {
      auto& c = conns[i];
      if (fds[first_conn + i].revents != 0) {
        char buf[4096];
        auto n = ::recv(c.fd, buf, sizeof(buf), 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          ::close(c.fd);
          continue;
        }
        if (n > 0)
          c.head.append(buf, static_cast<size_t>(n));
        if (c.head.find("\r\n\r\n") != std::string::npos) {
          dispatch(c.fd, c.head);
          continue;
        }
        if (c.head.size() > head_max) {
          refuse(c.fd, 431, "the request head is over 16 KiB\n");
          continue;
        }
      }
      if (now >= c.deadline) {
        refuse(c.fd, 408, "no complete request within the read timeout\n");
        continue;
      }
      kept.push_back(std::move(c));
    }
    conns = std::move(kept);
    if ((fds[0].revents & POLLIN) == 0)
      continue;
    for (int fd;
         (fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0;) {
      if (static_cast<int>(conns.size()) >= opts_.pending_max) {
        // Many idle connections (a browser's spares): the oldest makes room.
        refuse(conns.front().fd, 408, "too many idle connections\n");
        conns.erase(conns.begin());
      }
      conns.push_back(conn{fd, {}, now + opts_.read_timeout});
    }
  }
  for (auto& c : conns)
    ::close(c.fd);
  for (auto& w : writers)
    reset(w.fd);
}

void admin_http::dispatch(int fd, const std::string& head) {
  auto line = head.substr(0, head.find("\r\n"));
  auto sp1 = line.find(' ');
  auto sp2 = line.find(' ', sp1 == std::string::npos ? 0 : sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos) {
    refuse(fd, 400, "not an HTTP request line\n");
    return;
  }
  auto target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (line.compare(0, sp1, "GET") != 0) {
    refuse(fd, refusal(target, 405, "only GET is served"));
    return;
  }
  http_request req;
  std::string error;
  if (!parse_target(target, req, error)) {
    refuse(fd, refusal(target, 400, error));
    return;
  }
  if (access_ && req.path != "/healthz" && req.path != "/readyz") {
    req.authorization = header(head, "authorization");
    req.peer = peer_of(fd);
    if (auto [status, why] = access_(req); status != 0) {
      refuse(fd, refusal(target, status, why));
      return;
    }
  }
  bool probe = is_probe(req.path);
  bool stream = !probe && streams_.count(req.path) != 0;
  {
    std::lock_guard<std::mutex> lock{mtx_};
    int& used = probe ? probes_ : others_;
    int cap = probe ? opts_.probe_threads : opts_.route_threads;
    if (used >= cap || (stream && streaming_ >= opts_.stream_threads)) {
      refuse(fd, refusal(target, 503,
                         "busy: too many requests in progress on this listener; try again"));
      return;
    }
    ++used;
    if (stream)
      ++streaming_;
  }
  auto served = [this, fd, probe, stream, req = std::move(req)] {
    if (stream) {
      // A stream's thread writes it (blocking, each send within send_timeout): its pieces
      // come as they happen, there is no whole answer to hand over.
      int flags = ::fcntl(fd, F_GETFL);
      ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
      auto ms = opts_.send_timeout.count();
      timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>(ms % 1000 * 1000)};
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      bool begun = false;
      http_stream out;
      out.begin = [&](const std::string& type) {
        begun = true;
        return !stopping_ && send_all(fd, head_of(200, type, nullptr));
      };
      out.open = [&] {
        // A client that went away shows as a readable end of stream (or an error).
        pollfd p{fd, POLLIN, 0};
        return !stopping_
               && !(::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0);
      };
      out.write = [&](const std::string& piece) { return out.open() && send_all(fd, piece); };
      auto r = guarded([&] { return streams_.at(req.path)(req, out); });
      if (!begun)
        respond(fd, r);
      else
        ::close(fd);
    } else {
      respond(fd, guarded([&] { return answer(req); })); // the fd is respond's now
    }
    std::lock_guard<std::mutex> lock{mtx_};
    --(probe ? probes_ : others_);
    if (stream)
      --streaming_;
    idle_.notify_all();
  };
  try {
    std::thread{std::move(served)}.detach();
  } catch (const std::system_error&) { // no thread to be had: refused, and counted back
    refuse(fd, refusal(target, 503, "busy: no thread for the request; try again"));
    std::lock_guard<std::mutex> lock{mtx_};
    --(probe ? probes_ : others_);
    if (stream)
      --streaming_;
  }
}

http_response admin_http::answer(const http_request& req) {
  if (req.path == "/healthz")
    return http_response::text(200, "ok\n");
  if (req.path == "/readyz") {
    auto why = not_ready_();
    auto partly = opts_.degraded ? opts_.degraded() : std::string{};
    return why.empty() ? http_response::text(200, "ready\n" + partly)
                       : http_response::text(503, "not ready: " + why + "\n" + partly);
  }
  if (req.path == "/metrics")
    return {200, "text/plain; version=0.0.4; charset=utf-8", metrics_()};
  if (auto r = routes_.find(req.path); r != routes_.end())
    return r->second(req);
  // A route ending in '/' (not the root) serves every path under it (the handler reads the
  // rest); the longest such route wins.
  const http_handler* under = nullptr;
  size_t longest = 0;
  for (auto& [path, h] : routes_)
    if (path.size() > 1 && path.back() == '/' && path.size() > longest
        && req.path.size() > path.size() && req.path.rfind(path, 0) == 0) {
      under = &h;
      longest = path.size();
    }
  if (under != nullptr)
    return (*under)(req);
  std::string known = "/healthz, /readyz, /metrics";
  for (auto& [path, h] : routes_)
    if (path.rfind("/api/", 0) != 0)
      known += ", " + path;
  return refusal(req.path, 404, "not found: " + req.path + "; try " + known);
}

void admin_http::respond(int fd, const http_response& r) {
  outgoing o{fd, head_of(r.status, r.type, &r.body) + r.body, 0, {}};
  if (!send_some(fd, o.data, o.sent) || o.sent == o.data.size()) {
    ::close(fd); // all sent at once (most answers), or the client is gone
    return;
  }
  // The client has not read yet: the loop thread sends the rest as it does, this thread is
  // free for the next probe.
  o.deadline = std::chrono::steady_clock::now() + opts_.send_timeout;
  {
    std::lock_guard<std::mutex> lock{mtx_};
    handed_.push_back(std::move(o));
  }
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof(one));
}

} // namespace gost::runtime
