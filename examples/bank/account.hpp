#pragma once
// A bank account as a gost actor type: its state and events are protobuf (proto/), its rules
// are this one handler. gost calls it with one event at a time per account and commits the new
// state with everything the handler sent or emitted, in one transaction.

#include <stdexcept>
#include <string>

#include "bank/v1/account.pb.h"
#include "gost/entities/entity_type.hpp"

namespace bank {

class account final : public gost::entity_type<v1::Account, v1::AccountEvent> {
public:
  std::string kind() const override { return "bank.account"; }

  gost::entity_options options() const override {
    gost::entity_options o;
    o.max_attempts = 3;                               // then the event is dead-lettered
    o.retry_backoff = std::chrono::milliseconds{100}; // seed 002 uses minutes; demo: 100 ms
    return o;
  }

  void handle(v1::Account& a, const v1::AccountEvent& e, gost::entity_context& ctx) const override;
};

} // namespace bank
