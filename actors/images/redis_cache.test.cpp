// How a result is held in Redis: every field back as written, anything else refused (a key
// another program wrote under the prefix is a miss, not a wrong answer).
#include <doctest/doctest.h>

#include "gost/images/redis_cache.hpp"

using namespace gost;
using namespace gost::images;

TEST_CASE("a cached result decodes to what was encoded, binary value included") {
  persistence::image_result r;
  r.key = "k";
  r.function = "rotate";
  r.args = "http://a.example/x.jpg\n90";
  r.status = "done";
  r.value = std::string("\0\x01:12:\xff", 7);
  r.attempts = 3;
  r.expires_at_us = 1'790'000'000'123'456;
  persistence::image_result back;
  REQUIRE(decode_cached(encode_cached(r), back));
  CHECK(back.function == r.function);
  CHECK(back.args == r.args);
  CHECK(back.status == "done");
  CHECK(back.value == r.value);
  CHECK(back.attempts == 3);
  CHECK(back.expires_at_us == r.expires_at_us);
  CHECK(back.error.empty());

  r.status = "error";
  r.value.clear();
  r.error_kind = "http_404";
  r.error = "the image server answered HTTP 404";
  REQUIRE(decode_cached(encode_cached(r), back));
  CHECK(back.status == "error");
  CHECK(back.error_kind == "http_404");
  CHECK(back.error == r.error);
  CHECK(back.value.empty());
}

TEST_CASE("bytes that are not a cached result do not decode") {
  persistence::image_result r;
  r.status = "done";
  r.expires_at_us = 5;
  auto good = encode_cached(r);
  persistence::image_result out;
  CHECK_FALSE(decode_cached("", out));
  CHECK_FALSE(decode_cached("hello", out));
  CHECK_FALSE(decode_cached(good.substr(0, good.size() - 1), out)); // truncated
  CHECK_FALSE(decode_cached(good + "x", out));                      // trailing bytes
  auto bad_status = good;
  bad_status.replace(bad_status.find("4:done"), 6, "4:nope");
  CHECK_FALSE(decode_cached(bad_status, out));
  auto huge = std::string{"gi1"} + "99999999:x";
  CHECK_FALSE(decode_cached(huge, out));
}
