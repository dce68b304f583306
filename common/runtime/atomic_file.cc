#include "common/runtime/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/runtime/errors.h"

namespace distlm {
namespace {

std::string Dirname(const std::string& path) {
  auto pos = path.rfind('/');
  if (pos == std::string::npos) return ".";
  if (pos == 0) return "/";
  return path.substr(0, pos);
}

std::string Errno() { return std::strerror(errno); }

void WriteAll(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw UserError("cannot write " + path + ": " + Errno());
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
}

}  // namespace

void WriteFileAtomically(const std::string& path, const std::string& bytes) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw UserError("cannot create " + tmp + ": " + Errno());
  try {
    WriteAll(fd, bytes.data(), bytes.size(), tmp);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw UserError("cannot flush " + tmp + ": " + Errno());
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = Errno();
    ::unlink(tmp.c_str());
    throw UserError("cannot rename " + tmp + " to " + path + ": " + err);
  }
  int dir = ::open(Dirname(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot read " + path + ": " + Errno());
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw UserError("cannot read " + path + ": " + Errno());
  return ss.str();
}

void AppendLineDurably(const std::string& path, const std::string& line) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw UserError("cannot open " + path + ": " + Errno());
  std::string data = line + "\n";
  try {
    WriteAll(fd, data.data(), data.size(), path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::fsync(fd);
  ::close(fd);
}

void MakeDirs(const std::string& path) {
  if (path.empty()) return;
  std::string partial;
  std::stringstream ss(path);
  std::string part;
  if (path[0] == '/') partial = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    partial += part + "/";
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      throw UserError("cannot create directory " + partial + ": " + Errno());
    }
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw UserError(path + " exists and is not a directory");
  }
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace distlm
