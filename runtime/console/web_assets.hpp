#pragma once
// The web console's static files (runtime/console/web/), compiled into the binary by
// cmake/EmbedFiles.cmake: nothing is read from disk or fetched from elsewhere at run time.

#include <cstddef>
#include <string_view>

namespace gost::runtime::web {

struct asset {
  std::string_view path; ///< as served: "/" for index.html, else "/" + the file's name
  std::string_view type; ///< Content-Type
  std::string_view body;
};

extern const asset assets[];
extern const size_t asset_count;

} // namespace gost::runtime::web
