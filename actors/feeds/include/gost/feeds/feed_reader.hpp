#pragma once
// The feed processor's reader (seed 004 "Обработка заданий", steps 3–4; docs/feed-format.md):
// one streaming pass over a seller's XML feed with libxml2's xmlTextReader, memory bounded by
// the largest offer, not the file. It detects the format from the root element (gost's native
// `<feed>`, Avito Autoload `<Ads>`, Yandex YML `<yml_catalog>`), refuses hostile documents and
// enforces the limits, checks the native format against its XSD in the same pass, and hands
// each offer, as the seller wrote it, to a callback.
//
// Fatal vs per-offer: anything that makes the document untrustworthy (not well-formed, bytes
// invalid in its encoding, entities declared, a limit passed, the XSD not met, an unknown root)
// stops the pass with a `feed_fatal` naming line and column; the load fails and nothing of it
// is applied. Problems of one offer's values (a price written `1 500 руб.`, a missing id, a
// relative photo URL) are `offer_problem`s on that offer; the others go on.
//
// The processor runs the pass twice over the stored file: first without a callback (the
// seed's "check the schema" step: every fatal check, nothing extracted), then, when that
// passed, with one to unify and send. So a fatal error is never found after offers were sent.
//
// Hostile input: the parser runs with XML_PARSE_NONET and never with NOENT / DTDLOAD /
// DTDATTR, so no entity is substituted and no DTD is loaded; a DOCTYPE that declares anything
// (entities, parameter entities: billion laughs, quadratic blow-up, XXE) is refused when it is
// read, before any reference to it, and while a pass runs libxml2's external entity loader
// refuses everything, so no file or URL a document names is ever opened. A DOCTYPE that only
// names an external DTD (`<!DOCTYPE yml_catalog SYSTEM "shops.dtd">`) is ignored.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gost::feeds {

/// `parsed`: JSON Lines of gost.v1.ParsedOffer, from systems that parsed offers elsewhere.
enum class feed_format { native, avito, yml, parsed };

/// "native", "avito", "yml", "parsed".
const char* to_string(feed_format f);

/// Limits of one document (config `feeds.*`); passing one is a fatal `limit` error.
struct reader_limits {
  uint64_t max_file_bytes = 512ull << 20;
  int max_depth = 24; ///< element nesting, the root at depth 1
  uint64_t max_offers = 500'000;
  size_t max_field_chars = 100'000; ///< one text or attribute value, in characters
};

/// Why a document was refused. `kind` is one of: `malformed` (not well-formed XML, bytes
/// invalid in the declared encoding, truncated, text after the root), `hostile` (entities or
/// a DTD internal subset declared), `limit`, `schema` (the native XSD not met), `format`
/// (an unknown root element, a structure the format does not allow), `io` (the source
/// failed).
struct feed_fatal {
  std::string kind;
  std::string message; ///< says what is wrong and, for limits, which config key
  int64_t line = 0;
  int64_t column = 0;
  /// "line L, column C: message" (the column when known).
  std::string describe() const;
};

/// The seed's error types (seed 004 "Статистика/ошибки обработки"), used by the reader, the
/// unifier and the answers of the offer store.
enum class problem_type { validation, category, attribute, geocoding, banned, duplicate };
enum class problem_level { error, warning };
const char* to_string(problem_type t);
const char* to_string(problem_level l);

/// One problem of one offer. An `error` keeps the offer from the store (it is still reported
/// to it as carried by the load, so its stored version is not deleted); a `warning` does not.
struct offer_problem {
  problem_type type = problem_type::validation;
  problem_level level = problem_level::error;
  std::string field;   ///< the element as the feed names it, e.g. "Price", "param[Цвет]"
  std::string message; ///< for the seller: what is wrong and what would be accepted
};

/// One offer as the seller wrote it, in the format's terms mapped onto gost's fields.
struct feed_ad {
  int64_t line = 0; ///< where the offer starts in the file
  std::string external_id;
  std::vector<std::string> category; ///< levels, most general first, as written
  std::string title;
  std::string description;
  std::optional<int64_t> price_minor; ///< kopecks; empty when absent or invalid
  std::string currency;               ///< ISO 4217 (RUR is read as RUB)
  std::string address;
  std::optional<double> lat, lon;
  std::vector<std::string> photos; ///< absolute http(s) URLs, in the feed's order
  std::string video;
  bool active = true; ///< false: the feed lists it as not available (YML)
  /// Attributes in the feed's order; a name may repeat (Avito option lists).
  std::vector<std::pair<std::string, std::string>> attributes;
  std::vector<offer_problem> problems;
};

/// Bytes in: reads up to `n` into `buf`, returns the count, 0 at the end, -1 on failure
/// (with `error` set).
struct feed_source {
  std::function<long(char* buf, size_t n)> read;
  std::string error;
};
/// A file on disk (the loader's stored blob).
feed_source file_source(const std::string& path);
/// Bytes in memory, kept alive by the caller.
feed_source memory_source(std::string_view bytes);

struct read_summary {
  std::optional<feed_format> format;
  uint64_t offers = 0; ///< offers met (handed to the callback when there is one)
  uint64_t bytes = 0;  ///< bytes read from the source
  std::optional<feed_fatal> fatal;
  bool stopped = false; ///< the callback asked to stop
  bool ok() const { return !fatal && !stopped; }
};

/// Called for each offer, in file order; return false to stop the pass.
using ad_callback = std::function<bool(feed_ad&&)>;

/// One pass over a feed. Without a callback it only checks (every fatal rule, the XSD); with
/// one it also extracts each offer and checks its values. Thread-safe: passes may run on
/// several threads at once.
read_summary read_feed(feed_source& src, const reader_limits& limits,
                       const ad_callback& on_ad = nullptr);

/// Parses a price as feeds write it: digits with an optional point and up to two decimals
/// ("1500", "1500.5", "1500.50"); anything else (`1 500 руб.`, `-100`, `бесплатно`, `12,5`)
/// is an error whose text says what is accepted. Returns minor units.
std::optional<int64_t> parse_price(std::string_view text, std::string* why);

/// True for an absolute http:// or https:// URL with a host.
bool is_absolute_http_url(std::string_view url);

} // namespace gost::feeds
