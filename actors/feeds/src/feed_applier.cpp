#include "gost/feeds/feed_applier.hpp"

#include <deque>
#include <map>

#include <caf/sec.hpp>

#include "gost/core/dependency.hpp"
#include "gost/core/errc.hpp"
#include "gost/core/log.hpp"

namespace gost::feeds {

namespace {

const auto lg = gost::log::get("feeds");

using outcome = v1::OfferResult;
using persistence::feed_counts;
using persistence::feed_item;
using persistence::keyed_offer;

/// Errors worth handling the request again for (the offer itself is fine).
bool transient(const caf::error& e) {
  return classify(e) != disposition::fail || e == caf::sec::request_timeout;
}

/// Adds `by` to the count of outcome `o` (deletions and manual ones are counted at the end).
void add(feed_counts& c, outcome::Outcome o, int64_t by) {
  switch (o) {
    case outcome::ADDED: c.added += by; break;
    case outcome::UPDATED: c.updated += by; break;
    case outcome::UNCHANGED: c.unchanged += by; break;
    case outcome::REJECTED: c.rejected += by; break;
    case outcome::DUPLICATE: c.duplicates += by; break;
    default: break;
  }
}

/// The stored offer with its version.
v1::Offer parsed(const keyed_offer& k) {
  v1::Offer o;
  o.ParseFromString(k.body);
  o.set_version(k.version);
  return o;
}

void stored_as(outcome& res, const v1::Offer& o, outcome::Outcome what) {
  res.set_offer_id(o.id());
  res.set_version(o.version());
  res.set_outcome(what);
}

void rejected(outcome& res, std::string reason) {
  res.set_outcome(outcome::REJECTED);
  res.set_reason(std::move(reason));
}

} // namespace

feed_applier::feed_applier(feed_store& store, offer_port& offers, response_sink& out,
                           applier_options opts)
  : store_(store), offers_(offers), out_(out), opts_(opts) {}

template <class F, class T>
bool feed_applier::retry(const char* what, F step, T& out, const stop_signal& stop) {
  backoff delay{opts_.retry_first, opts_.retry_cap};
  for (;;) {
    if (stop.requested())
      return false;
    auto r = step();
    if (r) {
      out = std::move(*r);
      return true;
    }
    if (!db_outage_reported(opts_.db.get(), r.error()))
      lg->warn("{} failed error={}; retrying", what, error_message(r.error()));
    if (!delay.wait(stop))
      return false;
  }
}

template <class F>
bool feed_applier::retry(const char* what, F step, const stop_signal& stop) {
  bool done = false;
  return retry(
    what,
    [&]() -> caf::expected<bool> {
      if (auto err = step())
        return err;
      return true;
    },
    done, stop);
}

void feed_applier::send(const v1::FeedRequest& req, v1::FeedResponse resp,
                        const stop_signal& stop) {
  resp.set_seller_id(req.seller_id());
  resp.set_namespace_(req.namespace_());
  resp.set_task_id(req.task_id());
  out_.send(resp, stop);
}

bool feed_applier::handle(const v1::FeedRequest& req, const stop_signal& stop) {
  if (req.seller_id().empty() || req.task_id().empty()) {
    lg->error("feed request without seller_id or task_id skipped");
    return true;
  }
  persistence::feed_task task;
  if (!retry(
        "registering the task",
        [&] { return store_.begin_task(req.task_id(), req.seller_id(), req.namespace_()); }, task,
        stop))
    return false;
  if (!task.other_owner.empty()) {
    lg->error("feed request of task={} for seller={} namespace={} refused: the task id "
              "belongs to {}",
              req.task_id(), req.seller_id(), req.namespace_(), task.other_owner);
    return true;
  }
  switch (req.body_case()) {
    case v1::FeedRequest::kBatch:
      if (task.finished) {
        lg->warn("feed batch for finished task={} batch={} ignored", req.task_id(),
                 req.batch().batch_id());
        return true;
      }
      return handle_batch(req, stop);
    case v1::FeedRequest::kEnd: return handle_end(req, task, stop);
    default:
      lg->error("feed request of task={} has neither batch nor end; skipped", req.task_id());
      return true;
  }
}

bool feed_applier::release_dangling_claim(const v1::Offer& content) {
  auto holder = store_.holder(content.seller_id(), content.namespace_(), content.external_id());
  if (!holder || !*holder)
    return false;
  auto there = offers_.get(**holder).get();
  if (there || there.error() != errc::not_found)
    return false; // it is there (a race: the next attempt finds it by key), or no answer
  auto released = store_.release_claim(content.seller_id(), content.namespace_(),
                                       content.external_id(), **holder);
  return released && *released;
}

v1::OfferResult feed_applier::redo(v1::Offer content) {
  outcome res;
  res.set_external_id(content.external_id());
  for (int attempt = 0; attempt < 3; ++attempt) {
    // A read that fails counts as "not stored": the create that follows finds it if it is.
    auto again = store_.find(content.seller_id(), content.namespace_(), {content.external_id()});
    if (!again || again->empty()) {
      content.set_id(offers_.new_id(content.seller_id()));
      auto r = offers_.create(content).get();
      if (r) {
        stored_as(res, *r, outcome::ADDED);
        return res;
      }
      if (r.error() != errc::already_exists) {
        rejected(res, "not stored: " + error_message(r.error()));
        return res;
      }
      // Nothing found by the key, yet it is taken: maybe by the claim of an offer a split left
      // in another group and deleted since; released, the next attempt creates.
      release_dangling_claim(content);
    } else {
      auto& existing = again->front();
      auto before = parsed(existing);
      content.set_id(existing.offer_id);
      if (!offers_.changes(before, content)) {
        res.set_offer_id(existing.offer_id);
        res.set_version(existing.version);
        res.set_outcome(outcome::UNCHANGED);
        return res;
      }
      auto r = offers_.update(content, existing.version, std::string{}).get();
      if (r) {
        stored_as(res, *r, outcome::UPDATED);
        return res;
      }
      if (r.error() != errc::conflict && r.error() != errc::not_found) {
        rejected(res, "not stored: " + error_message(r.error()));
        return res;
      }
    }
    // Someone else changed the offer meanwhile (or created it): read it again and redo.
  }
  rejected(res, "the offer kept changing while the feed was applied; send the batch again");
  return res;
}

bool feed_applier::handle_batch(const v1::FeedRequest& req, const stop_signal& stop) {
  auto& batch = req.batch();
  auto n = static_cast<size_t>(batch.offers_size());
  std::vector<outcome> results(n);
  std::vector<v1::Offer> contents(n);
  std::vector<std::string> ids;     // external ids of the valid offers, in order
  std::vector<size_t> id_index;     // their positions in the batch
  std::vector<std::string> carried; // every external id of the batch, valid or not
  std::vector<int> valid_at;        // per carried id: its index in `ids`, or -1 (rejected)
  for (size_t i = 0; i < n; ++i) {
    auto& r = results[i];
    r.set_batch_id(batch.batch_id());
    auto& c = contents[i];
    c = batch.offers(static_cast<int>(i));
    c.clear_id();
    c.clear_version();
    c.clear_created_at();
    c.clear_updated_at();
    c.set_seller_id(req.seller_id());
    c.set_namespace_(req.namespace_());
    // Feed-owned: FEED, or PARSED for a parsed feed's offers (their errors are not shown).
    if (c.source() != v1::OFFER_SOURCE_PARSED)
      c.set_source(v1::OFFER_SOURCE_FEED);
    r.set_external_id(c.external_id());
    std::string problem =
      c.external_id().empty() ? "offer.external_id is required in a feed" : offers_.check(c);
    if (!c.external_id().empty()) {
      carried.push_back(c.external_id());
      valid_at.push_back(problem.empty() ? static_cast<int>(ids.size()) : -1);
    }
    if (!problem.empty()) {
      rejected(r, problem);
      continue;
    }
    ids.push_back(c.external_id());
    id_index.push_back(i);
  }
  // Offers the feed processor could not send: carried by the load, answered REJECTED with its
  // reason, nothing stored.
  for (auto& rej : batch.rejected()) {
    outcome r;
    r.set_batch_id(batch.batch_id());
    r.set_external_id(rej.external_id());
    rejected(r, rej.reason().empty() ? "rejected by the feed processor" : rej.reason());
    if (!rej.external_id().empty()) {
      carried.push_back(rej.external_id());
      valid_at.push_back(-1);
    }
    results.push_back(std::move(r));
  }
  // The seller's stored offers under these ids, read before recording: what each valid offer
  // is meant to become (added, updated, unchanged) is counted with the record, in one
  // transaction, the first time the batch is recorded.
  std::vector<keyed_offer> stored;
  if (!retry(
        "reading the seller's offers",
        [&] { return store_.find(req.seller_id(), req.namespace_(), ids); }, stored, stop))
    return false;
  std::map<std::string, const keyed_offer*> by_ext;
  for (auto& s : stored)
    by_ext[s.external_id] = &s;
  std::vector<outcome::Outcome> intended(ids.size(), outcome::ADDED);
  for (size_t k = 0; k < ids.size(); ++k) {
    auto i = by_ext.find(ids[k]);
    if (i == by_ext.end())
      continue;
    auto probe = contents[id_index[k]];
    probe.set_id(i->second->offer_id);
    intended[k] =
      offers_.changes(parsed(*i->second), probe) ? outcome::UPDATED : outcome::UNCHANGED;
  }
  // Every external id the load carried is recorded, rejected ones too: a line that failed
  // validation must not make the end message delete the seller's stored offer.
  auto count_batch = [&](const std::vector<feed_item>& recorded) {
    feed_counts sum;
    for (size_t k = 0; k < carried.size(); ++k) {
      if (recorded[k] == feed_item::duplicate) {
        if (valid_at[k] >= 0)
          add(sum, outcome::DUPLICATE, 1);
        continue;
      }
      if (recorded[k] != feed_item::fresh)
        continue;
      add(sum, valid_at[k] < 0 ? outcome::REJECTED : intended[static_cast<size_t>(valid_at[k])], 1);
    }
    for (auto& r : results) // lines without an external id: rejected, never recorded
      if (r.outcome() == outcome::REJECTED && r.external_id().empty())
        add(sum, outcome::REJECTED, 1);
    return sum;
  };
  persistence::recorded_batch recorded;
  auto record = [&] {
    return store_.record_batch(req.seller_id(), req.task_id(), batch.batch_id(), carried,
                               count_batch);
  };
  if (!retry("recording the batch", record, recorded, stop))
    return false;
  // What each valid offer was (its first occurrence in `carried`; a later one in the same
  // batch is a duplicate).
  std::vector<feed_item> items(ids.size(), feed_item::fresh);
  for (size_t k = 0; k < carried.size(); ++k)
    if (valid_at[k] >= 0)
      items[static_cast<size_t>(valid_at[k])] = recorded.items[k];
  // Apply the offers concurrently, at most `window` at once; those that lost a race (changed
  // or created meanwhile) are redone one by one.
  struct pending {
    size_t pos;
    bool create;
    offer_port::reply<v1::Offer> reply;
  };
  std::deque<pending> running;
  std::vector<size_t> lost_race;
  auto settle = [&](size_t keep) {
    while (running.size() > keep) {
      auto p = std::move(running.front());
      running.pop_front();
      auto r = p.reply.get();
      auto& res = results[p.pos];
      if (r)
        stored_as(res, *r, p.create ? outcome::ADDED : outcome::UPDATED);
      else if (r.error() == errc::already_exists || r.error() == errc::conflict
               || r.error() == errc::not_found)
        lost_race.push_back(p.pos);
      else
        rejected(res, "not stored: " + error_message(r.error()));
    }
  };
  for (size_t k = 0; k < ids.size(); ++k) {
    if (stop.requested()) {
      settle(0);
      return false;
    }
    auto pos = id_index[k];
    auto& res = results[pos];
    if (items[k] == feed_item::duplicate) {
      res.set_outcome(outcome::DUPLICATE);
      res.set_reason("external_id " + ids[k] + " came earlier in this load");
      continue;
    }
    auto& c = contents[pos];
    auto i = by_ext.find(ids[k]);
    if (i == by_ext.end()) {
      c.set_id(offers_.new_id(c.seller_id()));
      running.push_back({pos, true, offers_.create(c)});
    } else {
      auto& stored_offer = *i->second;
      c.set_id(stored_offer.offer_id);
      if (intended[k] == outcome::UNCHANGED) {
        res.set_offer_id(stored_offer.offer_id);
        res.set_version(stored_offer.version);
        res.set_outcome(outcome::UNCHANGED);
        continue;
      }
      running.push_back({pos, false, offers_.update(c, stored_offer.version, std::string{})});
    }
    settle(opts_.window);
  }
  settle(0);
  for (auto pos : lost_race) {
    if (stop.requested())
      return false;
    auto r = redo(contents[pos]);
    r.set_batch_id(batch.batch_id());
    results[pos] = std::move(r);
  }
  // The counts went in with the record as intended; correct them where the outcome differs
  // (a race redone, a write refused). Only the first time: a batch handled again finds its
  // offers applied already, so its outcomes say less than the first handling's.
  feed_counts delta;
  bool corrected = false;
  if (recorded.first_time)
    for (size_t k = 0; k < ids.size(); ++k) {
      if (items[k] != feed_item::fresh)
        continue;
      auto actual = results[id_index[k]].outcome();
      if (actual == intended[k])
        continue;
      add(delta, intended[k], -1);
      add(delta, actual, +1);
      corrected = true;
    }
  for (auto& r : results) {
    v1::FeedResponse resp;
    *resp.mutable_result() = r;
    send(req, std::move(resp), stop);
  }
  if (corrected
      && !retry(
        "correcting the counts",
        [&] { return store_.add_counts(req.seller_id(), req.task_id(), delta); }, stop))
    return false;
  lg->info("feed batch applied seller={} task={} batch={} offers={}", req.seller_id(),
           req.task_id(), batch.batch_id(), n);
  return out_.flushed(stop);
}

bool feed_applier::handle_end(const v1::FeedRequest& req, const persistence::feed_task& task,
                              const stop_signal& stop) {
  if (task.finished) { // a re-delivered end: repeat the summary only
    v1::FeedResponse resp;
    resp.mutable_end()->ParseFromString(task.summary);
    send(req, std::move(resp), stop);
    return out_.flushed(stop);
  }
  std::vector<keyed_offer> missing;
  if (!retry(
        "finding offers missing from the load",
        [&] { return store_.missing(req.task_id(), req.seller_id(), req.namespace_()); }, missing,
        stop))
    return false;
  bool make_manual = req.end().missing() == v1::FeedEnd::MAKE_MANUAL;
  int64_t deleted = 0;
  int64_t made_manual = 0;
  for (auto& m : missing) {
    auto o = parsed(m);
    if (o.source() != v1::OFFER_SOURCE_FEED && o.source() != v1::OFFER_SOURCE_PARSED)
      continue; // manual offers are the seller's own, not the feed's
    outcome r;
    r.set_external_id(m.external_id);
    r.set_offer_id(m.offer_id);
    caf::error failed;
    if (make_manual) {
      o.set_id(m.offer_id);
      o.set_source(v1::OFFER_SOURCE_MANUAL);
      if (auto res = offers_.update(o, std::nullopt, "source").get()) {
        r.set_outcome(outcome::MADE_MANUAL);
        r.set_version(res->version());
        ++made_manual;
      } else {
        failed = std::move(res.error());
      }
    } else {
      if (auto res = offers_.remove(m.offer_id).get()) {
        r.set_outcome(outcome::DELETED);
        r.set_version(*res);
        ++deleted;
      } else {
        failed = std::move(res.error());
      }
    }
    if (failed) {
      if (failed == errc::not_found)
        continue; // gone already (a re-delivered end after a crash)
      if (transient(failed)) {
        lg->warn("{} offer={} failed error={}; the end message is handled again",
                 make_manual ? "making manual" : "deleting", m.offer_id, error_message(failed));
        return false;
      }
      rejected(r, std::string{"missing from the load, but could not be "}
                    + (make_manual ? "made manual: " : "deleted: ") + error_message(failed));
    }
    if (stop.requested())
      return false;
    v1::FeedResponse resp;
    *resp.mutable_result() = r;
    send(req, std::move(resp), stop);
  }
  // Every result of the load is acknowledged before the terminal message goes out.
  if (!out_.flushed(stop))
    return false;
  std::pair<feed_counts, int32_t> progress;
  if (!retry(
        "reading the task's counts",
        [&] { return store_.progress(req.seller_id(), req.task_id()); }, progress, stop))
    return false;
  auto& [c, batches] = progress;
  v1::FeedSummary summary;
  summary.set_added(c.added);
  summary.set_updated(c.updated);
  summary.set_unchanged(c.unchanged);
  summary.set_deleted(deleted);
  summary.set_made_manual(made_manual);
  // The batches' rejected lines; an offer of the end that could not be deleted (or made
  // manual) has its REJECTED result but is not counted here.
  summary.set_rejected(c.rejected);
  summary.set_duplicates(c.duplicates);
  summary.set_batches(batches);
  if (req.end().batches() != 0 && req.end().batches() != batches)
    lg->warn("feed task={} seller={} ended after {} batches, the end message says {}",
             req.task_id(), req.seller_id(), batches, req.end().batches());
  if (!retry(
        "finishing the task",
        [&] {
          return store_.finish_task(req.seller_id(), req.task_id(), summary.SerializeAsString());
        },
        stop))
    return false;
  v1::FeedResponse resp;
  *resp.mutable_end() = summary;
  send(req, std::move(resp), stop);
  lg->info("feed task finished seller={} task={} added={} updated={} unchanged={} deleted={}"
           " made_manual={} rejected={} duplicates={}",
           req.seller_id(), req.task_id(), summary.added(), summary.updated(), summary.unchanged(),
           summary.deleted(), summary.made_manual(), summary.rejected(), summary.duplicates());
  return out_.flushed(stop);
}

} // namespace gost::feeds
