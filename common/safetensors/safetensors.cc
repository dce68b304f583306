#include "common/safetensors/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"

// The format stores little-endian bytes and both directions copy them as they are in memory.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors IO copies raw bytes; a big-endian host would need byte swapping");

namespace distlm::safetensors {
namespace {

struct DtypePair {
  const char* name;
  c10::ScalarType type;
};

constexpr DtypePair kTorchDtypes[] = {
    {"BOOL", c10::kBool}, {"U8", c10::kByte},   {"I8", c10::kChar},
    {"I16", c10::kShort}, {"I32", c10::kInt},   {"I64", c10::kLong},
    {"F16", c10::kHalf},  {"BF16", c10::kBFloat16}, {"F32", c10::kFloat},
    {"F64", c10::kDouble},
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// pread until size bytes are in; a short file here means it changed after we sized it.
void ReadAt(int fd, void* dst, uint64_t size, uint64_t offset, const std::string& path) {
  auto* out = static_cast<char*>(dst);
  while (size > 0) {
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(size, 1u << 30));
    ssize_t n = ::pread(fd, out, chunk, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw UserError(path + ": cannot read: " + std::strerror(errno));
    }
    if (n == 0) {
      throw UserError(path + ": file ended at byte " + std::to_string(offset) +
                      " while reading it (did it change during the load?)");
    }
    out += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<uint64_t>(n);
  }
}

// LibTorch's bool is one byte holding 0 or 1; any other byte would make comparisons lie.
void CheckBoolBytes(const torch::Tensor& t, const TensorEntry& entry, const std::string& path) {
  const auto* bytes = static_cast<const uint8_t*>(t.data_ptr());
  const uint64_t n = entry.end - entry.begin;
  for (uint64_t i = 0; i < n; ++i) {
    if (bytes[i] > 1) {
      throw UserError(path + ": tensor " + Quoted(entry.name) + " (BOOL) has byte " +
                      std::to_string(bytes[i]) + " at element " + std::to_string(i) +
                      "; BOOL elements are 0 or 1");
    }
  }
}

// Opens path for reading; the descriptor is the caller's.
int OpenRegularFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UserError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const bool is_dir = S_ISDIR(st.st_mode);
    ::close(fd);
    throw UserError(path + (is_dir ? ": is a directory, not a safetensors file" : ": not a regular file"));
  }
  return fd;
}

// Reads the length prefix and the header with one pread each, and checks the header against
// the file's size. Sets *data_start to the file offset of the data buffer.
Header ReadHeaderOf(int fd, const std::string& path, uint64_t* data_start) {
  struct stat st;
  if (::fstat(fd, &st) != 0) throw UserError(path + ": cannot stat: " + std::strerror(errno));
  const auto file_size = static_cast<uint64_t>(st.st_size);
  char prefix[8];
  const uint64_t prefix_size = std::min<uint64_t>(file_size, sizeof(prefix));
  ReadAt(fd, prefix, prefix_size, 0, path);
  const uint64_t header_size =
      ParseHeaderLength(std::string_view(prefix, prefix_size), file_size, path);
  std::string json(header_size, '\0');
  ReadAt(fd, json.data(), header_size, 8, path);
  *data_start = 8 + header_size;
  return ParseHeader(json, file_size - *data_start, path);
}

}  // namespace

c10::ScalarType TorchDtype(const std::string& dtype) {
  for (const auto& d : kTorchDtypes) {
    if (dtype == d.name) return d.type;
  }
  throw UserError("unsupported safetensors dtype " + Quoted(dtype));
}

std::string SafetensorsDtype(c10::ScalarType type) {
  for (const auto& d : kTorchDtypes) {
    if (type == d.type) return d.name;
  }
  return "";
}

Header ReadHeader(const std::string& path) {
  Fd fd(OpenRegularFile(path));
  uint64_t data_start = 0;
  return ReadHeaderOf(fd.get(), path, &data_start);
}

std::vector<std::pair<std::string, torch::Tensor>> LoadFile(const std::string& path,
                                                             bool to_float32) {
  Fd fd(OpenRegularFile(path));
  uint64_t data_start = 0;
  const Header header = ReadHeaderOf(fd.get(), path, &data_start);

  std::vector<std::pair<std::string, torch::Tensor>> out;
  out.reserve(header.tensors.size());
  for (const TensorEntry& entry : header.tensors) {
    // The header check guarantees end - begin == numel * item size, so the read fills the
    // tensor exactly.
    torch::Tensor t = torch::empty(entry.shape, torch::TensorOptions().dtype(TorchDtype(entry.dtype)));
    if (entry.end > entry.begin) {
      ReadAt(fd.get(), t.data_ptr(), entry.end - entry.begin, data_start + entry.begin, path);
    }
    if (t.scalar_type() == c10::kBool) CheckBoolBytes(t, entry, path);
    if (to_float32 && (t.scalar_type() == c10::kHalf || t.scalar_type() == c10::kBFloat16)) {
      t = t.to(c10::kFloat);
    }
    out.emplace_back(entry.name, std::move(t));
  }
  return out;
}

void SaveFile(const std::string& path,
              const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
              const std::map<std::string, std::string>& metadata) {
  std::vector<std::pair<std::string, torch::Tensor>> sorted;
  sorted.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined()) throw UserError(path + ": tensor " + Quoted(name) + " is undefined");
    if (tensor.layout() != c10::kStrided) {
      throw UserError(path + ": tensor " + Quoted(name) + " is not dense (sparse or other layout)");
    }
    if (SafetensorsDtype(tensor.scalar_type()).empty()) {
      throw UserError(path + ": tensor " + Quoted(name) + " has dtype " +
                      std::string(c10::toString(tensor.scalar_type())) +
                      ", which safetensors files here do not hold");
    }
    sorted.emplace_back(name, tensor.detach().to(torch::kCPU).contiguous());
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });

  Header header;
  header.metadata = metadata;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : sorted) {
    TensorEntry entry;
    entry.name = name;
    entry.dtype = SafetensorsDtype(tensor.scalar_type());
    entry.shape = tensor.sizes().vec();
    entry.begin = offset;
    offset += tensor.nbytes();
    entry.end = offset;
    header.tensors.push_back(std::move(entry));
  }
  // Duplicate names, names that are not UTF-8 and oversized headers fail here.
  const std::string json = SerializeHeader(header, path);

  std::string bytes;
  bytes.reserve(8 + json.size() + offset);
  for (int i = 0; i < 8; ++i) bytes += static_cast<char>((json.size() >> (8 * i)) & 0xff);
  bytes += json;
  for (const auto& [name, tensor] : sorted) {
    if (tensor.nbytes() > 0) bytes.append(static_cast<const char*>(tensor.data_ptr()), tensor.nbytes());
  }
  // What we write must pass our own reader: a cheap check of the header against the buffer.
  ParseHeader(json, offset, path);
  WriteFileAtomically(path, bytes);
}

}  // namespace distlm::safetensors
