#pragma once
// A 5-field cron expression (minute hour day-of-month month day-of-week), in UTC, as Vixie
// cron reads it: `*`, numbers, ranges `a-b`, steps `*/n` and `a-b/n`, lists `a,b-c`, month and
// weekday names (JAN..DEC, SUN..SAT); weekday 0 and 7 are Sunday. When both day fields are
// restricted, a day matches when either does. Plain C++, no CAF.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gost::scheduled {

class cron_expr {
public:
  /// Parses `text`; none with `*error` saying which field is wrong and why.
  static std::optional<cron_expr> parse(std::string_view text, std::string* error);

  /// The first matching minute strictly after `after_ms` (ms since the epoch), or none when
  /// nothing matches within eight years (e.g. `0 0 30 2 *`).
  std::optional<int64_t> next_after(int64_t after_ms) const;

private:
  uint64_t minutes_ = 0; ///< bit m: minute m matches
  uint32_t hours_ = 0;
  uint32_t days_ = 0;    ///< bit d (1..31)
  uint16_t months_ = 0;  ///< bit m (1..12)
  uint8_t weekdays_ = 0; ///< bit w (0 = Sunday .. 6)
  bool days_any_ = true;
  bool weekdays_any_ = true;

  bool day_matches(int64_t days_since_epoch, unsigned day) const;
};

} // namespace gost::scheduled
