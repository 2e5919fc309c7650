#pragma once
// The optional Redis layer in front of the image results in PostgreSQL (seed 003, MISSION I6;
// `images.redis.*`). PostgreSQL stays the truth: a result or status is written there first and
// then here with the TTL it has left there; a read asks here first and fills what it then
// finds in PostgreSQL (only where Redis has nothing: a fill never overwrites a newer write).
// Redis away never fails a call: the call goes on with PostgreSQL alone, counted in
// `image_stats::redis_fallbacks`, and the outage is logged by its dependency tracker (one
// line when lost, summaries, one when back). After a failure Redis is not asked again for
// `retry_after`, so an outage costs each call nothing but a clock read.
//
// Thread-safe: ImageService's blocking calls and the feeders share one; each call takes an
// idle connection (or opens one) and gives it back. hiredis stays private to this library.

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gost/persistence/images/images.hpp"

namespace gost {
class dependency_tracker;
}

namespace gost::images {

struct image_stats;

struct redis_options {
  std::string address; ///< host:port (images.redis.address); empty: no Redis layer
  std::string prefix;  ///< of every key (images.redis.prefix)
  std::chrono::milliseconds connect_timeout{200};
  std::chrono::milliseconds timeout{200}; ///< of one command
  std::chrono::milliseconds retry_after{1000};
  /// The clock `retry_after` is measured on; empty: std::chrono::steady_clock (as
  /// dependency_tracker's `now`: tests move one of their own instead of waiting).
  std::function<std::chrono::steady_clock::time_point()> now;
};

/// One result as Redis holds it (the value of `prefix + key`); decode fails on anything else.
std::string encode_cached(const persistence::image_result& r);
bool decode_cached(std::string_view bytes, persistence::image_result& out);

class redis_cache {
public:
  /// `tracker` and `stats` may be null.
  redis_cache(redis_options opts, std::shared_ptr<dependency_tracker> tracker, image_stats* stats);
  ~redis_cache();
  redis_cache(const redis_cache&) = delete;
  redis_cache& operator=(const redis_cache&) = delete;

  /// The live results of `keys` that Redis holds (a key it lacks is absent); nullopt when
  /// Redis could not be asked (a fallback: ask PostgreSQL for all).
  std::optional<std::vector<persistence::image_result>> get(const std::vector<std::string>& keys);

  /// Writes `rows` with the TTL each has left (`expires_at_us`; gone ones are skipped).
  /// `only_new`: where the key has nothing (a read's fill, a new pending status). False when
  /// Redis could not be written (a fallback).
  bool put(const std::vector<persistence::image_result>& rows, bool only_new);

  const redis_options& options() const { return opts_; }

private:
  struct conn;
  std::unique_ptr<conn> take();
  void give_back(std::unique_ptr<conn> c);
  void failed(const std::string& error);
  void fell_back();
  std::chrono::steady_clock::time_point now() const;

  redis_options opts_;
  std::string host_;
  int port_ = 0;
  std::shared_ptr<dependency_tracker> tracker_;
  image_stats* stats_;
  std::mutex mtx_; // guards what follows
  std::vector<std::unique_ptr<conn>> idle_;
  std::chrono::steady_clock::time_point skip_until_{};
};

} // namespace gost::images
