#pragma once
// The node's blob store: files named by the SHA-256 of their content (`<sha256>.<ext>`) under
// one directory (`images.blob_dir`), in subdirectories by the first two hex digits; written
// once, atomically (a temporary file renamed into place), so equal content is one file and a
// reader never sees half of one. Rotated images (served at `base_url`) and sellers' feed files
// (read by the feed processor) live here.

#include <cstddef>
#include <memory>
#include <string>

namespace gost {

class blob_store {
public:
  blob_store(std::string dir, std::string base_url)
    : dir_(std::move(dir)), base_url_(std::move(base_url)) {}

  /// The URL `put` answers under, once the server of the files is known (the node makes its
  /// store before its admin HTTP port is bound). Only before anything calls `put`: the other
  /// calls may run meanwhile (they never read it).
  void set_base_url(std::string base_url) { base_url_ = std::move(base_url); }

  /// Stores `bytes` as `<sha256>.<ext>`; returns its URL, or an empty string and `error`.
  std::string put(const std::string& bytes, const std::string& ext, std::string& error) const;

  /// A file written piece by piece (a download, an upload), hashed as it is written.
  class writer {
  public:
    writer(writer&&) noexcept;
    writer& operator=(writer&&) noexcept;
    ~writer(); ///< an unfinished file is removed
    /// Appends; false (and `error()`) when the disk refused.
    bool write(const char* data, size_t n);
    /// Moves the file into place as `<sha256>.<ext>`; returns that name, or "" and `error()`.
    std::string finish(const std::string& ext);
    size_t bytes() const noexcept;
    const std::string& error() const noexcept;
    struct impl;

  private:
    friend class blob_store;
    explicit writer(std::unique_ptr<impl> p);
    std::unique_ptr<impl> impl_;
  };

  /// Starts a file; check `error()` before writing (the directory may be unwritable).
  writer begin() const;

  /// The path of a stored name, or "" when `name` is not one this store makes (no `..`, no
  /// `/`: a request path can be given straight).
  std::string path_of(const std::string& name) const;

  /// Removes a stored file (cleanup); true when it is gone (or was never there).
  bool remove(const std::string& name) const;

private:
  std::string dir_;
  std::string base_url_;
};

/// The SHA-256 of `bytes`, in lowercase hex.
std::string sha256_hex(const std::string& bytes);

} // namespace gost
