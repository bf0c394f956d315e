// Parking (issue #16): full-volume buffers a wrapper holds across its graph runs but no graph
// reads (NeXtQSM's iterate, background field, padded mask and dipole kernel; the caller's input
// volumes once the network's inputs are made from them) wait in a file while a graph runs, so
// that graph's activations have their room. Exact: the same bytes come back, at the same
// addresses (Buffer::park_pages), so pointers the wrapper holds stay valid.
#pragma once
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "qsmcore/memory.h"

namespace qsmcore::residency {
class SpillFile;
}

namespace qsmcore::networks {

class Parking {
 public:
  /// Its file goes to `dir` ("" = $TMPDIR, else /tmp), made at the first park.
  explicit Parking(std::string dir);
  /// Reads back whatever is parked (a run that threw leaves the buffers as they were).
  ~Parking();
  Parking(const Parking&) = delete;
  Parking& operator=(const Parking&) = delete;

  /// Blocks that cannot park (Buffer::parkable) are left out; none may be added while parked.
  void add(const Buffer& b);
  /// Removes a block. While parked (a run unwinding after a read-back failed: the block is
  /// about to be freed), its parked bytes are forgotten (Buffer::forget_parked), not read back,
  /// and the other blocks still come back from where they were written. Never throws: it is
  /// called from the destructors of guards (networks/context.h).
  void remove(const Buffer& b) noexcept;
  /// The accounted bytes a park frees.
  std::int64_t bytes() const;

  /// Writes every block out and gives its pages back; unpark() reads them back (where it
  /// throws, calling it again goes on from where it stopped).
  void park();
  void unpark();
  /// Where the parked bytes are not wanted back (blocks about to be freed): counts them in
  /// again without reading them (the pages come back as zeros).
  void forget();
  bool parked() const { return parked_; }
  /// Bytes written out over every park so far (each is read back once).
  std::int64_t written() const { return written_; }
  /// Frees its file in the background (SpillFile::free_in_background); a later park makes another.
  void release_file();

  /// Parks for a scope: a graph run.
  class Scope {
   public:
    explicit Scope(Parking* p) : p_(p), unwinding_(std::uncaught_exceptions()) {
      if (p_) p_->park();
    }
    // Reading back can fail (the memory cap): that error is the run's, unless it is failing already.
    ~Scope() noexcept(false) {
      if (!p_ || !p_->parked()) return;
      if (std::uncaught_exceptions() == unwinding_) {
        p_->unpark();
        return;
      }
      try {
        p_->unpark();
      } catch (...) {  // NOLINT(bugprone-empty-catch): the error in flight is the one to see
      }
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Parking* p_;
    int unwinding_;
  };

 private:
  // Reads back every block still away, in order; one that fails stays away (its pages given
  // back again) and the read-back throws, so calling it again goes on from there.
  void read_back();

  struct Block {
    const Buffer* buffer;
    std::uint64_t at = 0;  // where in the file its bytes were written
    bool away = false;     // written out, its pages given back, not read back yet
  };
  std::string dir_;
  std::vector<Block> blocks_;
  std::unique_ptr<residency::SpillFile> file_;
  bool parked_ = false;
  bool direct_ = false;  // how the parked bytes were written
  std::int64_t written_ = 0;
};

}  // namespace qsmcore::networks
