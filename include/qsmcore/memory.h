// The accounting layer: every byte the engine allocates goes through accounted_alloc /
// accounted_free, tagged with a category, so that memory figures are measured, not guessed.
// Counters are process-wide and atomic; peaks can be reset per phase (load, plan, run).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace qsmcore {

enum class MemCategory : int {
  Weights = 0,  // initializers, packed weights, folded constants
  Plan,         // plan tables, primitive descriptors kept by kernels
  Arena,        // the activation arena of a plan
  Scratch,      // kernel scratchpads (oneDNN user-managed scratchpad)
  IO,           // input/output tensors handed across the API
  Other,        // parser tables, wrapper buffers
  Count
};
constexpr int kMemCategoryCount = static_cast<int>(MemCategory::Count);
const char* to_string(MemCategory c);

struct MemoryCounters {
  std::array<std::int64_t, kMemCategoryCount> current{};
  std::array<std::int64_t, kMemCategoryCount> peak{};
  std::int64_t total_current = 0;
  std::int64_t total_peak = 0;
};

/// Snapshot of all counters.
MemoryCounters memory_counters();
/// Bytes currently allocated (all categories).
std::int64_t memory_current();
/// High-water of the total since the last reset_memory_peak().
std::int64_t memory_peak();
/// Sets every peak (total and per category) to the current value.
void reset_memory_peak();

/// Optional hard cap (bytes, 0 = none) on the total: an allocation that would exceed it throws
/// Error{OutOfBudget} instead of allocating. Planning refuses earlier; this is the safety net.
void set_memory_cap(std::int64_t bytes);
std::int64_t memory_cap();

/// Fault injection for tests: the n-th accounted allocation from now (1-based) throws
/// Error{OutOfBudget}. 0 disables.
void fail_allocation_after(std::int64_t n);

/// Aligned (64 B), accounted allocation. Throws Error{OutOfBudget} on cap or failure.
void* accounted_alloc(std::size_t bytes, MemCategory cat);
void accounted_free(void* p, std::size_t bytes, MemCategory cat) noexcept;

/// wasm32: bytes of freed large blocks kept aside for the next request of their size (counted as
/// freed here, but still handed out as far as malloc knows: mallinfo counts them). 0 natively.
std::int64_t kept_heap_bytes();

/// Whether this build guards parked blocks (CMake option QSM_PARK_GUARD; Buffer::data()).
#if defined(QSM_PARK_GUARD)
inline constexpr bool kParkGuardBuild = true;
#else
inline constexpr bool kParkGuardBuild = false;
#endif

/// An owned, aligned, accounted block of bytes.
class Buffer {
 public:
  Buffer() = default;
  Buffer(std::size_t bytes, MemCategory cat);
  ~Buffer();
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // Under QSM_PARK_GUARD (Debug and sanitizer builds, CMakeLists.txt) the accessor refuses a
  // parked block with Error{Internal}: its bytes are in the spill file until it is read back, and
  // reading its pages would see zeros. Compiled out elsewhere: Volume's and AccountedArray's
  // element accessors call data() per element, and a throwing branch there stops loops vectorising.
  std::byte* data() const {
    if constexpr (kParkGuardBuild)
      if (parked_ != 0) touched_while_parked();
    return data_;
  }
  std::size_t size() const { return size_; }
  MemCategory category() const { return cat_; }
  void reset();

  // Parking (issue #16): a large block's pages go back to the OS while its bytes wait in a file
  // (spill/parking.h), and the block keeps its address, so whoever holds a pointer into it
  // finds the same bytes once they are read back. Const: the bytes are the same before and after.
  /// Whether it can: only a block mapped on its own (native builds, at least 128 KiB), whose
  /// pages are its alone. wasm32's heap never shrinks, so nothing parks there.
  bool parkable() const;
  /// Whether a block of `bytes` would be.
  static bool parks(std::size_t bytes);
  /// The bytes its I/O covers while parked: its size rounded up to whole pages, all mapped.
  std::size_t page_span() const;
  /// Gives its pages back to the OS (their bytes are lost: write them out first) and stops
  /// counting its bytes.
  void park_pages() const;
  /// Counts its bytes again (Error{OutOfBudget} over the memory cap); its pages come back as
  /// zeros when touched: read the bytes back.
  void unpark_pages() const;
  /// Counts a parked block's bytes again for the free that follows, its bytes not wanted back:
  /// past the cap and the peak, which it never reaches (its pages stay with the OS).
  void forget_parked() const noexcept;
  /// Whether its pages are parked (between park_pages and unpark_pages or forget_parked).
  bool parked() const { return parked_ != 0; }
  /// Whether a park makes the parked pages inaccessible (PROT_NONE), so that a wrapper touching
  /// them before they are back faults instead of reading zeros: always under QSM_PARK_GUARD, else
  /// when the environment has QSM_PARK_GUARD=1 (the test suite sets it; read at each park).
  static bool park_guard();

 private:
  [[noreturn]] void touched_while_parked() const;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  MemCategory cat_ = MemCategory::Other;
  // 0: not parked; 1: parked; 2: parked, its pages PROT_NONE (park_guard). Mutable: parking is
  // const (the bytes are the same before and after).
  mutable std::uint8_t parked_ = 0;
};

/// Process view for cross-checks: VmRSS / VmHWM (bytes) from /proc/self/status; -1 if unknown.
std::int64_t process_rss_bytes();
std::int64_t process_hwm_bytes();
/// Resets VmHWM (writes 5 to /proc/self/clear_refs); false if not permitted.
bool reset_process_hwm();

/// What the process holds resident beyond the engine's accounted bytes and `share` (the part of
/// a budget left to what lies outside the engine: binary, libraries, thread stacks, generated
/// kernels), with room for what a run still adds there (12 MiB: the allocator's slack, I/O
/// threads); 0 when it holds no more, where the resident set is unknown, or under
/// AddressSanitizer (whose shadow memory is resident too, and not the process's own).
std::int64_t resident_outside_beyond(std::int64_t share);

}  // namespace qsmcore
