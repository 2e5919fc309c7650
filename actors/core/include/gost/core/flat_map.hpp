#pragma once
// Sorted-vector map and set for the few entries an offer actor keeps per stage: 24 bytes when
// empty (a std::map is 48) and one allocation for all entries instead of one per entry.
// Iteration is in key order, like std::map. Inserting or erasing invalidates iterators.

#include <algorithm>
#include <initializer_list>
#include <utility>
#include <vector>

namespace gost {

template <class K, class V>
class flat_map {
public:
  using value_type = std::pair<K, V>;
  using iterator = typename std::vector<value_type>::iterator;
  using const_iterator = typename std::vector<value_type>::const_iterator;

  flat_map() = default;
  /// Like std::map: of two equal keys, the first is kept.
  flat_map(std::initializer_list<value_type> init) {
    for (auto& kv : init)
      if (find(kv.first) == end())
        (*this)[kv.first] = kv.second;
  }

  iterator begin() noexcept { return items_.begin(); }
  iterator end() noexcept { return items_.end(); }
  const_iterator begin() const noexcept { return items_.begin(); }
  const_iterator end() const noexcept { return items_.end(); }
  bool empty() const noexcept { return items_.empty(); }
  size_t size() const noexcept { return items_.size(); }
  void clear() noexcept {
    items_.clear();
    items_.shrink_to_fit();
  }

  iterator find(const K& key) {
    auto i = lower(key);
    return i != items_.end() && i->first == key ? i : items_.end();
  }
  const_iterator find(const K& key) const {
    auto i = const_cast<flat_map*>(this)->lower(key);
    return i != items_.end() && i->first == key ? const_iterator{i} : items_.end();
  }
  size_t count(const K& key) const { return find(key) != end() ? 1 : 0; }

  V& operator[](const K& key) {
    auto i = lower(key);
    if (i == items_.end() || i->first != key)
      i = items_.emplace(i, key, V{});
    return i->second;
  }

  size_t erase(const K& key) {
    auto i = find(key);
    if (i == items_.end())
      return 0;
    items_.erase(i);
    return 1;
  }

private:
  iterator lower(const K& key) {
    return std::lower_bound(items_.begin(), items_.end(), key,
                            [](const value_type& kv, const K& k) { return kv.first < k; });
  }

  std::vector<value_type> items_;
};

template <class K>
class flat_set {
public:
  using const_iterator = typename std::vector<K>::const_iterator;

  flat_set() = default;
  flat_set(std::initializer_list<K> init) {
    for (auto& k : init)
      insert(k);
  }

  const_iterator begin() const noexcept { return items_.begin(); }
  const_iterator end() const noexcept { return items_.end(); }
  bool empty() const noexcept { return items_.empty(); }
  size_t size() const noexcept { return items_.size(); }
  void clear() noexcept {
    items_.clear();
    items_.shrink_to_fit();
  }

  size_t count(const K& key) const {
    auto i = std::lower_bound(items_.begin(), items_.end(), key);
    return i != items_.end() && *i == key ? 1 : 0;
  }

  bool insert(const K& key) {
    auto i = std::lower_bound(items_.begin(), items_.end(), key);
    if (i != items_.end() && *i == key)
      return false;
    items_.insert(i, key);
    return true;
  }

  size_t erase(const K& key) {
    auto i = std::lower_bound(items_.begin(), items_.end(), key);
    if (i == items_.end() || *i != key)
      return 0;
    items_.erase(i);
    return 1;
  }

private:
  std::vector<K> items_;
};

} // namespace gost
