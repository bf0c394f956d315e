// Process-wide accounting of engine allocations. Counters are relaxed atomics: the figures are
// exact totals; the peak is maintained with a CAS loop so concurrent allocations never lose a
// high-water mark.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>
#ifdef __EMSCRIPTEN__
#include <emscripten/heap.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qsmcore/error.h"
#include "qsmcore/memory.h"

namespace qsmcore {
namespace {

constexpr std::size_t kAlign = 64;

// Blocks of at least this size are mapped from the OS directly and unmapped when freed, so the
// process gives their pages back at once. glibc's malloc would map them too, but it raises its
// own mmap threshold each time a mapped block is freed (up to 32 MiB); after that, freed tensors
// stay in its heap and are reused only by luck. Streaming weights through the allocator then grew
// the peak RSS of the full QSMnet twin (96³, stream:host=64MiB) to 1188 MiB while 295 MiB were
// accounted. A fixed threshold is what "the OS sees what we account" needs. (wasm32 has no real
// munmap; there the heap is the accounting, see the wasm build.)
bool mapped_block(std::size_t rounded) {
#if defined(__EMSCRIPTEN__)
  (void)rounded;
  return false;
#else
  constexpr std::size_t kMapThreshold = std::size_t{128} << 10;
  return rounded >= kMapThreshold;
#endif
}

std::size_t rounded_size(std::size_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

#if defined(__EMSCRIPTEN__)
// wasm32's heap never shrinks, and dlmalloc carves small requests out of the best-fitting free
// chunk, which after a run is the freed arena. One small allocation between two runs (the next
// input, a string) then leaves the hole a few bytes short, and the next run's arena goes on top:
// the full xQSM twin's heap went from 148 to 250 MiB over three runs at 64³, and one browser
// bench saw 138 MiB where another saw 242. So freed large blocks are kept aside, out of
// dlmalloc's reach, for the next request of exactly their size (the next run of the same plan).
// Kept blocks are counted as freed, as any freed heap memory in wasm32 is: the heap's high-water
// is unchanged by keeping them. A request they cannot serve frees them all first, so dlmalloc
// can join them into the space it needs. From 256 KiB: a plan build frees each layer's plain
// weights as it packs them into a block of their size, and IR2QSM's 0.9 MB layers, below the
// 1 MiB this started at, left dlmalloc holes an aligned request of the same size does not fit
// (1.6 MB of its tiled run's heap growth at 64³, 89.9 to 88.3 MB; issue #54).
constexpr std::size_t kKeepBytes = std::size_t{256} << 10;
constexpr std::size_t kKeptBlocks = 16;

struct KeptBlocks {
  std::mutex mu;
  std::vector<std::pair<void*, std::size_t>> blocks;  // oldest first
};

KeptBlocks& kept() {
  static auto* k = new KeptBlocks;  // never destroyed: buffers may be freed during static destruction
  return *k;
}

/// A kept block of exactly `rounded` bytes, or null after freeing every kept block.
void* take_kept(std::size_t rounded) {
  KeptBlocks& k = kept();
  const std::lock_guard<std::mutex> lock(k.mu);
  const auto it = std::find_if(k.blocks.begin(), k.blocks.end(), [&](const auto& b) { return b.second == rounded; });
  if (it != k.blocks.end()) {
    void* p = it->first;
    k.blocks.erase(it);
    return p;
  }
  for (const auto& b : k.blocks) std::free(b.first);
  k.blocks.clear();
  return nullptr;
}

void keep(void* p, std::size_t rounded) {
  KeptBlocks& k = kept();
  const std::lock_guard<std::mutex> lock(k.mu);
  if (k.blocks.size() == kKeptBlocks) {
    std::free(k.blocks.front().first);
    k.blocks.erase(k.blocks.begin());
  }
  k.blocks.emplace_back(p, rounded);
}

std::int64_t kept_bytes() {
  KeptBlocks& k = kept();
  const std::lock_guard<std::mutex> lock(k.mu);
  std::int64_t n = 0;
  for (const auto& b : k.blocks) n += static_cast<std::int64_t>(b.second);
  return n;
}
#endif

// Arenas and whole volumes are touched end to end by every run, and each run maps them anew:
// in 4 KiB pages that is one fault per page (NeXtQSM's unbudgeted run at 181×217×181 spent 15 s
// of its 85 s in the kernel, most of it faulting its arena in). Transparent huge pages fault
// 2 MiB at a time where the system allows them (`enabled` = always or madvise). RSS stays within
// what is mapped, which is what is accounted. QSM_HUGE_PAGES=0 turns this off.
void advise_huge_pages([[maybe_unused]] void* p, [[maybe_unused]] std::size_t rounded) {
#if defined(MADV_HUGEPAGE)
  constexpr std::size_t kHugeFrom = std::size_t{8} << 20;
  static const bool on = [] {
    const char* e = std::getenv("QSM_HUGE_PAGES");
    return e == nullptr || std::string_view(e) != "0";
  }();
  if (on && rounded >= kHugeFrom) ::madvise(p, rounded, MADV_HUGEPAGE);
#endif
}

void* system_alloc(std::size_t rounded) {
  if (rounded == 0) return nullptr;
#if defined(__EMSCRIPTEN__)
  if (rounded >= kKeepBytes)
    if (void* p = take_kept(rounded)) return p;
#endif
  if (mapped_block(rounded)) {
    void* p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    advise_huge_pages(p, rounded);
    return p;
  }
  return std::aligned_alloc(kAlign, rounded);
}

void system_free(void* p, std::size_t rounded) noexcept {
  if (p == nullptr) return;
#if defined(__EMSCRIPTEN__)
  if (rounded >= kKeepBytes) {
    try {
      keep(p, rounded);
      return;
    } catch (...) {  // no room to note it: free it instead
    }
  }
#endif
  if (mapped_block(rounded)) {
    ::munmap(p, rounded);
  } else {
    std::free(p);
  }
}

struct Counters {
  std::atomic<std::int64_t> current[kMemCategoryCount]{};
  std::atomic<std::int64_t> peak[kMemCategoryCount]{};
  std::atomic<std::int64_t> total{0};
  std::atomic<std::int64_t> total_peak{0};
  std::atomic<std::int64_t> cap{0};
  std::atomic<std::int64_t> fail_countdown{0};
};

Counters& counters() {
  static Counters c;
  return c;
}

void raise_peak(std::atomic<std::int64_t>& peak, std::int64_t value) {
  std::int64_t old = peak.load(std::memory_order_relaxed);
  while (value > old && !peak.compare_exchange_weak(old, value, std::memory_order_relaxed)) {
  }
}

#ifndef __EMSCRIPTEN__
std::int64_t read_status_kb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string k(key);
  while (std::getline(f, line)) {
    if (line.compare(0, k.size(), k) == 0) return std::atoll(line.c_str() + k.size()) * 1024;
  }
  return -1;
}
#endif

}  // namespace

const char* to_string(MemCategory c) {
  switch (c) {
    case MemCategory::Weights:
      return "weights";
    case MemCategory::Plan:
      return "plan";
    case MemCategory::Arena:
      return "arena";
    case MemCategory::Scratch:
      return "scratch";
    case MemCategory::IO:
      return "io";
    case MemCategory::Other:
      return "other";
    case MemCategory::Count:
      break;
  }
  return "?";
}

MemoryCounters memory_counters() {
  auto& c = counters();
  MemoryCounters m;
  for (int i = 0; i < kMemCategoryCount; ++i) {
    m.current[i] = c.current[i].load(std::memory_order_relaxed);
    m.peak[i] = c.peak[i].load(std::memory_order_relaxed);
  }
  m.total_current = c.total.load(std::memory_order_relaxed);
  m.total_peak = c.total_peak.load(std::memory_order_relaxed);
  return m;
}

std::int64_t memory_current() {
  return counters().total.load(std::memory_order_relaxed);
}
std::int64_t memory_peak() {
  return counters().total_peak.load(std::memory_order_relaxed);
}

void reset_memory_peak() {
  auto& c = counters();
  for (int i = 0; i < kMemCategoryCount; ++i) c.peak[i].store(c.current[i].load());
  c.total_peak.store(c.total.load());
}

void set_memory_cap(std::int64_t bytes) {
  counters().cap.store(bytes);
}
std::int64_t memory_cap() {
  return counters().cap.load();
}
void fail_allocation_after(std::int64_t n) {
  counters().fail_countdown.store(n);
}

namespace {

// Adds n bytes to the total, unless that passes the cap: then throws OutOfBudget saying what
// was `doing`. Returns the new total, for count_in.
std::int64_t add_to_total(std::int64_t n, MemCategory cat, const char* doing) {
  auto& c = counters();
  const std::int64_t cap = c.cap.load(std::memory_order_relaxed);
  const std::int64_t now = c.total.fetch_add(n, std::memory_order_relaxed) + n;
  if (cap > 0 && now > cap) {
    c.total.fetch_sub(n, std::memory_order_relaxed);
    throw Error(ErrorKind::OutOfBudget, std::string(doing) + " " + std::to_string(n) + " bytes of " + to_string(cat) +
                                            " would exceed the memory cap of " + std::to_string(cap) +
                                            " bytes (in use: " + std::to_string(now - n) + ")");
  }
  return now;
}

// Counts n bytes added to the total in their category, and raises the peaks.
void count_in(std::int64_t n, MemCategory cat, std::int64_t total) {
  auto& c = counters();
  const int i = static_cast<int>(cat);
  raise_peak(c.peak[i], c.current[i].fetch_add(n, std::memory_order_relaxed) + n);
  raise_peak(c.total_peak, total);
}

void count_out(std::int64_t n, MemCategory cat) {
  auto& c = counters();
  c.current[static_cast<int>(cat)].fetch_sub(n, std::memory_order_relaxed);
  c.total.fetch_sub(n, std::memory_order_relaxed);
}

}  // namespace

void* accounted_alloc(std::size_t bytes, MemCategory cat) {
  auto& c = counters();
  if (c.fail_countdown.load(std::memory_order_relaxed) > 0 && c.fail_countdown.fetch_sub(1) == 1) {
    throw Error(ErrorKind::OutOfBudget,
                "injected allocation failure (" + std::to_string(bytes) + " bytes, " + to_string(cat) + ")");
  }
  const auto n = static_cast<std::int64_t>(bytes);
  const std::int64_t now = add_to_total(n, cat, "allocating");
  const std::size_t rounded = rounded_size(bytes);
  void* p = system_alloc(rounded);
  if (rounded != 0 && p == nullptr) {
    c.total.fetch_sub(n, std::memory_order_relaxed);
    throw Error(ErrorKind::OutOfBudget, "the system refused " + std::to_string(bytes) + " bytes of " + to_string(cat));
  }
  count_in(n, cat, now);
  return p;
}

void accounted_free(void* p, std::size_t bytes, MemCategory cat) noexcept {
  if (p == nullptr && bytes == 0) return;
  system_free(p, rounded_size(bytes));
  count_out(static_cast<std::int64_t>(bytes), cat);
}

std::int64_t kept_heap_bytes() {
#if defined(__EMSCRIPTEN__)
  return kept_bytes();
#else
  return 0;
#endif
}

Buffer::Buffer(std::size_t bytes, MemCategory cat)
    : data_(static_cast<std::byte*>(accounted_alloc(bytes, cat))), size_(bytes), cat_(cat) {}

Buffer::~Buffer() {
  reset();
}

Buffer::Buffer(Buffer&& o) noexcept : data_(o.data_), size_(o.size_), cat_(o.cat_), parked_(o.parked_) {
  o.data_ = nullptr;
  o.size_ = 0;
  o.parked_ = 0;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    data_ = o.data_;
    size_ = o.size_;
    cat_ = o.cat_;
    parked_ = o.parked_;
    o.data_ = nullptr;
    o.size_ = 0;
    o.parked_ = 0;
  }
  return *this;
}

