#include "storage/ssd/compact_index.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "base/assert.h"

namespace strata::storage {

static_assert(std::endian::native == std::endian::little, "entries are little endian");
static_assert(CompactIndex::kFieldBits + CompactIndex::kPayloadBits == 8 * 7);

template <typename T>
typename PartitionedIndex<T>::Value PartitionedIndex<T>::Load(const Partition& p, uint32_t i) {
  Value v = 0;
  std::memcpy(&v, p.data.get() + uint64_t{i} * kEntryBytes, kEntryBytes);
  return v;
}

template <typename T>
void PartitionedIndex<T>::Store(Partition& p, uint32_t i, Value v) {
  std::memcpy(p.data.get() + uint64_t{i} * kEntryBytes, &v, kEntryBytes);
}

template <typename T>
typename PartitionedIndex<T>::Value PartitionedIndex<T>::EntryOf(uint64_t mixed, uint32_t depth,
                                                                 uint32_t known, uint64_t payload) {
  const uint64_t field = ((mixed << depth) >> (64 - known)) << (kFieldBits - known);
  return Value{field} << kPayloadBits | payload;
}

// Fields are bits of MixKey, so a partition's entries are spread evenly
// over the field's range: the search starts where v's field would sit
// (size x field / 2^kFieldBits), gallops outwards to a bracket, then halves
// it. The entries probed lie within a few lines of the guess (about
// sqrt(size) apart) instead of the log2(size) lines a plain halving takes,
// each a cache miss on a large index.
template <typename T>
uint32_t PartitionedIndex<T>::LowerBound(const Partition& p, Value v) {
  const uint32_t n = p.size;
  if (n == 0) return 0;
  const auto field = static_cast<uint64_t>(v >> kPayloadBits);
  const auto guess =
      static_cast<uint32_t>((static_cast<unsigned __int128>(field) * n) >> kFieldBits);
  // Invariant: every entry below lo is < v; entry hi (when below n) is >= v.
  uint32_t lo = 0;
  uint32_t hi = n;
  uint32_t step = 1;
  if (Load(p, guess) < v) {
    lo = guess + 1;
    while (true) {
      const uint64_t probe = uint64_t{lo} + step - 1;
      if (probe >= n) break;
      if (Load(p, static_cast<uint32_t>(probe)) < v) {
        lo = static_cast<uint32_t>(probe) + 1;
        step *= 2;
      } else {
        hi = static_cast<uint32_t>(probe);
        break;
      }
    }
  } else {
    hi = guess;
    while (hi >= step) {
      const uint32_t probe = hi - step;
      if (Load(p, probe) < v) {
        lo = probe + 1;
        break;
      }
      hi = probe;
      step *= 2;
    }
  }
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (Load(p, mid) < v) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

template <typename T>
void PartitionedIndex<T>::Grow(Partition& p, uint32_t need) {
  if (need <= p.capacity) return;
  const uint32_t cap = std::max(need, p.capacity + std::max<uint32_t>(4, p.capacity / 8));
  auto data = std::make_unique<uint8_t[]>(uint64_t{cap} * kEntryBytes);
  if (p.size > 0) std::memcpy(data.get(), p.data.get(), uint64_t{p.size} * kEntryBytes);
  p.data = std::move(data);
  p.capacity = cap;
}

template <typename T>
void PartitionedIndex<T>::Clear() {
  depth_ = kDepthMin;
  size_ = 0;
  parts_.clear();
  parts_.shrink_to_fit();
  parts_.resize(size_t{1} << depth_);
  dir_.resize(size_t{1} << depth_);
  dir_.shrink_to_fit();
  for (uint32_t i = 0; i < dir_.size(); ++i) {
    dir_[i] = i;
    parts_[i].depth = static_cast<uint8_t>(depth_);
    parts_[i].known = static_cast<uint8_t>(FullKnown(depth_));
  }
}

template <typename T>
void PartitionedIndex<T>::Build(std::vector<BuildEntry> entries) {
  uint32_t depth = kDepthMin;
  while (depth < kDepthMax && (entries.size() >> depth) > kPartitionEntriesBuilt) ++depth;
  std::sort(entries.begin(), entries.end(),
            [](const BuildEntry& a, const BuildEntry& b) { return a.mixed < b.mixed; });
  depth_ = depth;
  size_ = entries.size();
  parts_.clear();
  parts_.shrink_to_fit();
  parts_.resize(size_t{1} << depth_);
  dir_.assign(size_t{1} << depth_, 0);
  dir_.shrink_to_fit();
  const uint32_t known = FullKnown(depth_);
  std::vector<Value> values;
  size_t pos = 0;
  for (uint32_t i = 0; i < dir_.size(); ++i) {
    dir_[i] = i;
    Partition& p = parts_[i];
    p.depth = static_cast<uint8_t>(depth_);
    p.known = static_cast<uint8_t>(known);
    values.clear();
    while (pos < entries.size() && (entries[pos].mixed >> (64 - depth_)) == i) {
      STRATA_ASSERT(entries[pos].payload <= kPayloadMax, "payload above kPayloadMax");
      values.push_back(EntryOf(entries[pos].mixed, depth_, known, entries[pos].payload));
      ++pos;
    }
    std::sort(values.begin(), values.end());  // equal fields: by payload
    Grow(p, static_cast<uint32_t>(values.size()));
    for (uint32_t j = 0; j < values.size(); ++j) Store(p, j, values[j]);
    p.size = static_cast<uint32_t>(values.size());
  }
}

template <typename T>
size_t PartitionedIndex<T>::Candidates(uint64_t mixed, std::span<uint64_t> out) const {
  const Partition& p = parts_[PartOf(mixed)];
  const Value first = EntryOf(mixed, p.depth, p.known, 0);
  size_t n = 0;
  for (uint32_t i = LowerBound(p, first); i < p.size; ++i) {
    const Value v = Load(p, i);
    if ((v >> kPayloadBits) != (first >> kPayloadBits)) break;
    if (n < out.size()) out[n] = static_cast<uint64_t>(v & kPayloadMax);
    ++n;
  }
  return n;
}

template <typename T>
bool PartitionedIndex<T>::Contains(uint64_t mixed, uint64_t payload) const {
  const Partition& p = parts_[PartOf(mixed)];
  const Value v = EntryOf(mixed, p.depth, p.known, payload);
  const uint32_t i = LowerBound(p, v);
  return i < p.size && Load(p, i) == v;
}

template <typename T>
void PartitionedIndex<T>::Insert(uint64_t mixed, uint64_t payload) {
  STRATA_ASSERT(payload <= kPayloadMax, "payload above kPayloadMax");
  const uint32_t index = PartOf(mixed);
  Partition& p = parts_[index];
  const Value v = EntryOf(mixed, p.depth, p.known, payload);
  const uint32_t i = LowerBound(p, v);
  Grow(p, p.size + 1);
  uint8_t* at = p.data.get() + uint64_t{i} * kEntryBytes;
  std::memmove(at + kEntryBytes, at, uint64_t{p.size - i} * kEntryBytes);
  Store(p, i, v);
  ++p.size;
  ++size_;
  if (p.size > kPartitionEntriesMax && p.known > kKnownBitsMin && p.depth < kDepthMax) {
    Split(index);
  }
}

template <typename T>
bool PartitionedIndex<T>::Replace(uint64_t mixed, uint64_t old_payload, uint64_t new_payload) {
  STRATA_ASSERT(new_payload <= kPayloadMax, "payload above kPayloadMax");
  Partition& p = parts_[PartOf(mixed)];
  const Value old_v = EntryOf(mixed, p.depth, p.known, old_payload);
  const Value new_v = EntryOf(mixed, p.depth, p.known, new_payload);
  const uint32_t i = LowerBound(p, old_v);
  if (i == p.size || Load(p, i) != old_v) return false;
  if ((i == 0 || Load(p, i - 1) < new_v) && (i + 1 == p.size || Load(p, i + 1) > new_v)) {
    Store(p, i, new_v);  // the common case: one entry of this field
    return true;
  }
  uint8_t* base = p.data.get();
  std::memmove(base + uint64_t{i} * kEntryBytes, base + uint64_t{i + 1} * kEntryBytes,
               uint64_t{p.size - i - 1} * kEntryBytes);
  --p.size;
  const uint32_t j = LowerBound(p, new_v);
  std::memmove(base + uint64_t{j + 1} * kEntryBytes, base + uint64_t{j} * kEntryBytes,
               uint64_t{p.size - j} * kEntryBytes);
  Store(p, j, new_v);
  ++p.size;
  return true;
}

template <typename T>
bool PartitionedIndex<T>::Erase(uint64_t mixed, uint64_t payload) {
  Partition& p = parts_[PartOf(mixed)];
  const Value v = EntryOf(mixed, p.depth, p.known, payload);
  const uint32_t i = LowerBound(p, v);
  if (i == p.size || Load(p, i) != v) return false;
  uint8_t* at = p.data.get() + uint64_t{i} * kEntryBytes;
  std::memmove(at, at + kEntryBytes, uint64_t{p.size - i - 1} * kEntryBytes);
  --p.size;
  --size_;
  ShrinkIfSparse(p);
  return true;
}

template <typename T>
void PartitionedIndex<T>::ShrinkIfSparse(Partition& p) {
  // Down to a quarter of its capacity (key ranges erase most of the log's
  // entries at each merge): keeps room for 1/8 more; amortised, as growth is.
  constexpr uint32_t kShrinkFloor = 64;
  if (p.capacity > kShrinkFloor && p.size < p.capacity / 4) {
    const uint32_t cap = std::max(kShrinkFloor, p.size + p.size / 8);
    auto data = std::make_unique<uint8_t[]>(uint64_t{cap} * kEntryBytes);
    if (p.size > 0) std::memcpy(data.get(), p.data.get(), uint64_t{p.size} * kEntryBytes);
    p.data = std::move(data);
    p.capacity = cap;
  }
}

template <typename T>
void PartitionedIndex<T>::Split(uint32_t index) {
  if (parts_[index].depth == depth_) {  // double the directory
    std::vector<uint32_t> dir(dir_.size() * 2);
    for (size_t i = 0; i < dir.size(); ++i) dir[i] = dir_[i >> 1];
    dir_ = std::move(dir);
    ++depth_;
  }
  parts_.emplace_back();
  const uint32_t high_index = static_cast<uint32_t>(parts_.size() - 1);
  Partition& low = parts_[index];
  Partition& high = parts_[high_index];
  const uint32_t d = low.depth;
  // Entries whose field's top bit is 1 move to `high`; every field loses
  // that bit (shifted out), which keeps each half sorted.
  const uint32_t cut = LowerBound(low, Value{1} << (kFieldBits - 1 + kPayloadBits));
  const uint32_t moved = low.size - cut;
  Grow(high, moved + moved / 8);
  constexpr Value kFieldMask = (Value{1} << kFieldBits) - 1;
  auto shifted = [](Value v) {
    return (((v >> kPayloadBits) << 1) & kFieldMask) << kPayloadBits | (v & kPayloadMax);
  };
  for (uint32_t i = 0; i < moved; ++i) Store(high, i, shifted(Load(low, cut + i)));
  high.size = moved;
  for (uint32_t i = 0; i < cut; ++i) Store(low, i, shifted(Load(low, i)));
  low.size = cut;
  low.depth = high.depth = static_cast<uint8_t>(d + 1);
  low.known = high.known = static_cast<uint8_t>(low.known - 1);
  // Directory slots of the old partition whose bit d (from the top of the
  // mixed key) is 1 now name `high`.
  const uint32_t bit = depth_ - d - 1;
  for (size_t i = 0; i < dir_.size(); ++i) {
    if (dir_[i] == index && ((i >> bit) & 1) != 0) dir_[i] = high_index;
  }
}

template <typename T>
uint64_t PartitionedIndex<T>::MemoryBytes() const {
  uint64_t bytes = dir_.capacity() * sizeof(uint32_t) + parts_.capacity() * sizeof(Partition);
  for (const Partition& p : parts_) bytes += uint64_t{p.capacity} * kEntryBytes;
  return bytes;
}

template class PartitionedIndex<CompactIndexTraits>;
template class PartitionedIndex<ExactIndexTraits>;

}  // namespace strata::storage
