#pragma once
// What identifies an image function's task and result (seed 003, MISSION I4 and I6): the
// function, its arguments in canonical form, the result key and the partition. Identical
// requests written differently (`HTTP://Host:80/a.jpg#x` and `http://host/a.jpg`, an angle of
// -90 and 270) are one task and one result.

#include <cstdint>
#include <string>
#include <string_view>

#include "gost/images/compute.hpp"

namespace gost::images {

enum class function : uint8_t { rotate = 1, preview, ratio, main_color };

/// `rotate`, `preview`, `ratio`, `main_color`: the names in tables, topics and metrics.
const char* to_string(function f);
/// The function named `name`; false when there is none.
bool parse_function(std::string_view name, function& out);

/// `url` as the cache knows it: http or https only, scheme and host lower-cased, the default
/// port dropped, the fragment dropped, an empty path made `/`; the rest kept byte for byte.
/// A URL that is not one fails with `bad_argument` naming what is wrong (no private-address
/// check here: that is the fetcher's, at connect time).
outcome<std::string> canonical_url(std::string_view url);

/// A task: the function and its arguments, canonical.
struct task_key {
  function fn = function::ratio;
  std::string args; ///< the canonical URL; for rotate, the URL, a newline and the angle

  /// hash(function, args): 32 hex digits (the first 128 bits of SHA-256), the results' key.
  std::string result_key() const;
  /// The partition of the task among `partitions` (from the result key).
  uint32_t partition(uint32_t partitions) const;
  /// The URL in the arguments.
  std::string_view url() const { return std::string_view{args}.substr(0, args.find('\n')); }
};

/// The task of `fn` on `url` (and `degrees` for rotate: -360..360, normalized to 0..360 and
/// written with at most 3 decimals). Fails with `bad_argument` naming the argument.
outcome<task_key> make_task(function fn, std::string_view url, double degrees = 0);

} // namespace gost::images