void Buffer::reset() {
  if (parked_ != 0) forget_parked();  // freed while parked: counted in for the free, not read back
  if (data_ != nullptr || size_ != 0) accounted_free(data_, size_, cat_);
  data_ = nullptr;
  size_ = 0;
}

bool Buffer::parkable() const {
  return data_ != nullptr && parks(size_);
}
bool Buffer::parks(std::size_t bytes) {
  return mapped_block(rounded_size(bytes));
}

std::size_t Buffer::page_span() const {
#if defined(__EMSCRIPTEN__)
  return size_;
#else
  static const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return (size_ + page - 1) / page * page;
#endif
}

#if !defined(__EMSCRIPTEN__)
namespace {

// The guarded parked ranges, for the message of the SIGSEGV a protocol mistake raises: a plain
// "Segmentation fault" would not say that the parking protocol was broken, nor where. Lock-free
// slots (the handler may only read atomics); a range that finds no slot just goes unnamed.
struct GuardedRange {
  std::atomic<std::uintptr_t> begin{0};
  std::atomic<std::size_t> bytes{0};
};
constexpr int kGuardedRanges = 256;
GuardedRange g_guarded[kGuardedRanges];
struct sigaction g_previous_segv {};

// Writes `v` in hex to fd 2 (async-signal-safe: no stdio).
void write_hex(std::uintptr_t v) {
  char text[2 + 2 * sizeof v];
  text[0] = '0';
  text[1] = 'x';
  for (std::size_t i = 0; i < 2 * sizeof v; ++i)
    text[2 + i] = "0123456789abcdef"[(v >> (4 * (2 * sizeof v - 1 - i))) & 15];
  [[maybe_unused]] const auto n = ::write(2, text, sizeof text);
}

void write_text(const char* t) {
  [[maybe_unused]] const auto n = ::write(2, t, std::char_traits<char>::length(t));
}

// Names the parked block the fault hit, then hands the fault on: the previous disposition comes
// back and the access runs again (the default then ends the process with SIGSEGV; a sanitizer's
// handler reports it as its own).
void on_segv(int, siginfo_t* info, void*) {
  const auto at = reinterpret_cast<std::uintptr_t>(info->si_addr);
  for (const GuardedRange& r : g_guarded) {
    const std::uintptr_t b = r.begin.load(std::memory_order_acquire);
    if (b != 0 && at >= b && at - b < r.bytes.load(std::memory_order_acquire)) {
      write_text(
          "qsmcore: a parked block was touched before it was read back (a parking protocol mistake: "
          "Parked::back() before the step that reads it); block at ");
      write_hex(b);
      write_text(", address ");
      write_hex(at);
      write_text("\n");
      break;
    }
  }
  ::sigaction(SIGSEGV, &g_previous_segv, nullptr);
}

void guard_range(const void* p, std::size_t bytes) {
  static std::once_flag installed;
  std::call_once(installed, [] {
    struct sigaction a {};
    a.sa_sigaction = on_segv;
    a.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&a.sa_mask);
    ::sigaction(SIGSEGV, &a, &g_previous_segv);
  });
  for (GuardedRange& r : g_guarded) {
    std::uintptr_t empty = 0;
    if (r.begin.compare_exchange_strong(empty, reinterpret_cast<std::uintptr_t>(p), std::memory_order_acq_rel)) {
      r.bytes.store(bytes, std::memory_order_release);
      return;
    }
  }
}

