#include "gost/core/kit/writer.hpp"

#include "gost/core/dependency.hpp"
#include "gost/core/log.hpp"

namespace gost::kit::detail {

namespace {

const auto lg = gost::log::get("kit");

} // namespace

void log_failed_batch(const char* writer, size_t size, const caf::error& err,
                      const dependency_tracker* db) {
  if (db_outage_reported(db, err))
    return;
  lg->warn("write-behind batch failed writer={} size={} error={}", writer, size,
           error_message(err));
}

} // namespace gost::kit::detail
