#include "gost/scheduled/cron.hpp"

#include <array>
#include <cctype>
#include <vector>

namespace gost::scheduled {

namespace {

// Days since 1970-01-01 of a civil date and back (H. Hinnant's algorithms).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

struct civil {
  int64_t y;
  unsigned m;
  unsigned d;
};

civil civil_from_days(int64_t z) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t y = static_cast<int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return {y + (m <= 2), m, d};
}

unsigned days_in_month(int64_t y, unsigned m) {
  static constexpr std::array<unsigned, 12> len{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
    return 29;
  return len[m - 1];
}

struct field_spec {
  const char* name;
  int lo;
  int hi;
  const char* const* names; ///< names of lo, lo+1, ... or null
};

constexpr const char* month_names[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                       "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr const char* weekday_names[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};

bool parse_value(std::string_view s, const field_spec& f, int& out) {
  if (s.empty())
    return false;
  if (f.names != nullptr && s.size() == 3 && std::isalpha(static_cast<unsigned char>(s[0]))) {
    for (int i = 0; i <= f.hi - f.lo && i < (f.names == weekday_names ? 7 : 12); ++i) {
      std::string_view n = f.names[i];
      bool eq = true;
      for (size_t k = 0; k < 3; ++k)
        eq = eq && std::toupper(static_cast<unsigned char>(s[k])) == n[k];
      if (eq) {
        out = f.lo + i;
        return true;
      }
    }
    return false;
  }
  if (s.size() > 4)
    return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9')
      return false;
    v = v * 10 + (c - '0');
  }
  out = v;
  return true;
}

/// Parses one field into a bit set over [lo, hi]; false with `error`.
bool parse_field(std::string_view text, const field_spec& f, uint64_t& bits, bool& any,
                 std::string* error) {
  auto fail = [&](const std::string& why) {
    if (error != nullptr)
      *error = std::string{f.name} + " field '" + std::string{text} + "': " + why;
    return false;
  };
  bits = 0;
  any = text == "*";
  size_t pos = 0;
  while (pos <= text.size()) {
    auto comma = text.find(',', pos);
    auto item = text.substr(pos, comma == std::string_view::npos ? text.size() - pos : comma - pos);
    pos = comma == std::string_view::npos ? text.size() + 1 : comma + 1;
    if (item.empty())
      return fail("empty list item");
    int step = 1;
    if (auto slash = item.find('/'); slash != std::string_view::npos) {
      auto st = item.substr(slash + 1);
      if (st.empty() || st.find_first_not_of("0123456789") != std::string_view::npos
          || st.size() > 4)
        return fail("step '" + std::string{st} + "' is not a number");
      step = std::stoi(std::string{st});
      if (step < 1)
        return fail("step must be at least 1");
      item = item.substr(0, slash);
    }
    int a = f.lo;
    int b = f.hi;
    if (item != "*") {
      auto dash = item.find('-');
      if (dash == std::string_view::npos) {
        if (!parse_value(item, f, a))
          return fail("'" + std::string{item} + "' is not a value");
        b = step > 1 ? f.hi : a; // `5/15` means 5-hi/15, as in Vixie cron
      } else if (!parse_value(item.substr(0, dash), f, a)
                 || !parse_value(item.substr(dash + 1), f, b)) {
        return fail("'" + std::string{item} + "' is not a range");
      }
    }
    if (a < f.lo || b > f.hi || a > b)
      return fail("values must be within " + std::to_string(f.lo) + "-" + std::to_string(f.hi)
                  + ", low to high");
    for (int v = a; v <= b; v += step)
      bits |= uint64_t{1} << v;
  }
  return true;
}

} // namespace

std::optional<cron_expr> cron_expr::parse(std::string_view text, std::string* error) {
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])))
      ++i;
    size_t j = i;
    while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j])))
      ++j;
    if (j > i)
      parts.push_back(text.substr(i, j - i));
    i = j;
  }
  if (parts.size() != 5) {
    if (error != nullptr)
      *error = "needs 5 fields (minute hour day-of-month month day-of-week), got "
               + std::to_string(parts.size());
    return std::nullopt;
  }
  static const field_spec specs[5] = {{"minute", 0, 59, nullptr},
                                      {"hour", 0, 23, nullptr},
                                      {"day-of-month", 1, 31, nullptr},
                                      {"month", 1, 12, month_names},
                                      {"day-of-week", 0, 7, weekday_names}};
  cron_expr e;
  uint64_t bits[5];
  bool any[5];
  for (size_t k = 0; k < 5; ++k)
    if (!parse_field(parts[k], specs[k], bits[k], any[k], error))
      return std::nullopt;
  e.minutes_ = bits[0];
  e.hours_ = static_cast<uint32_t>(bits[1]);
  e.days_ = static_cast<uint32_t>(bits[2]);
  e.months_ = static_cast<uint16_t>(bits[3]);
  auto wd = bits[4];
  if (wd & (uint64_t{1} << 7))
    wd |= 1; // 7 is Sunday too
  e.weekdays_ = static_cast<uint8_t>(wd & 0x7f);
  e.days_any_ = any[2];
  e.weekdays_any_ = any[4];
  return e;
}

bool cron_expr::day_matches(int64_t days_since_epoch, unsigned day) const {
  bool dom = (days_ >> day) & 1u;
  auto wd = static_cast<unsigned>(((days_since_epoch % 7) + 7 + 4) % 7); // 1970-01-01: Thursday
  bool dow = (weekdays_ >> wd) & 1u;
  if (days_any_ && weekdays_any_)
    return true;
  if (days_any_)
    return dow;
  if (weekdays_any_)
    return dom;
  return dom || dow;
}

std::optional<int64_t> cron_expr::next_after(int64_t after_ms) const {
  constexpr int64_t minute_ms = 60'000;
  int64_t t = after_ms >= 0 ? after_ms / minute_ms + 1 : -((-after_ms) / minute_ms); // minutes
  int64_t day = t >= 0 ? t / 1440 : (t - 1439) / 1440;
  auto c = civil_from_days(day);
  auto in_day = static_cast<unsigned>(t - day * 1440);
  unsigned hour = in_day / 60;
  unsigned minute = in_day % 60;
  const int64_t last_year = c.y + 8;
  while (c.y <= last_year) {
    if (!((months_ >> c.m) & 1u)) {
      c.d = 1;
      hour = minute = 0;
      if (++c.m > 12) {
        c.m = 1;
        ++c.y;
      }
      continue;
    }
    day = days_from_civil(c.y, c.m, c.d);
    if (!day_matches(day, c.d)) {
      hour = minute = 0;
      if (++c.d > days_in_month(c.y, c.m)) {
        c.d = 1;
        if (++c.m > 12) {
          c.m = 1;
          ++c.y;
        }
      }
      continue;
    }
    while (hour < 24 && !((hours_ >> hour) & 1u)) {
      ++hour;
      minute = 0;
    }
    while (hour < 24) {
      while (minute < 60 && !((minutes_ >> minute) & 1u))
        ++minute;
      if (minute < 60)
        return ((day * 1440) + hour * 60 + minute) * minute_ms;
      minute = 0;
      do
        ++hour;
      while (hour < 24 && !((hours_ >> hour) & 1u));
    }
    hour = minute = 0;
    if (++c.d > days_in_month(c.y, c.m)) {
      c.d = 1;
      if (++c.m > 12) {
        c.m = 1;
        ++c.y;
      }
    }
  }
  return std::nullopt;
}

} // namespace gost::scheduled
