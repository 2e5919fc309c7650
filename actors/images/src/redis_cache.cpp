#include "gost/images/redis_cache.hpp"

#include <csignal>

#include <hiredis/hiredis.h>

#include "gost/core/dependency.hpp"
#include "gost/images/stats.hpp"

namespace gost::images {

namespace {

constexpr std::string_view magic = "gi1";

void field(std::string& out, std::string_view v) {
  out += std::to_string(v.size());
  out += ':';
  out += v;
}

bool next_field(std::string_view& in, std::string_view& v) {
  auto colon = in.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon > 10)
    return false;
  size_t n = 0;
  for (size_t i = 0; i < colon; ++i) {
    if (in[i] < '0' || in[i] > '9')
      return false;
    n = n * 10 + static_cast<size_t>(in[i] - '0');
  }
  if (in.size() - colon - 1 < n)
    return false;
  v = in.substr(colon + 1, n);
  in.remove_prefix(colon + 1 + n);
  return true;
}

bool to_int(std::string_view s, int64_t& out) {
  if (s.empty())
    return false;
  bool neg = s[0] == '-';
  if (neg)
    s.remove_prefix(1);
  if (s.empty() || s.size() > 18)
    return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9')
      return false;
    v = v * 10 + (c - '0');
  }
  out = neg ? -v : v;
  return true;
}

timeval to_timeval(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

struct reply_deleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

} // namespace

std::string encode_cached(const persistence::image_result& r) {
  std::string out{magic};
  for (std::string_view v :
       {std::string_view{r.status}, std::string_view{r.function}, std::string_view{r.args},
        std::string_view{r.error_kind}, std::string_view{r.error}})
    field(out, v);
  field(out, std::to_string(r.attempts));
  field(out, std::to_string(r.expires_at_us));
  field(out, r.value);
  return out;
}

bool decode_cached(std::string_view in, persistence::image_result& out) {
  if (in.substr(0, magic.size()) != magic)
    return false;
  in.remove_prefix(magic.size());
  std::string_view f[8];
  for (auto& v : f)
    if (!next_field(in, v))
      return false;
  int64_t attempts = 0, expires = 0;
  if (!in.empty() || !to_int(f[5], attempts) || !to_int(f[6], expires))
    return false;
  if (f[0] != "pending" && f[0] != "done" && f[0] != "error")
    return false;
  out.status = std::string{f[0]};
  out.function = std::string{f[1]};
  out.args = std::string{f[2]};
  out.error_kind = std::string{f[3]};
  out.error = std::string{f[4]};
  out.attempts = static_cast<int32_t>(attempts);
  out.expires_at_us = expires;
  out.value = std::string{f[7]};
  return true;
}

struct redis_cache::conn {
  redisContext* ctx = nullptr;
  ~conn() {
    if (ctx != nullptr)
      redisFree(ctx);
  }
};

redis_cache::redis_cache(redis_options opts, std::shared_ptr<dependency_tracker> tracker,
                         image_stats* stats)
  : opts_(std::move(opts)), tracker_(std::move(tracker)), stats_(stats) {
  // hiredis writes with write(2), not send(MSG_NOSIGNAL): a write to a Redis that went away
  // would raise SIGPIPE, whose default ends the process. The node handles EPIPE as an error.
  std::signal(SIGPIPE, SIG_IGN);
  // Checked by the config's validation: host:port with a port in 1..65535.
  auto colon = opts_.address.rfind(':');
  host_ = opts_.address.substr(0, colon);
  port_ = colon == std::string::npos ? 6379 : std::atoi(opts_.address.c_str() + colon + 1);
}

redis_cache::~redis_cache() = default;

std::chrono::steady_clock::time_point redis_cache::now() const {
  return opts_.now ? opts_.now() : std::chrono::steady_clock::now();
}

void redis_cache::fell_back() {
  if (stats_ != nullptr)
    stats_->redis_fallbacks.fetch_add(1, std::memory_order_relaxed);
}

void redis_cache::failed(const std::string& error) {
  {
    std::lock_guard<std::mutex> g{mtx_};
    skip_until_ = now() + opts_.retry_after;
    idle_.clear(); // a server that went away leaves every idle connection broken
  }
  if (tracker_)
    tracker_->failed(error);
  fell_back();
}

