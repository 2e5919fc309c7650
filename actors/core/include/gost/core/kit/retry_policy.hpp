#pragma once
// What the kit does with a run that failed (plain class, no actors, unit-tested):
//
// - a failure that is not the entity's fault (a service the work needs, or the database, is
//   down or full: `disposition::retry`) counts no attempt; it is retried after a back-off that
//   doubles with the lane's streak of such failures (up to 32x), and never dead-letters;
// - any other failure counts an attempt of (lane, entity): retried after `backoff * attempts`,
//   and dead-lettered once `max_attempts` failed;
// - a success forgets the entity's attempts and ends the lane's streak.

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "gost/core/errc.hpp"

namespace gost::kit {

class retry_policy {
public:
  struct decision {
    enum class kind : uint8_t { retry, dead_letter } what = kind::retry;
    int64_t retry_at_us = 0; ///< for retry
    int attempts = 0;        ///< failed attempts so far (counted ones)
    bool counted = false;    ///< whether this failure counted an attempt
  };

  explicit retry_policy(int max_attempts) : max_attempts_(max_attempts < 1 ? 1 : max_attempts) {}

  /// A run of `entity_id` in `lane` failed with `err` at `now_us`; `backoff` is the lane's.
  decision failed(const std::string& lane, const std::string& entity_id, const caf::error& err,
                  std::chrono::milliseconds backoff, int64_t now_us);

  /// A run succeeded.
  void succeeded(const std::string& lane, const std::string& entity_id);

  /// Failed attempts counted for (lane, entity) so far.
  int attempts(const std::string& lane, const std::string& entity_id) const;

  /// The largest multiple of the back-off an unavailable streak waits.
  static constexpr int max_streak_factor = 32;

private:
  int max_attempts_;
  std::map<std::pair<std::string, std::string>, int> attempts_;
  std::map<std::string, int> streak_; ///< consecutive unavailable failures per lane
};

} // namespace gost::kit
