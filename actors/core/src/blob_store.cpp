#include "gost/core/blob_store.hpp"

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/sha.h>

namespace gost {

namespace fs = std::filesystem;

namespace {

std::string hex_of(const unsigned char* d, size_t n) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(hex[d[i] >> 4]);
    out.push_back(hex[d[i] & 0xf]);
  }
  return out;
}

/// A temporary name unique per process and thread: two writers of the same bytes each rename
/// a whole file of their own into place.
fs::path temp_in(const std::string& dir) {
  static std::atomic<uint64_t> seq{0};
  return fs::path{dir}
         / (".tmp" + std::to_string(::getpid()) + "-"
            + std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id())) + "-"
            + std::to_string(seq++));
}

} // namespace

std::string sha256_hex(const std::string& bytes) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), d);
  return hex_of(d, sizeof d);
}

struct blob_store::writer::impl {
  std::string dir;
  fs::path tmp;
  std::ofstream out;
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> sha{EVP_MD_CTX_new(), EVP_MD_CTX_free};
  size_t bytes = 0;
  std::string error;
  bool done = false;
};

blob_store::writer::writer(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
blob_store::writer::writer(writer&&) noexcept = default;
blob_store::writer& blob_store::writer::operator=(writer&&) noexcept = default;

blob_store::writer::~writer() {
  if (impl_ && !impl_->done) {
    impl_->out.close();
    std::error_code ec;
    fs::remove(impl_->tmp, ec);
  }
}

bool blob_store::writer::write(const char* data, size_t n) {
  auto& w = *impl_;
  if (!w.error.empty())
    return false;
  w.out.write(data, static_cast<std::streamsize>(n));
  if (!w.out) {
    w.error = "cannot write " + w.tmp.string();
    return false;
  }
  EVP_DigestUpdate(w.sha.get(), data, n);
  w.bytes += n;
  return true;
}

std::string blob_store::writer::finish(const std::string& ext) {
  auto& w = *impl_;
  if (!w.error.empty())
    return {};
  if (!w.out.flush()) {
    w.error = "cannot write " + w.tmp.string();
    return {};
  }
  w.out.close();
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(w.sha.get(), d, &len);
  auto name = hex_of(d, len) + "." + ext;
  auto dir = fs::path{w.dir} / name.substr(0, 2);
  std::error_code ec;
  fs::create_directories(dir, ec);
  fs::rename(w.tmp, dir / name, ec);
  if (ec) {
    w.error = "cannot store " + (dir / name).string() + ": " + ec.message();
    return {};
  }
  w.done = true;
  return name;
}

size_t blob_store::writer::bytes() const noexcept {
  return impl_->bytes;
}

const std::string& blob_store::writer::error() const noexcept {
  return impl_->error;
}

blob_store::writer blob_store::begin() const {
  auto p = std::make_unique<writer::impl>();
  p->dir = dir_;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  p->tmp = temp_in(dir_);
  p->out.open(p->tmp, std::ios::binary | std::ios::trunc);
  if (!p->out)
    p->error = "cannot create a file in " + dir_ + " (images.blob_dir)";
  EVP_DigestInit_ex(p->sha.get(), EVP_sha256(), nullptr);
  return writer{std::move(p)};
}

std::string blob_store::put(const std::string& bytes, const std::string& ext,
                            std::string& error) const {
  auto name = sha256_hex(bytes) + "." + ext;
  auto path = fs::path{path_of(name)};
  std::error_code ec;
  if (!fs::exists(path, ec)) { // content-addressed: the same bytes are the same file
    auto w = begin();
    if (!w.write(bytes.data(), bytes.size()) || w.finish(ext).empty()) {
      error = w.error();
      return {};
    }
  }
  return base_url_ + "/" + name;
}

std::string blob_store::path_of(const std::string& name) const {
  if (name.size() < 3 || name.find('/') != std::string::npos
      || name.find("..") != std::string::npos)
    return {};
  return (fs::path{dir_} / name.substr(0, 2) / name).string();
}

bool blob_store::remove(const std::string& name) const {
  auto path = path_of(name);
  if (path.empty())
    return false;
  std::error_code ec;
  fs::remove(path, ec);
  return !ec;
}

} // namespace gost