std::unique_ptr<redis_cache::conn> redis_cache::take() {
  {
    std::lock_guard<std::mutex> g{mtx_};
    if (now() < skip_until_) {
      fell_back();
      return nullptr;
    }
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
  }
  auto c = std::make_unique<conn>();
  c->ctx = redisConnectWithTimeout(host_.c_str(), port_, to_timeval(opts_.connect_timeout));
  if (c->ctx == nullptr || c->ctx->err != 0) {
    failed("cannot connect to images.redis.address=" + opts_.address + ": "
           + (c->ctx == nullptr ? std::string{"out of memory"} : std::string{c->ctx->errstr}));
    return nullptr;
  }
  redisSetTimeout(c->ctx, to_timeval(opts_.timeout));
  return c;
}

void redis_cache::give_back(std::unique_ptr<conn> c) {
  if (tracker_)
    tracker_->succeeded();
  std::lock_guard<std::mutex> g{mtx_};
  if (idle_.size() < 16)
    idle_.push_back(std::move(c));
}

std::optional<std::vector<persistence::image_result>>
redis_cache::get(const std::vector<std::string>& keys) {
  std::vector<persistence::image_result> out;
  if (keys.empty())
    return out;
  auto c = take();
  if (!c)
    return std::nullopt;
  std::vector<std::string> names;
  names.reserve(keys.size() + 1);
  names.emplace_back("MGET");
  for (auto& k : keys)
    names.push_back(opts_.prefix + k);
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (auto& n : names) {
    argv.push_back(n.data());
    lens.push_back(n.size());
  }
  reply_ptr r{static_cast<redisReply*>(
    redisCommandArgv(c->ctx, static_cast<int>(argv.size()), argv.data(), lens.data()))};
  if (!r) {
    failed("images.redis.address=" + opts_.address + ": " + c->ctx->errstr);
    return std::nullopt;
  }
  if (r->type != REDIS_REPLY_ARRAY || r->elements != keys.size()) {
    // An answer, but not MGET's (a wrong server, an error reply): skip Redis like an outage.
    failed("images.redis.address=" + opts_.address + " answered MGET with "
           + (r->type == REDIS_REPLY_ERROR ? std::string{r->str, r->len}
                                           : "reply type " + std::to_string(r->type)));
    return std::nullopt;
  }
  auto now = now_us();
  for (size_t i = 0; i < keys.size(); ++i) {
    auto* e = r->element[i];
    if (e->type != REDIS_REPLY_STRING)
      continue; // nil: not cached
    persistence::image_result x;
    if (!decode_cached({e->str, e->len}, x) || x.expires_at_us <= now)
      continue; // not ours, or expired between PostgreSQL's clock and ours: ask PostgreSQL
    x.key = keys[i];
    out.push_back(std::move(x));
  }
  give_back(std::move(c));
  if (stats_ != nullptr)
    stats_->redis_hits.fetch_add(out.size(), std::memory_order_relaxed);
  return out;
}

bool redis_cache::put(const std::vector<persistence::image_result>& rows, bool only_new) {
  auto now = now_us();
  std::vector<std::pair<std::string, std::string>> sets; // key, value
  std::vector<std::string> ttls;
  for (auto& r : rows) {
    auto left_ms = (r.expires_at_us - now) / 1000;
    if (left_ms <= 0)
      continue;
    sets.emplace_back(opts_.prefix + r.key, encode_cached(r));
    ttls.push_back(std::to_string(left_ms));
  }
  if (sets.empty())
    return true;
  auto c = take();
  if (!c)
    return false;
  for (size_t i = 0; i < sets.size(); ++i) {
    const char* argv[] = {"SET", sets[i].first.data(), sets[i].second.data(),
                          "PX",  ttls[i].data(),       "NX"};
    size_t lens[] = {3, sets[i].first.size(), sets[i].second.size(), 2, ttls[i].size(), 2};
    if (redisAppendCommandArgv(c->ctx, only_new ? 6 : 5, argv, lens) != REDIS_OK) {
      failed("images.redis.address=" + opts_.address + ": " + c->ctx->errstr);
      return false;
    }
  }
  for (size_t i = 0; i < sets.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(c->ctx, &raw) != REDIS_OK) {
      failed("images.redis.address=" + opts_.address + ": " + c->ctx->errstr);
      return false;
    }
    reply_ptr r{static_cast<redisReply*>(raw)};
    if (r->type == REDIS_REPLY_ERROR) {
      failed("images.redis.address=" + opts_.address
             + " refused SET: " + std::string{r->str, r->len});
      return false;
    }
  }
  give_back(std::move(c));
  return true;
}

} // namespace gost::images
