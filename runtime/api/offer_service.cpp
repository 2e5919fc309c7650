#include "api/offer_service.hpp"

#include <algorithm>
#include <functional>
#include <set>

#include <google/protobuf/util/field_mask_util.h>

#include <caf/event_based_actor.hpp>

#include "api/call.hpp"
#include "cluster/builtin_kinds.hpp"
#include "cluster/router.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/offers/protocol.hpp"
#include "gost/offers/spawn.hpp"
#include "rpc/caller.hpp"

namespace gost::runtime {

namespace {

/// Checks an update mask; on success `out` is its comma-separated form.
std::string check_mask(const google::protobuf::FieldMask& mask, std::string& out) {
  static const std::set<std::string> fixed{"id", "version", "created_at", "updated_at"};
  for (auto& path : mask.paths()) {
    if (v1::Offer::descriptor()->FindFieldByName(path) == nullptr)
      return "update_mask: " + path
             + " is not a field of gost.v1.Offer (use top-level field "
               "names like title, price, attributes)";
    if (fixed.count(path) != 0)
      return "update_mask: " + path + " is set by gost, not by clients";
  }
  out = google::protobuf::util::FieldMaskUtil::ToString(mask);
  return {};
}

std::string check_request_id(const std::string& rid) {
  return rid.size() > max_id_len ? "request_id must be at most 256 bytes" : "";
}

std::string check_ref(const v1::OfferRef& ref) {
  switch (ref.ref_case()) {
    case v1::OfferRef::kId:
      return ref.id().empty() || ref.id().size() > max_id_len ? "ref.id must be 1..256 bytes" : "";
    case v1::OfferRef::kKey:
      return ref.key().seller_id().empty() || ref.key().external_id().empty()
               ? "ref.key needs seller_id and external_id (namespace may be empty)"
               : "";
    default: return "set ref.id or ref.key to name the offer";
  }
}

/// Resolves an OfferRef to the offer id inside `self` (a hub actor), then calls `next`.
void resolve(caf::event_based_actor* self, router& r, caf::timespan timeout,
             const v1::OfferRef& ref, std::function<void(const std::string&)> next, fail_fn fail) {
  if (ref.ref_case() == v1::OfferRef::kId) {
    next(ref.id());
    return;
  }
  auto& k = ref.key();
  self
    ->request(seller_offer_store(r, k.seller_id()), timeout, find_atom_v, k.seller_id(),
              k.namespace_(), k.external_id())
    .then([next = std::move(next)](std::string& id) { next(id); },
          [fail](caf::error& err) { fail(err); });
}

/// Whether the seller's key of `o` was held by a dangling claim, now removed: the key's offer
/// (found by key in the seller's home group) is a claimed one whose owner answers NOT_FOUND.
/// `done(false)` in every other case (the key is really taken, or an answer is missing).
template <class Done>
void release_dangling_claim(caf::event_based_actor* self, router& r, caf::timespan timeout,
                            clock_type::time_point deadline, const v1::Offer& o, Done done) {
  auto home = seller_offer_store(r, o.seller_id());
  auto seller = o.seller_id();
  auto ns = o.namespace_();
  auto external = o.external_id();
  self->request(home, timeout, find_atom_v, seller, ns, external)
    .then(
      [=, &r](std::string& holder) {
        ask_owner(
          self, r, deadline, [done](offer_msg&) { done(false); },
          [=](const caf::error& err) {
            if (err != errc::not_found) {
              done(false);
              return;
            }
            self->request(home, timeout, delete_atom_v, seller, ns, external, holder)
              .then([done](bool dropped) { done(dropped); }, [done](caf::error&) { done(false); });
          },
          get_atom_v, holder);
      },
      [done](caf::error&) { done(false); });
}

/// ListOffers' arguments, as the stores take them.
struct list_args {
  std::string seller;
  bool has_ns;
  std::string ns;
  std::string after;
  uint32_t limit;
  caf::timespan timeout;
};

/// The pages read so far, the home group's first, and the groups still to read.
struct spread_merge {
  std::vector<offer_list> pages;
  std::vector<uint32_t> groups;
};

/// Reads the next group's page of the seller into `m`, then the next, and answers the merged
/// page after the last (a group failing fails the call, as every list across groups does).
template <class Answer>
void list_spread(caf::event_based_actor* self, router& r, const list_args& a,
                 std::shared_ptr<spread_merge> m, Answer answer, fail_fn fail) {
  if (m->groups.empty()) {
    answer(persistence::merge_pages(std::move(m->pages), a.limit));
    return;
  }
  auto group = m->groups.back();
  m->groups.pop_back();
  auto store = r.store_of_group<store_actor>(group);
  if (!store) {
    fail(make_error(errc::unavailable,
                    "offers of seller " + a.seller + " are also in shard group "
                      + std::to_string(group)
                      + ", whose database this node has not opened: retry on another node, or "
                        "restart this one with the group declared"));
    return;
  }
  self->request(store, a.timeout, list_atom_v, a.seller, a.has_ns, a.ns, a.after, a.limit)
    .then(
      [self, &r, a, m, answer, fail](persistence::seller_page& page) {
        m->pages.push_back(std::move(page.offers));
        list_spread(self, r, a, m, answer, fail);
      },
      [fail](caf::error& err) { fail(err); });
}

} // namespace

grpc::ServerUnaryReactor* offer_service::CreateOffer(grpc::CallbackServerContext* ctx,
                                                     const v1::CreateOfferRequest* req,
                                                     v1::CreateOfferResponse* resp) {
  unary_call call{ctx, timeout_};
  auto& o = req->offer();
  if (!o.id().empty())
    return call.fail(invalid("offer.id must be empty on create: gost assigns ids"));
  if (o.version() != 0)
    return call.fail(invalid("offer.version must be 0 on create: gost assigns versions"));
  if (auto problem = check_content(o, limits_.offer); !problem.empty())
    return call.fail(invalid(problem));
  offer_msg msg{o};
  if (auto problem = check_request_id(req->request_id()); !problem.empty())
    return call.fail(invalid(problem));
  // A create with a request id makes the same offer id on every retry: the retry reaches the
  // same actor, which answers it with the first answer.
  auto rid = request_id{req->request_id(), "api", rpc::caller_of(*ctx)};
  auto id = id_in_home_group(router_, o.seller_id(), [&](int draw) {
    if (rid.empty())
      return make_offer_id();
    // Each draw of a retry is the same: the retry finds the same offer id.
    return offer_id_for_request(o.seller_id(),
                                draw == 0 ? rid.value : rid.value + "#" + std::to_string(draw));
  });
  auto deadline = call.deadline();
  caf::timespan timeout{call.budget()};
  auto& r = router_;
  // The job runs once: the offer moves on from its closure (ask_owner.hpp keeps it for retries).
  hub_.run([=, &r, msg = std::move(msg)](caf::event_based_actor* self) mutable {
    auto stored = [=](offer_msg& m) {
      *resp->mutable_offer() = std::move(m.value);
      call.ok();
    };
    ask_owner(
      self, r, deadline, stored,
      [=, &r](const caf::error& err) {
        // The key may be held by the claim of an offer a split left in another group and
        // deleted since (ADR 0023): its owner says so, the claim goes, the create runs again
        // (once; the request is still there: the call has not finished).
        if (err != errc::already_exists || req->offer().external_id().empty()) {
          call.finish(err);
          return;
        }
        release_dangling_claim(self, r, timeout, deadline, req->offer(), [=, &r](bool released) {
          if (!released) {
            call.finish(err);
            return;
          }
          ask_owner(self, r, deadline, stored, call.on_error(), create_atom_v, id,
                    offer_msg{req->offer()}, rid);
        });
      },
      create_atom_v, id, std::move(msg), rid);
  });
  return call.reactor();
}

grpc::ServerUnaryReactor* offer_service::GetOffer(grpc::CallbackServerContext* ctx,
                                                  const v1::GetOfferRequest* req,
                                                  v1::GetOfferResponse* resp) {
  unary_call call{ctx, timeout_};
  if (auto problem = check_ref(req->ref()); !problem.empty())
    return call.fail(invalid(problem));
  caf::timespan timeout{call.budget()};
  auto deadline = call.deadline();
  auto& r = router_;
  auto ref = req->ref();
  hub_.run([=, &r](caf::event_based_actor* self) {
    fail_fn fail = call.on_error();
    resolve(
      self, r, timeout, ref,
      [=, &r](const std::string& id) {
        ask_owner(
          self, r, deadline,
          [=](offer_msg& m) {
            *resp->mutable_offer() = std::move(m.value);
            call.ok();
          },
          fail, get_atom_v, id);
      },
      fail);
  });
  return call.reactor();
}

grpc::ServerUnaryReactor* offer_service::UpdateOffer(grpc::CallbackServerContext* ctx,
                                                     const v1::UpdateOfferRequest* req,
                                                     v1::UpdateOfferResponse* resp) {
  unary_call call{ctx, timeout_};
  v1::OfferRef ref = req->ref();
  if (ref.ref_case() == v1::OfferRef::REF_NOT_SET && !req->offer().id().empty())
    ref.set_id(req->offer().id());
  if (auto problem = check_ref(ref); !problem.empty())
    return call.fail(invalid(problem + " (or offer.id)"));
  std::string mask;
  if (auto problem = check_mask(req->update_mask(), mask); !problem.empty())
    return call.fail(invalid(problem));
  // The content rules are the offer entity's: checked there on the offer as it will be stored
  // (a masked update merged with the stored fields), answered INVALID_ARGUMENT naming the field.
  if (req->has_expected_version() && req->expected_version() < 1)
    return call.fail(invalid("expected_version must be at least 1 (versions start at 1)"));
  int64_t expected = req->has_expected_version() ? req->expected_version() : any_version;
  if (auto problem = check_request_id(req->request_id()); !problem.empty())
    return call.fail(invalid(problem));
  auto rid = request_id{req->request_id(), "api", rpc::caller_of(*ctx)};
  offer_msg msg{req->offer()};
  caf::timespan timeout{call.budget()};
  auto deadline = call.deadline();
  auto& r = router_;
  // The job and its continuation run once: the offer moves from one closure to the next, and
  // ask_owner.hpp keeps it for retries.
  hub_.run([=, &r, msg = std::move(msg), mask = std::move(mask),
            rid = std::move(rid)](caf::event_based_actor* self) mutable {
    fail_fn fail = call.on_error();
    resolve(
      self, r, timeout, ref,
      [=, &r, msg = std::move(msg), mask = std::move(mask),
       rid = std::move(rid)](const std::string& id) mutable {
        if (!msg.value.id().empty() && msg.value.id() != id) {
          call.finish(invalid("offer.id and ref name different offers"));
          return;
        }
        // A seller changed to one at home in another group than the offer's (ADR 0023) is
        // refused where the offer is written (FAILED_PRECONDITION, the write-behind's
        // key_elsewhere): only there is the stored seller known (an update naming the seller
        // it has, as a full replacement does, is served, a stray's too), and no move of the
        // seller's home can slip between the check and the write.
        ask_owner(
          self, r, deadline,
          [=](offer_msg& stored) {
            *resp->mutable_offer() = std::move(stored.value);
            call.ok();
          },
          fail, update_atom_v, id, std::move(msg), expected, std::move(mask), std::move(rid));
      },
      fail);
  });
  return call.reactor();
}

grpc::ServerUnaryReactor* offer_service::DeleteOffer(grpc::CallbackServerContext* ctx,
                                                     const v1::DeleteOfferRequest* req,
                                                     v1::DeleteOfferResponse* resp) {
  unary_call call{ctx, timeout_};
  if (auto problem = check_ref(req->ref()); !problem.empty())
    return call.fail(invalid(problem));
  if (req->has_expected_version() && req->expected_version() < 1)
    return call.fail(invalid("expected_version must be at least 1 (versions start at 1)"));
  int64_t expected = req->has_expected_version() ? req->expected_version() : any_version;
  if (auto problem = check_request_id(req->request_id()); !problem.empty())
    return call.fail(invalid(problem));
  auto rid = request_id{req->request_id(), "api", rpc::caller_of(*ctx)};
  caf::timespan timeout{call.budget()};
  auto deadline = call.deadline();
  auto& r = router_;
  auto ref = req->ref();
  hub_.run([=, &r](caf::event_based_actor* self) {
    fail_fn fail = call.on_error();
    resolve(
      self, r, timeout, ref,
      [=, &r](const std::string& id) {
        ask_owner(
          self, r, deadline,
          [=](int64_t& version) {
            resp->set_version(version);
            call.ok();
          },
          fail, delete_atom_v, id, expected, rid);
      },
      fail);
  });
  return call.reactor();
}

grpc::ServerUnaryReactor* offer_service::ListOffers(grpc::CallbackServerContext* ctx,
                                                    const v1::ListOffersRequest* req,
                                                    v1::ListOffersResponse* resp) {
  unary_call call{ctx, timeout_};
  if (req->seller_id().empty() || req->seller_id().size() > max_id_len)
    return call.fail(invalid("seller_id is required (1..256 bytes)"));
  uint32_t limit = 0;
  if (auto problem = check_page_size("page_size", req->page_size(), limits_, limit);
      !problem.empty())
    return call.fail(invalid(problem));
  auto limits = limits_;
  caf::timespan timeout{call.budget()};
  auto store = seller_offer_store(router_, req->seller_id());
  auto seller = req->seller_id();
  auto has_ns = req->has_namespace_();
  auto ns = req->namespace_();
  auto after = req->page_token();
  auto& r = router_;
  hub_.run([=, &r](caf::event_based_actor* self) {
    auto answer = [=](offer_list page) {
      // A page whose offers outgrow limits.page_max_bytes ends early; the next one starts
      // after its last offer.
      auto fit = page_fit(page, limits);
      for (size_t i = 0; i < fit; ++i)
        *resp->add_offers() = std::move(page[i]);
      if (fit < page.size() || resp->offers_size() == static_cast<int>(limit))
        resp->set_next_page_token(resp->offers(resp->offers_size() - 1).id());
      call.ok();
    };
    // Committed data only: every acknowledged change is in PostgreSQL.
    self->request(store, timeout, list_atom_v, seller, has_ns, ns, after, limit)
      .then(
        [=, &r](persistence::seller_page& home) {
          // A split left offers of the seller on shards outside its home group (ADR 0023):
          // the pages of the groups holding those shards now, read in turn, merge with the
          // home page.
          auto m = std::make_shared<spread_merge>();
          auto home_group = r.group_of(r.shard_of(seller));
          for (auto shard : home.spread) {
            auto g = r.group_of(shard);
            if (g != home_group
                && std::find(m->groups.begin(), m->groups.end(), g) == m->groups.end())
              m->groups.push_back(g);
          }
          if (m->groups.empty()) {
            answer(std::move(home.offers));
            return;
          }
          m->pages.push_back(std::move(home.offers));
          list_spread(self, r, {seller, has_ns, ns, after, limit, timeout}, m, answer,
                      call.on_error());
        },
        call.on_error());
  });
  return call.reactor();
}

} // namespace gost::runtime
