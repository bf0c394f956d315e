#include "cli/staged_outputs.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "qsmcore/error.h"

namespace qsmcore::cli {
namespace fs = std::filesystem;

namespace {

// The extension writers look at: ".nii.gz" counts as one.
std::string extension_of(const std::string& name) {
  if (name.ends_with(".nii.gz")) return ".nii.gz";
  const auto dot = name.rfind('.');
  return dot == std::string::npos || dot == 0 ? std::string() : name.substr(dot);
}

void remove_quietly(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
}

// Creates `folder` and its missing parents, appending each one it made (outermost first).
void make_folders(const fs::path& folder, std::vector<std::string>& made) {
  std::vector<fs::path> missing;
  std::error_code ec;
  for (fs::path p = folder; !p.empty() && !fs::is_directory(p, ec); p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (fs::create_directory(*it, ec))
      made.push_back(it->string());
    else if (std::error_code ec2; !fs::is_directory(*it, ec2))  // made meanwhile by someone else: fine
      throw Error(ErrorKind::Io, "cannot create the folder " + it->string() + ": " + ec.message());
  }
}

}  // namespace

std::string with_suffix(const std::string& path, const std::string& suffix) {
  const fs::path p(path);
  const std::string name = p.filename().string();
  const std::string ext = extension_of(name);
  const std::string stem = name.substr(0, name.size() - ext.size());
  return (p.parent_path() / (stem + "_" + suffix + ext)).string();
}

void require_parent_folder(const std::string& path, const std::string& option) {
  std::error_code ec;
  for (fs::path p = fs::path(path).parent_path(); !p.empty(); p = p.parent_path()) {
    if (fs::is_directory(p, ec)) return;
    if (fs::exists(p, ec))
      throw Error(ErrorKind::InvalidInput, option + " " + path + ": " + p.string() + " is not a folder");
    if (p == p.parent_path()) return;
  }
}

StagedOutputs::~StagedOutputs() {
  if (committed_) return;
  for (const auto& [temp, final_path] : files_) remove_quietly(temp);
  for (auto it = made_folders_.rbegin(); it != made_folders_.rend(); ++it) {
    std::error_code ec;
    fs::remove(*it, ec);  // only if empty: never what someone else put there meanwhile
  }
}

std::string StagedOutputs::stage(const std::string& final_path) {
  for (const auto& f : files_)
    if (fs::path(f.second).lexically_normal() == fs::path(final_path).lexically_normal())
      throw Error(ErrorKind::InvalidInput, final_path + ": the same output file is named twice");
  const fs::path p(final_path);
  make_folders(p.parent_path(), made_folders_);
  const std::string name = p.filename().string();
  static std::atomic<unsigned> counter{0};  // two sets of one process staging the same name
  const std::string temp = (p.parent_path() / ("." + name + ".qsm-" + std::to_string(::getpid()) + "-" +
                                               std::to_string(counter++) + ".tmp" + extension_of(name)))
                               .string();
  files_.emplace_back(temp, final_path);
  return temp;
}

void StagedOutputs::commit() {
  for (std::size_t i = 0; i < files_.size(); ++i) {
    std::error_code ec;
    fs::rename(files_[i].first, files_[i].second, ec);
    if (ec) {
      for (std::size_t j = i; j < files_.size(); ++j) remove_quietly(files_[j].first);
      committed_ = true;
      throw Error(ErrorKind::Io, "cannot move the finished " + files_[i].second + " into place: " + ec.message() +
                                     (i > 0 ? " (" + std::to_string(i) + " earlier output(s) were written)" : ""));
    }
  }
  committed_ = true;
}

std::vector<std::string> StagedOutputs::final_paths() const {
  std::vector<std::string> out;
  for (const auto& f : files_) out.push_back(f.second);
  return out;
}

}  // namespace qsmcore::cli