// Only the block's own park and read-back touch its slot: no two threads clear the same one.
void unguard_range(const void* p) noexcept {
  for (GuardedRange& r : g_guarded)
    if (r.begin.load(std::memory_order_acquire) == reinterpret_cast<std::uintptr_t>(p)) {
      r.bytes.store(0, std::memory_order_release);
      r.begin.store(0, std::memory_order_release);
      return;
    }
}

}  // namespace
#endif

// The release library reads the switch at each park (a getenv beside a block's write to disk)
// and only then pays for mprotect; under QSM_PARK_GUARD it is always on.
bool Buffer::park_guard() {
#if defined(QSM_PARK_GUARD)
  return true;
#else
  const char* e = std::getenv("QSM_PARK_GUARD");
  return e != nullptr && std::string_view(e) == "1";
#endif
}

void Buffer::touched_while_parked() const {
  throw Error(ErrorKind::Internal, "a parked block (" + std::to_string(size_) +
                                       " bytes) was touched before it was read back: a parking protocol mistake "
                                       "(spill/parking.h: Parked::back() before the step that reads it)");
}

void Buffer::park_pages() const {
  QSM_ASSERT(parkable(), "parking a block that is not mapped on its own");
  QSM_ASSERT(parked_ == 0, "parking a block that is parked already");
#if !defined(__EMSCRIPTEN__)
  // Private anonymous pages: dropped at once, zero-filled if touched again.
  if (::madvise(data_, page_span(), MADV_DONTNEED) != 0)
    throw Error(ErrorKind::Internal, "the OS did not take back a parked block's pages");
  // Guarded: touching them before they are back faults (SIGSEGV) instead of reading zeros.
  const bool guard = park_guard();
  if (guard && ::mprotect(data_, page_span(), PROT_NONE) != 0)
    throw Error(ErrorKind::Internal, "the OS did not protect a parked block's pages (QSM_PARK_GUARD)");
  if (guard) guard_range(data_, page_span());
  parked_ = guard ? 2 : 1;
#else
  parked_ = 1;
#endif
  count_out(static_cast<std::int64_t>(size_), cat_);
}

