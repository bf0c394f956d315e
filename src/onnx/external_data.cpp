#include "onnx/external_data.h"

#include <filesystem>

#include "qsmcore/error.h"

namespace qsmcore::onnx {
namespace {

[[noreturn]] void bad(const TensorProtoView& v, const std::string& what) {
  throw Error(ErrorKind::InvalidModel, v.msg.file() + ": " + v.label + ": " + what);
}

/// A strict non-negative decimal (ONNX writes offsets and lengths as decimal strings).
std::uint64_t parse_count(const TensorProtoView& v, const std::string& key, const std::string& text) {
  if (text.empty() || text.size() > 19) bad(v, "external data " + key + " '" + text + "' is not a valid byte count");
  std::uint64_t n = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '9') bad(v, "external data " + key + " '" + text + "' is not a valid byte count");
    n = n * 10 + static_cast<std::uint64_t>(ch - '0');  // 19 digits cannot overflow
  }
  return n;
}

}  // namespace

int ShardTable::source_for(const TensorProtoView& v, const std::string& location) {
  namespace fs = std::filesystem;
  if (location.empty()) bad(v, "external data has an empty location");
  if (location.find('\0') != std::string::npos) bad(v, "external data location contains a NUL byte");
  const fs::path rel(location);
  if (rel.is_absolute())
    bad(v, "external data location '" + location + "' is an absolute path; it must be relative to the model's folder");
  // Lexical check: any '..' that survives normalisation would leave the folder.
  const fs::path norm = rel.lexically_normal();
  if (norm.empty() || norm == "." || *norm.begin() == "..")
    bad(v, "external data location '" + location + "' escapes the model's folder");
  for (const auto& part : norm)
    if (part == "..") bad(v, "external data location '" + location + "' escapes the model's folder");
  if (base_dir_.empty())
    bad(v, "external data '" + location + "' cannot be found: the model was read from memory without a folder");

  const std::string key = norm.string();
  if (auto it = opened_.find(key); it != opened_.end()) return it->second;
  const std::string path = (fs::path(base_dir_) / norm).string();
  std::shared_ptr<io::ByteSource> src;
  try {
    src = io::open_file_source(path);
  } catch (const Error& e) {
    throw Error(e.kind(), v.msg.file() + ": " + v.label + ": external data file '" + location + "': " + e.what());
  }
  sources_.push_back(std::move(src));
  const int index = static_cast<int>(sources_.size() - 1);
  opened_.emplace(key, index);
  return index;
}

graph::WeightLocation ShardTable::locate(const TensorProtoView& v, std::uint64_t nbytes) {
  const std::string* location = v.external_value("location");
  if (location == nullptr) bad(v, "data_location is EXTERNAL but external_data has no 'location'");
  const std::string* off = v.external_value("offset");
  const std::string* len = v.external_value("length");
  const std::uint64_t offset = off ? parse_count(v, "offset", *off) : 0;
  const std::uint64_t length = len ? parse_count(v, "length", *len) : nbytes;
  if (length != nbytes)
    bad(v, "external data length " + std::to_string(length) + " does not match the " + std::to_string(nbytes) +
               " bytes its dtype and dims need");
  graph::WeightLocation loc;
  loc.source = source_for(v, *location);
  const std::uint64_t size = sources_[static_cast<std::size_t>(loc.source)]->size();
  if (offset > size || length > size - offset)
    bad(v, "external data needs bytes [" + std::to_string(offset) + ", " + std::to_string(offset) + "+" +
               std::to_string(length) + ") of '" + *location + "', which has only " + std::to_string(size) + " bytes");
  loc.offset = offset;
  loc.length = length;
  return loc;
}

Tensor ShardTable::decode(const TensorProtoView& v, MemCategory cat) {
  if (!v.external) return decode_tensor(v, cat);
  const DType t = tensor_dtype(v);
  const graph::WeightLocation loc = locate(v, tensor_nbytes(v, t));
  // The range was checked against the shard, so this allocation is bounded by a real file.
  Tensor out = Tensor::empty(t, v.dims, cat);
  if (loc.length) sources_[static_cast<std::size_t>(loc.source)]->read(loc.offset, loc.length, out.raw());
  return out;
}

}  // namespace qsmcore::onnx
