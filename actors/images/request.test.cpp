#include <doctest/doctest.h>

#include <map>
#include <set>

#include "gost/images/request.hpp"

using namespace gost::images;

TEST_CASE("URLs written differently are one canonical URL") {
  auto c = [](const char* u) {
    auto r = canonical_url(u);
    REQUIRE_MESSAGE(r, r.error.message);
    return *r;
  };
  CHECK(c("HTTP://Img.Example.COM:80/a/B.jpg#frag") == "http://img.example.com/a/B.jpg");
  CHECK(c("https://img.example.com:443") == "https://img.example.com/");
  CHECK(c("https://img.example.com:8443/x.png?size=1&A=2")
        == "https://img.example.com:8443/x.png?size=1&A=2");
  CHECK(c("http://img.example.com?q=1") == "http://img.example.com/?q=1");
  CHECK(c("http://[::1]:8080/p") == "http://[::1]:8080/p");
  CHECK(c("http://127.0.0.1/p") == "http://127.0.0.1/p"); // reachability is the fetcher's
}

TEST_CASE("a URL that is not one is refused, naming what is wrong") {
  auto why = [](const char* u) {
    auto r = canonical_url(u);
    REQUIRE_FALSE(r);
    CHECK(r.error.kind == image_error::bad_argument);
    return r.error.message;
  };
  CHECK(why("") == "url is empty");
  CHECK(why("ftp://x/y.jpg").find("scheme `ftp` is not http or https") != std::string::npos);
  CHECK(why("file:///etc/passwd").find("is not http or https") != std::string::npos);
  CHECK(why("img.example.com/a.jpg").find("has no scheme") != std::string::npos);
  CHECK(why("http:///a.jpg") == "url has no host");
  CHECK(why("http://x:99999/a").find("is not a port number") != std::string::npos);
  CHECK(why("http://user:pw@x/a").find("user information") != std::string::npos);
  CHECK(why("http://x/a b.jpg").find("space or a control character") != std::string::npos);
  CHECK(why(std::string(3000, 'a').insert(0, "http://x/").c_str()).find("longer than 2048")
        != std::string::npos);
}

TEST_CASE("a task's key: the same for the same work, different otherwise") {
  auto a = make_task(function::ratio, "HTTP://X.com/a.jpg");
  auto b = make_task(function::ratio, "http://x.com:80/a.jpg#top");
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->result_key() == b->result_key());
  CHECK(a->result_key().size() == 32);
  CHECK(a->result_key().find_first_not_of("0123456789abcdef") == std::string::npos);
  // Another function on the same URL is another result.
  CHECK(make_task(function::preview, "http://x.com/a.jpg")->result_key() != a->result_key());
  // Rotate's angle is part of the task, normalized.
  auto r270 = make_task(function::rotate, "http://x.com/a.jpg", -90);
  REQUIRE(r270);
  CHECK(r270->args == "http://x.com/a.jpg\n270");
  CHECK(r270->url() == "http://x.com/a.jpg");
  CHECK(make_task(function::rotate, "http://x.com/a.jpg", 270)->result_key() == r270->result_key());
  CHECK(make_task(function::rotate, "http://x.com/a.jpg", 360)->args == "http://x.com/a.jpg\n0");
  CHECK(make_task(function::rotate, "http://x.com/a.jpg", 12.5)->args
        == "http://x.com/a.jpg\n12.5");
  CHECK(make_task(function::rotate, "http://x.com/a.jpg", 361).error.kind
        == image_error::bad_argument);
  // The angle is not an argument of the other functions.
  CHECK(make_task(function::ratio, "http://x.com/a.jpg", 90)->args == "http://x.com/a.jpg");
}

TEST_CASE("partitions spread tasks evenly and are stable") {
  std::map<uint32_t, int> per;
  int unstable = 0;
  for (int i = 0; i < 6400; ++i) {
    auto t = make_task(function::main_color, "http://img/p" + std::to_string(i) + ".jpg");
    REQUIRE(t);
    auto p = t->partition(64);
    REQUIRE(p < 64);
    unstable += t->partition(64) != p;
    ++per[p];
  }
  CHECK(unstable == 0);
  CHECK(per.size() == 64);
  for (auto& [p, n] : per) {
    CAPTURE(p);
    CHECK(n > 50); // 100 expected
    CHECK(n < 160);
  }
}

TEST_CASE("function names") {
  std::set<std::string> seen;
  for (auto f : {function::rotate, function::preview, function::ratio, function::main_color}) {
    function back{};
    REQUIRE(parse_function(to_string(f), back));
    CHECK(back == f);
    seen.insert(to_string(f));
  }
  CHECK(seen.size() == 4);
  function ignored{};
  CHECK_FALSE(parse_function("resize", ignored));
}
