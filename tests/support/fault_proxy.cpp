#include "gost/testing/fault_proxy.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <list>
#include <stdexcept>
#include <vector>

// Every descriptor is close-on-exec: a test forks gostd children while the proxy runs, and a
// socket inherited by a child would outlive the proxy's close (no reset, no FIN reaches the
// peer: a cut that cuts nothing).

namespace gost::testing {

namespace {

using clock_type = std::chrono::steady_clock;

constexpr std::size_t max_queued = 1 << 20; ///< per direction: beyond it the source is not read
constexpr std::size_t max_chunk = 16 * 1024;

void set_nonblocking(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/// Closes with an RST instead of a FIN, as a peer's crash or a middlebox's reset looks.
void reset_close(int fd) {
  if (fd < 0)
    return;
  linger l{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  close(fd);
}

struct chunk {
  clock_type::time_point due;
  std::string bytes;
  std::size_t offset = 0;
};

/// One direction of a connection: bytes read from `from`, waiting to be written to `to`.
struct flow {
  int from = -1;
  int to = -1;
  std::deque<chunk> queue;
  std::size_t queued = 0;
  clock_type::time_point last_due{};
  bool eof = false;      ///< `from` said it sends no more
  bool shut = false;     ///< `to` was told so (shutdown SHUT_WR) after the queue emptied
  bool want_out = false; ///< a write to `to` would block
};

struct connection {
  int client = -1;
  int upstream = -1;
  flow up;   ///< client -> upstream
  flow down; ///< upstream -> client
  bool dead = false;
  /// A side ended or broke while half-open: nothing is said to the other side (a real
  /// partition carries no FIN or RST either) until the network heals, then it is reset.
  bool zombie = false;
};

} // namespace

fault_proxy::fault_proxy(std::string upstream_host, int upstream_port, int listen_port,
                         const std::string& listen_host)
  : upstream_host_(std::move(upstream_host)), upstream_port_(upstream_port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (inet_pton(AF_INET, listen_host.c_str(), &addr.sin_addr) != 1)
    throw std::runtime_error("fault_proxy: `" + listen_host + "` is not an IPv4 address");
  addr.sin_port = htons(static_cast<uint16_t>(listen_port));
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0
      || listen(listen_fd_, 128) != 0) {
    auto err = std::string{std::strerror(errno)};
    close(listen_fd_);
    throw std::runtime_error("fault_proxy: cannot listen on " + listen_host + ":"
                             + std::to_string(listen_port) + ": " + err);
  }
  socklen_t len = sizeof addr;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  set_nonblocking(listen_fd_);
  if (pipe2(wake_, O_CLOEXEC) != 0)
    throw std::runtime_error("fault_proxy: pipe: " + std::string{std::strerror(errno)});
  set_nonblocking(wake_[0]);
  thread_ = std::thread{[this] { run(); }};
}

fault_proxy::~fault_proxy() {
  stop_ = true;
  char c = 's';
  [[maybe_unused]] auto n = write(wake_[1], &c, 1);
  thread_.join();
  close(listen_fd_);
  close(wake_[0]);
  close(wake_[1]);
}

void fault_proxy::set(const settings& s) {
  std::unique_lock<std::mutex> guard{mtx_};
  settings_ = s;
  auto mine = ++generation_;
  char c = 'w';
  [[maybe_unused]] auto n = write(wake_[1], &c, 1);
  // Applied before the next change: a cut followed at once by a pass still resets.
  applied_cv_.wait(guard, [&] { return applied_ >= mine || stop_; });
}

void fault_proxy::pass() {
  set(settings{});
}

void fault_proxy::latency(std::chrono::milliseconds to_upstream,
                          std::chrono::milliseconds to_client) {
  settings s;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    s = settings_;
  }
  s.m = mode::pass;
  s.to_upstream = to_upstream;
  s.to_client = to_client;
  set(s);
}

void fault_proxy::bandwidth(std::size_t bytes_per_second) {
  settings s;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    s = settings_;
  }
  s.m = mode::pass;
  s.bytes_per_second = bytes_per_second;
  set(s);
}

