// The node's blob store: content-addressed names, written once and whole (a streamed writer
// hashes as it writes; an unfinished one leaves nothing), removal, names that are not its own.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gost/core/blob_store.hpp"

using namespace gost;
namespace fs = std::filesystem;

namespace {

struct temp_dir {
  std::string path = "/tmp/gost-blobs-test-" + std::to_string(::getpid());
  ~temp_dir() { fs::remove_all(path); }
};

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t files_in(const std::string& dir) {
  size_t n = 0;
  for (auto& e : fs::recursive_directory_iterator(dir))
    n += e.is_regular_file();
  return n;
}

} // namespace

TEST_CASE("a streamed file is stored under the SHA-256 of its content") {
  temp_dir d;
  blob_store store{d.path, "http://node/blobs"};
  auto w = store.begin();
  REQUIRE(w.error().empty());
  REQUIRE(w.write("hello ", 6));
  REQUIRE(w.write("world", 5));
  CHECK(w.bytes() == 11);
  auto name = w.finish("xml");
  // sha256("hello world")
  CHECK(name == "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9.xml");
  CHECK(read(store.path_of(name)) == "hello world");
  CHECK(sha256_hex("hello world") + ".xml" == name);
  // The same bytes through put: the same name, one file.
  std::string error;
  CHECK(store.put("hello world", "xml", error) == "http://node/blobs/" + name);
  CHECK(error.empty());
  CHECK(files_in(d.path) == 1);
  CHECK(store.remove(name));
  CHECK_FALSE(fs::exists(store.path_of(name)));
  CHECK(files_in(d.path) == 0);
}

TEST_CASE("an unfinished writer leaves nothing; foreign names are refused") {
  temp_dir d;
  blob_store store{d.path, ""};
  {
    auto w = store.begin();
    REQUIRE(w.write("partial", 7));
  }
  CHECK(files_in(d.path) == 0);
  CHECK(store.path_of("../etc/passwd").empty());
  CHECK(store.path_of("a/b").empty());
  CHECK_FALSE(store.remove("../x"));
  blob_store nowhere{"/proc/no-such-dir/blobs", ""};
  auto w = nowhere.begin();
  CHECK_FALSE(w.error().empty());
  CHECK_FALSE(w.write("x", 1));
  CHECK(w.finish("xml").empty());
}
