#include "gost/feeds/feed_processor.hpp"

#include <unordered_set>

namespace gost::feeds {

const char* to_string(load_report::status s) {
  switch (s) {
    case load_report::status::succeeded: return "succeeded";
    case load_report::status::failed: return "failed";
    case load_report::status::transient: return "transient";
    case load_report::status::stopped: return "stopped";
  }
  return "?";
}

namespace {

using clock = std::chrono::steady_clock;

v1::FeedRequest request_of(const load_spec& spec) {
  v1::FeedRequest r;
  r.set_seller_id(spec.seller_id);
  r.set_namespace_(spec.ns);
  r.set_task_id(spec.task_id);
  return r;
}

/// A fatal of the source (it could not be read) is worth running again; one of the document
/// is not.
bool transient_fatal(const feed_fatal& f) {
  return f.kind == "io";
}

} // namespace

load_report feed_processor::run(const opener& open, const load_spec& spec, request_sink& out,
                                problem_sink* problems, const stop_signal& stop) const {
  load_report rep;
  auto fail = [&](feed_fatal f) {
    rep.outcome = transient_fatal(f) ? load_report::status::transient : load_report::status::failed;
    rep.fatal = std::move(f);
    return rep;
  };

  // Pass 1: the seed's "check the schema" step. Nothing is sent unless the whole file passes.
  auto t0 = clock::now();
  {
    auto src = open();
    auto check = read_feed(src, limits_);
    rep.check_time = clock::now() - t0;
    rep.format = check.format;
    rep.bytes = check.bytes;
    if (check.fatal)
      return fail(std::move(*check.fatal));
  }
  if (stop.requested())
    return rep;

  // Pass 2: unify and send in batches.
  auto t1 = clock::now();
  std::unordered_set<std::string> seen;
  v1::FeedRequest batch = request_of(spec);
  auto* body = batch.mutable_batch();
  auto flush_batch = [&] {
    if (body->offers_size() == 0 && body->rejected_size() == 0)
      return;
    body->set_batch_id(std::to_string(++rep.batches));
    out.send(batch, stop);
    body->Clear();
  };
  auto src = open();
  auto pass = read_feed(src, limits_, [&](feed_ad&& ad) {
    ++rep.offers;
    auto line = ad.line;
    if (!ad.external_id.empty() && !seen.insert(ad.external_id).second) {
      ++rep.duplicates;
      if (problems)
        problems->add(ad.external_id, ad.title, line,
                      {problem_type::duplicate, problem_level::error, "",
                       "the external id " + ad.external_id
                         + " came earlier in this feed; the first offer with it was sent"});
      return !stop.requested();
    }
    auto u = unifier_.unify(std::move(ad), spec.unify);
    if (problems)
      for (auto& p : u.problems)
        problems->add(u.offer.external_id(), u.offer.title(), line, p);
    for (auto& p : u.problems)
      rep.warnings += p.level == problem_level::warning;
    rep.transient += u.transient;
    if (u.rejected()) {
      ++rep.rejected;
      auto* r = body->add_rejected();
      r->set_external_id(u.offer.external_id());
      r->set_reason(u.reason());
    } else {
      ++rep.sent;
      *body->add_offers() = std::move(u.offer);
    }
    if (static_cast<size_t>(body->offers_size() + body->rejected_size()) >= spec.batch_size)
      flush_batch();
    return !stop.requested();
  });
  if (pass.fatal) // the file changed under us, or cannot be read again
    return fail(std::move(*pass.fatal));
  if (pass.stopped || stop.requested())
    return rep;
  flush_batch();
  // The end strictly after every batch: only once the broker acknowledged all of them.
  if (!out.flushed(stop)) {
    if (stop.requested())
      return rep;
    return fail({"io", "the requests topic did not acknowledge every batch; the load runs again"});
  }
  auto end = request_of(spec);
  end.mutable_end()->set_missing(spec.missing);
  end.mutable_end()->set_batches(rep.batches);
  out.send(end, stop);
  if (!out.flushed(stop)) {
    if (stop.requested())
      return rep;
    return fail({"io", "the requests topic did not acknowledge the end message; the load runs "
                       "again"});
  }
  rep.send_time = clock::now() - t1;
  rep.outcome = load_report::status::succeeded;
  return rep;
}

} // namespace gost::feeds
