#pragma once
// Fakes of the durable entities' collaborators (actors/entities/) on the test scheduler of
// caf_fixture.hpp; a test using them registers the entities' block
// (`caf_fixture(&register_entity_types)`).

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gost/entities/protocol.hpp"
#include "gost/testing/caf_fixture.hpp"

namespace gost::testing {

/// The durable entities' store (entity_store_actor) on the test scheduler: loads answer the
/// row the test put for the key (a row with found = false otherwise), or a programmed error;
/// the queue is a fake_queue.
class fake_entity_store {
public:
  explicit fake_entity_store(caf_fixture& fx) : book_(std::make_shared<book>()) {
    handle_ = fx.spawn(
      [](std::shared_ptr<book> b) -> entity_store_actor::behavior_type {
        return {
          [b](load_atom, const std::string& key) -> caf::result<persistence::entity_row> {
            b->loads.push_back(key);
            if (!b->load_failures.empty()) {
              auto err = std::move(b->load_failures.front());
              b->load_failures.pop_front();
              return err;
            }
            auto i = b->rows.find(key);
            return i == b->rows.end() ? persistence::entity_row{} : i->second;
          },
          [b](due_atom, uint32_t, int64_t until_us, uint32_t limit,
              const persistence::queue_entries& after) -> caf::result<persistence::queue_entries> {
            auto r = b->queue.due(until_us, limit, after);
            if (!r)
              return std::move(r.error());
            return std::move(*r);
          },
          [b](ask_atom, const std::string& key,
              const std::string& request_id) -> persistence::entity_answer {
            auto i = b->answers.find({key, request_id});
            if (i == b->answers.end() || i->second.second-- > 0)
              return persistence::entity_answer{};
            return i->second.first;
          },
        };
      },
      book_);
  }

  const entity_store_actor& handle() const { return handle_; }

  /// The answer kept for the ask `a.request_id` of `key` (what the writer stored), found from
  /// the lookup after the next `hidden` ones on (an answer another owner is committing).
  void keep_answer(const std::string& key, persistence::entity_answer a, int hidden = 0) {
    auto id = a.request_id;
    book_->answers[{key, id}] = {std::move(a), hidden};
  }
  operator entity_store_actor() const { return handle_; }

  /// What loads of `key` (`kind/id`) answer from now on.
  void put(const std::string& key, persistence::entity_row row) {
    book_->rows[key] = std::move(row);
  }
  /// The next load fails with `err` (errors queue up in order).
  void fail_next_load(caf::error err) { book_->load_failures.push_back(std::move(err)); }
  /// The keys loaded so far, in order.
  const std::vector<std::string>& loads() const { return book_->loads; }
  fake_queue& queue() { return book_->queue; }

private:
  struct book {
    std::map<std::string, persistence::entity_row> rows;
    std::map<std::pair<std::string, std::string>, std::pair<persistence::entity_answer, int>>
      answers;
    std::deque<caf::error> load_failures;
    std::vector<std::string> loads;
    fake_queue queue;
  };
  std::shared_ptr<book> book_;
  entity_store_actor handle_;
};

} // namespace gost::testing