void Buffer::unpark_pages() const {
  QSM_ASSERT(parked_ != 0, "reading back a block that is not parked");
  const auto n = static_cast<std::int64_t>(size_);
  const std::int64_t total = add_to_total(n, cat_, "reading back parked");
#if !defined(__EMSCRIPTEN__)
  if (parked_ == 2 && ::mprotect(data_, page_span(), PROT_READ | PROT_WRITE) != 0) {
    counters().total.fetch_sub(n, std::memory_order_relaxed);
    throw Error(ErrorKind::Internal, "the OS did not give a parked block's pages back their access");
  }
  if (parked_ == 2) unguard_range(data_);
#endif
  parked_ = 0;
  count_in(n, cat_, total);
}

void Buffer::forget_parked() const noexcept {
#if !defined(__EMSCRIPTEN__)
  // About to be freed: unmapping does not need the access back, but a block kept would.
  if (parked_ == 2) {
    ::mprotect(data_, page_span(), PROT_READ | PROT_WRITE);
    unguard_range(data_);
  }
#endif
  parked_ = 0;
  auto& c = counters();
  const auto n = static_cast<std::int64_t>(size_);
  c.current[static_cast<int>(cat_)].fetch_add(n, std::memory_order_relaxed);
  c.total.fetch_add(n, std::memory_order_relaxed);
}

