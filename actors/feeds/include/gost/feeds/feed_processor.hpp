#pragma once
// The feed processor's work on one load (seed 004 "Обработка заданий", steps 3–6): check the
// stored file (well-formed, not hostile, within the limits, the native XSD), then read it
// again offer by offer, unify, and send the offers to the offer store in batches over the
// requests topic, followed by the load's end message strictly after every batch was
// acknowledged. Plain code behind ports (ports.hpp): the node supplies the file, the topic and
// where per-offer problems are stored.
//
// Outcomes (seed 6.1–6.3): a fatal problem of the document (broken file, schema, hostile,
// limits) fails the load before anything is sent; a transient one (the file cannot be read,
// the broker does not acknowledge) leaves it to be run again; otherwise it succeeded. Running
// a load again is harmless: batch ids are the batch's position in the file, and the file is
// the same (content-addressed), so the offer store finds the same batches and applies them
// idempotently.
//
// Duplicates within a load (policy, docs/feed-format.md): the first offer with an external id
// in file order is the one sent; every later one is a `duplicate` error of that offer id.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "gost/feeds/feed_reader.hpp"
#include "gost/feeds/ports.hpp"
#include "gost/feeds/unifier.hpp"

namespace gost::feeds {

struct load_spec {
  std::string seller_id;
  std::string ns;
  std::string task_id;
  v1::FeedEnd::Missing missing = v1::FeedEnd::DELETE;
  unify_options unify;
  /// Offers (sent and rejected) per batch on the requests topic.
  size_t batch_size = 500;
};

/// Where the processor's per-offer problems go (stored with the load, seed's `offer_errors`).
class problem_sink {
public:
  virtual ~problem_sink() = default;
  virtual void add(const std::string& external_id, const std::string& title, int64_t line,
                   const offer_problem& p) = 0;
};

struct load_report {
  enum class status { succeeded, failed, transient, stopped };
  status outcome = status::stopped;
  std::optional<feed_fatal> fatal; ///< failed or transient: why
  std::optional<feed_format> format;
  uint64_t bytes = 0;
  uint64_t offers = 0;     ///< offers in the file
  uint64_t sent = 0;       ///< sent to the store to be applied
  uint64_t rejected = 0;   ///< sent as rejected (an error of their own)
  uint64_t duplicates = 0; ///< a later offer with an external id seen before
  uint64_t warnings = 0;
  uint64_t transient = 0; ///< of the rejected: not unified for now (carried unchanged)
  int32_t batches = 0;
  std::chrono::duration<double> check_time{0}; ///< the first pass
  std::chrono::duration<double> send_time{0};  ///< the second pass, batches acknowledged
};

const char* to_string(load_report::status s);

class feed_processor {
public:
  feed_processor(const unifier& u, reader_limits limits) : unifier_(u), limits_(limits) {}

  /// Opens the stored file; called once per pass.
  using opener = std::function<feed_source()>;

  load_report run(const opener& open, const load_spec& spec, request_sink& out,
                  problem_sink* problems, const stop_signal& stop) const;

private:
  const unifier& unifier_;
  reader_limits limits_;
};

} // namespace gost::feeds