void fault_proxy::cut() {
  settings s;
  s.m = mode::cut;
  set(s);
}

void fault_proxy::blackhole() {
  settings s;
  s.m = mode::blackhole;
  set(s);
}

fault_proxy::mode fault_proxy::current() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return settings_.m;
}

void fault_proxy::run() {
  std::list<connection> conns;
  settings s;
  std::uint64_t seen_generation = 0;
  char buf[max_chunk];

  auto kill = [&](connection& c) {
    if (c.dead)
      return;
    queued_ -= c.up.queued + c.down.queued;
    reset_close(c.client);
    reset_close(c.upstream);
    c.dead = true;
    --open_;
  };

  auto accept_one = [&] {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0)
      return false;
    if (s.m == mode::cut) {
      reset_close(fd);
      ++refused_;
      return true;
    }
    int up = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    inet_pton(AF_INET, upstream_host_.c_str(), &addr.sin_addr);
    addr.sin_port = htons(static_cast<uint16_t>(upstream_port_));
    // A blocking connect on loopback: immediate, and the proxy is a test's, not a server.
    if (connect(up, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close(up);
      reset_close(fd);
      ++refused_;
      return true;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    set_nonblocking(fd);
    set_nonblocking(up);
    auto& c = conns.emplace_back();
    c.client = fd;
    c.upstream = up;
    c.up.from = fd;
    c.up.to = up;
    c.down.from = up;
    c.down.to = fd;
    ++open_;
    ++accepted_;
    return true;
  };

  // Reads what `f.from` has; false when the connection is to be reset.
  auto read_flow = [&](connection& c, flow& f, std::chrono::milliseconds delay) {
    auto limit = max_chunk;
    if (s.bytes_per_second > 0) // small chunks: the limit is smooth, not bursts of 16 KiB
      limit = std::clamp<std::size_t>(s.bytes_per_second / 50, 1, max_chunk);
    auto n = read(f.from, buf, limit);
    if (s.m == mode::blackhole && n <= 0 && (n == 0 || (errno != EAGAIN && errno != EINTR))) {
      c.zombie = true;
      return true;
    }
    if (n == 0) {
      f.eof = true;
      return true;
    }
    if (n < 0)
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    if (s.m == mode::blackhole) {
      dropped_ += static_cast<std::uint64_t>(n);
      return true;
    }
    auto now = clock_type::now();
    auto due = std::max(now + delay, f.last_due);
    if (s.bytes_per_second > 0)
      due += std::chrono::microseconds{static_cast<long long>(n) * 1'000'000
                                       / static_cast<long long>(s.bytes_per_second)};
    f.last_due = due;
    f.queue.push_back(chunk{due, std::string(buf, static_cast<std::size_t>(n)), 0});
    f.queued += static_cast<std::size_t>(n);
    queued_ += static_cast<std::uint64_t>(n);
    return true;
  };

  // Writes what is due; false when the connection is to be reset.
  auto write_flow = [&](flow& f) {
    auto now = clock_type::now();
    f.want_out = false;
    while (!f.queue.empty() && f.queue.front().due <= now) {
      auto& ch = f.queue.front();
      auto n = send(f.to, ch.bytes.data() + ch.offset, ch.bytes.size() - ch.offset, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          f.want_out = true;
          return true;
        }
        return errno == EINTR;
      }
      forwarded_ += static_cast<std::uint64_t>(n);
      ch.offset += static_cast<std::size_t>(n);
      f.queued -= static_cast<std::size_t>(n);
      queued_ -= static_cast<std::uint64_t>(n);
      if (ch.offset == ch.bytes.size())
        f.queue.pop_front();
    }
    if (f.eof && f.queue.empty() && !f.shut && s.m != mode::blackhole) {
      shutdown(f.to, SHUT_WR);
      f.shut = true;
    }
    return true;
  };

  while (!stop_) {
    std::uint64_t generation = 0;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      s = settings_;
      generation = generation_;
    }
    if (generation != seen_generation) {
      seen_generation = generation;
      struct announce { // once the connections are as the settings say
        fault_proxy& p;
        std::uint64_t g;
        ~announce() {
          std::lock_guard<std::mutex> guard{p.mtx_};
          p.applied_ = g;
          p.applied_cv_.notify_all();
        }
      } done{*this, generation};
      for (auto& c : conns) {
        if (c.zombie && s.m != mode::blackhole) {
          kill(c);
        } else if (s.m == mode::cut) {
          if (!c.dead)
            ++resets_;
          kill(c);
        } else if (s.m == mode::blackhole) { // what was on its way is lost too
          for (flow* f : {&c.up, &c.down}) {
            for (auto& ch : f->queue)
              dropped_ += ch.bytes.size() - ch.offset;
            queued_ -= f->queued;
            f->queue.clear();
            f->queued = 0;
            f->last_due = {};
          }
        }
      }
    }
    conns.remove_if([](const connection& c) { return c.dead; });

    std::vector<pollfd> fds;
    fds.push_back({wake_[0], POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    auto now = clock_type::now();
    auto next_due = clock_type::time_point::max();
    for (auto& c : conns) {
      if (c.zombie) { // polled no more (poll skips a negative fd)
        fds.push_back({-1, 0, 0});
        fds.push_back({-1, 0, 0});
        continue;
      }
      short client_events = 0;
      short upstream_events = 0;
      if (!c.up.eof && c.up.queued < max_queued)
        client_events |= POLLIN;
      if (!c.down.eof && c.down.queued < max_queued)
        upstream_events |= POLLIN;
      for (flow* f : {&c.up, &c.down}) {
        if (f->want_out)
          (f == &c.up ? upstream_events : client_events) |= POLLOUT;
        else if (!f->queue.empty())
          next_due = std::min(next_due, f->queue.front().due);
      }
      fds.push_back({c.client, client_events, 0});
      fds.push_back({c.upstream, upstream_events, 0});
    }
    int timeout = -1;
    if (next_due != clock_type::time_point::max())
      timeout = static_cast<int>(std::max<long long>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(next_due - now).count() + 1));
    if (poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR)
      break;

    if (fds[0].revents & POLLIN) {
      while (read(wake_[0], buf, sizeof buf) > 0) {
      }
      continue; // new settings first: what else was ready is still ready (level-triggered)
    }
    if (fds[1].revents & POLLIN)
      while (accept_one()) {
      }
    std::size_t i = 2;
    for (auto& c : conns) {
      if (i >= fds.size())
        break; // the ones accepted in this round are polled in the next
      auto& cf = fds[i];
      auto& uf = fds[i + 1];
      i += 2;
      bool ok = true;
      if (cf.revents & (POLLIN | POLLHUP | POLLERR))
        ok = ok && (!(cf.events & POLLIN) || read_flow(c, c.up, s.to_upstream));
      if (uf.revents & (POLLIN | POLLHUP | POLLERR))
        ok = ok && (!(uf.events & POLLIN) || read_flow(c, c.down, s.to_client));
      ok = ok && write_flow(c.up) && write_flow(c.down);
      if (s.m == mode::blackhole && ((cf.revents | uf.revents) & POLLERR))
        c.zombie = true;
      else if (!ok || ((cf.revents | uf.revents) & POLLERR))
        kill(c);
      else if (c.up.shut && c.down.shut) {
        close(c.client);
        close(c.upstream);
        c.dead = true;
        --open_;
      }
    }
  }
  for (auto& c : conns)
    kill(c);
}

} // namespace gost::testing
