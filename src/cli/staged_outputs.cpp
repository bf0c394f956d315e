// Staged output sets (staged_outputs.h).
#include "cli/staged_outputs.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "qsmcore/error.h"

namespace qsmcore::cli {
namespace fs = std::filesystem;

// A named namespace: the CLI is compiled as unity batches, where other files' helpers meet these.
namespace staged_detail {

// This host's name as it goes into a temporary's: letters, digits, '_' and '-' only (no '.',
// which ends it), at most 40.
const std::string& host_tag() {
  static const std::string tag = [] {
    char name[HOST_NAME_MAX + 1] = {};
    if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return std::string("host");
    std::string t;
    for (const char* c = name; *c != '\0' && t.size() < 40; ++c)
      if (std::isalnum(static_cast<unsigned char>(*c)) != 0 || *c == '_' || *c == '-') t += *c;
    return t.empty() ? std::string("host") : t;
  }();
  return tag;
}

// From a name ".NAME.qsm-PID-N-HOST.tmp…": its writer's pid and host; false for any other name.
bool staging_writer(const std::string& name, long& pid, std::string& host) {
  if (name.size() < 2 || name[0] != '.') return false;
  const std::size_t at = name.rfind(".qsm-");
  if (at == std::string::npos || at == 0) return false;
  const std::size_t end = name.find(".tmp", at + 5);
  if (end == std::string::npos) return false;
  const std::string who = name.substr(at + 5, end - at - 5);  // PID-N-HOST
  const std::size_t d1 = who.find('-');
  const std::size_t d2 = d1 == std::string::npos ? d1 : who.find('-', d1 + 1);
  if (d2 == std::string::npos || d1 == 0 || d2 == d1 + 1 || d2 + 1 >= who.size()) return false;
  auto digits = [](const std::string& s) {
    return !s.empty() && s.size() < 10 &&
           std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
  };
  if (!digits(who.substr(0, d1)) || !digits(who.substr(d1 + 1, d2 - d1 - 1))) return false;
  pid = std::stol(who.substr(0, d1));
  host = who.substr(d2 + 1);
  return true;
}

// A pid no process of this host has (ESRCH); one that is running, ours or another user's
// (EPERM), is alive.
bool dead(long pid) {
  return pid > 0 && pid != static_cast<long>(::getpid()) && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

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

}  // namespace staged_detail

int remove_stale_staging(const std::string& folder) {
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(folder.empty() ? "." : folder, ec), end; !ec && it != end; it.increment(ec)) {
    long pid = 0;
    std::string host;
    if (!staged_detail::staging_writer(it->path().filename().string(), pid, host)) continue;
    std::error_code rm;
    if (host == staged_detail::host_tag() && staged_detail::dead(pid) && it->is_regular_file(rm) &&
        fs::remove(it->path(), rm))
      ++removed;
  }
  return removed;
}

std::string with_suffix(const std::string& path, const std::string& suffix) {
  const fs::path p(path);
  const std::string name = p.filename().string();
  const std::string ext = staged_detail::extension_of(name);
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
  for (const auto& [temp, final_path] : files_) staged_detail::remove_quietly(temp);
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
  staged_detail::make_folders(p.parent_path(), made_folders_);
  const std::string folder = p.parent_path().string();
  if (std::find(cleaned_folders_.begin(), cleaned_folders_.end(), folder) == cleaned_folders_.end()) {
    remove_stale_staging(folder);
    cleaned_folders_.push_back(folder);
  }
  const std::string name = p.filename().string();
  static std::atomic<unsigned> counter{0};  // two sets of one process staging the same name
  const std::string temp =
      (p.parent_path() / ("." + name + ".qsm-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
                          staged_detail::host_tag() + ".tmp" + staged_detail::extension_of(name)))
          .string();
  files_.emplace_back(temp, final_path);
  return temp;
}

void StagedOutputs::commit() {
  for (std::size_t i = 0; i < files_.size(); ++i) {
    std::error_code ec;
    fs::rename(files_[i].first, files_[i].second, ec);
    if (ec) {
      for (std::size_t j = i; j < files_.size(); ++j) staged_detail::remove_quietly(files_[j].first);
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
