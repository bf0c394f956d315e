// libFuzzer target for the NIfTI reader: any bytes, read as a .nii and (gzip-compressed) as a
// .nii.gz, must give a volume or a qsmcore::Error, never a crash, a sanitizer report, a hang or
// a huge allocation. The reader takes a path, so the bytes go through a private temporary
// folder. Built and run by tools/fuzz.sh.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "io/nifti.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"

namespace {

std::string g_dir;

void write_plain(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
}

void write_gz(const std::string& path, const std::uint8_t* data, std::size_t size) {
  gzFile f = gzopen(path.c_str(), "wb1");
  if (f == nullptr) std::abort();
  if (size) gzwrite(f, data, static_cast<unsigned>(size));
  gzclose(f);
}

void read(const std::string& path) {
  try {
    qsmcore::io::NiftiReadOptions o;
    o.allow_frames = true;  // reach the 4-D paths as well
    qsmcore::io::NiftiInfo info;
    (void)qsmcore::io::read_nifti(path, o, &info);
  } catch (const qsmcore::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Memory-backed when there is one: each input is written and read twice.
  const std::filesystem::path base =
      std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
  std::string tmpl = (base / "qsm-nifti-fuzz-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
  g_dir = tmpl;
  std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(g_dir, ec);
  });
  qsmcore::set_memory_cap(std::int64_t{128} << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string plain = g_dir + "/in.nii", gz = g_dir + "/in.nii.gz";
  write_plain(plain, data, size);
  read(plain);
  write_gz(gz, data, size);
  read(gz);
  return 0;
}
