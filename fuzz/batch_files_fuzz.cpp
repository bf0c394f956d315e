// libFuzzer target for the files `qsm batch` reads that a user writes or may edit: any bytes,
// read as a TSV manifest and as DIR/jobs.json, must give rows or a qsmcore::Error, never a
// crash, a sanitizer report, a hang or a huge allocation. The readers take paths, so the bytes go
// through a private temporary folder. Built and run by tools/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "batch/jobs.h"
#include "batch/manifest.h"
#include "qsmcore/error.h"

namespace {

std::string g_dir;

void write(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::filesystem::path base =
      std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
  std::string tmpl = (base / "qsm-batch-fuzz-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
  g_dir = tmpl;
  std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(g_dir, ec);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  write(g_dir + "/cohort.tsv", data, size);
  try {
    for (const auto& row : qsmcore::batch::read_manifest(g_dir + "/cohort.tsv"))
      if (row.id.empty()) std::abort();  // read_manifest refuses an empty id
  } catch (const qsmcore::Error&) {
  }
  write(g_dir + "/jobs.json", data, size);
  try {
    (void)qsmcore::batch::read_jobs(g_dir);
  } catch (const qsmcore::Error&) {
  }
  return 0;
}