#ifdef __EMSCRIPTEN__
// The module's view of the OS is its linear memory: it grows on demand and never shrinks, so its
// size is both what the process holds and its high-water. (/proc/self under Node would describe
// Node itself.)
std::int64_t process_rss_bytes() {
  return static_cast<std::int64_t>(emscripten_get_heap_size());
}
std::int64_t process_hwm_bytes() {
  return process_rss_bytes();
}
bool reset_process_hwm() {
  return false;
}
#else
std::int64_t process_rss_bytes() {
  return read_status_kb("VmRSS:");
}
std::int64_t process_hwm_bytes() {
  return read_status_kb("VmHWM:");
}

bool reset_process_hwm() {
  std::ofstream f("/proc/self/clear_refs");
  if (!f) return false;
  f << "5";
  return static_cast<bool>(f.flush());
}

#endif

namespace {
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif
// What the process adds outside the engine once its plans are built, during a run: glibc's heap
// keeps the small blocks a run allocates and frees (7.4 MB of xQSM's full twin at 181×217×181
// in a run at 1/8 of its peak, whose accounted peak met the engine's budget and whose peak RSS
// then passed the process's by 7.5 MB), the I/O threads' stacks. Not more: a small run's
// process holds about 36 MB outside the engine, and with this it stays within the 48 MiB the
// command line leaves outside, so its budgets stay the same from one process to the next.
constexpr std::int64_t kOutsideRunGrowth = std::int64_t{12} << 20;
}  // namespace

std::int64_t resident_outside_beyond(std::int64_t share) {
  if (kAddressSanitizer) return 0;
  const std::int64_t rss = process_rss_bytes();
  if (rss < 0) return 0;
  return std::max<std::int64_t>(rss - memory_current() + kOutsideRunGrowth - share, 0);
}

}  // namespace qsmcore
