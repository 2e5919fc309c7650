#include "gost/core/kit/writer.hpp"

#include <spdlog/spdlog.h>

namespace gost::kit::detail {

void log_failed_batch(const char* writer, size_t size, const caf::error& err) {
  spdlog::warn("write-behind batch failed writer={} size={} error={}", writer, size,
               error_message(err));
}

} // namespace gost::kit::detail
