#include "gost/core/allocator.hpp"

#include <dlfcn.h>

namespace gost {

std::string allocator_name() {
  // jemalloc's control interface; looked up rather than linked so that a build without
  // jemalloc needs none of its headers.
  using mallctl_fn = int (*)(const char*, void*, size_t*, void*, size_t);
  auto* mallctl = reinterpret_cast<mallctl_fn>(dlsym(RTLD_DEFAULT, "mallctl"));
  if (mallctl == nullptr)
    return "system";
  const char* version = nullptr;
  size_t len = sizeof(version);
  if (mallctl("version", &version, &len, nullptr, 0) != 0 || version == nullptr)
    return "jemalloc";
  return std::string{"jemalloc "} + version;
}

} // namespace gost
