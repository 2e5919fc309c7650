#include <doctest/doctest.h>

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "gost/core/allocator.hpp"

TEST_CASE("the allocator the build links is the one serving malloc") {
  auto name = gost::allocator_name();
  MESSAGE("allocator: " << name);
#if GOST_JEMALLOC
  // Linked (GOST_JEMALLOC=ON): jemalloc must have taken malloc over, not merely be loaded.
  REQUIRE(name.rfind("jemalloc ", 0) == 0);
  // This thread's allocated bytes, as jemalloc counts them, grow by a plain malloc's size.
  using mallctl_fn = int (*)(const char*, void*, size_t*, void*, size_t);
  auto* mallctl = reinterpret_cast<mallctl_fn>(dlsym(RTLD_DEFAULT, "mallctl"));
  bool has_mallctl = mallctl != nullptr;
  REQUIRE(has_mallctl);
  auto allocated = [&] {
    uint64_t v = 0;
    size_t len = sizeof(v);
    REQUIRE(mallctl("thread.allocated", &v, &len, nullptr, 0) == 0);
    return v;
  };
  auto before = allocated();
  void* volatile p = std::malloc(1 << 20);
  auto after = allocated();
  std::free(p);
  CHECK(after - before >= (1u << 20));
#else
  CHECK(name == "system");
#endif
}
