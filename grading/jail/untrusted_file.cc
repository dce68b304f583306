// ReadUntrustedFile and IdentityOf (sandbox.h): reading what student code left behind.
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "grading/jail/sandbox.h"

namespace distlm::grading {

DirIdentity IdentityOf(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return {};
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

bool ReadUntrustedFile(const std::string& trusted_root, const std::string& path, int64_t owner, size_t max_bytes,
                       std::string* out, bool* truncated, std::string* why, DirIdentity root) {
  out->clear();
  *truncated = false;
  if (path.rfind(trusted_root + "/", 0) != 0) {
    *why = path + " is not inside " + trusted_root + "; not read";
    return false;
  }
  // Messages name the file as the student knows it: inside the run's folder.
  const std::string shown = path.substr(trusted_root.size() + 1);
  int dir = open(trusted_root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (dir < 0 || fstat(dir, &st) != 0) {
    *why = "the run's folder " + trusted_root + " is not a directory the grader made (" + strerror(errno) + "); " +
           shown + " not read";
    if (dir >= 0) close(dir);
    return false;
  }
  if (root.known() && (static_cast<uint64_t>(st.st_dev) != root.dev || static_cast<uint64_t>(st.st_ino) != root.ino)) {
    *why = "the run's folder was replaced after the grader made it; " + shown + " not read";
    close(dir);
    return false;
  }
  // One name at a time from the root, no link followed: nothing on the way can lead elsewhere.
  std::vector<std::string> names;
  for (size_t from = 0; from <= shown.size();) {
    size_t to = shown.find('/', from);
    if (to == std::string::npos) to = shown.size();
    const std::string name = shown.substr(from, to - from);
    if (name == "..") {
      close(dir);
      *why = shown + " goes up with '..'; not read";
      return false;
    }
    if (!name.empty() && name != ".") names.push_back(name);
    from = to + 1;
  }
  if (names.empty()) {
    close(dir);
    *why = "no file named in " + shown;
    return false;
  }
  std::string walked;
  for (size_t i = 0; i + 1 < names.size(); ++i) {
    walked += (walked.empty() ? "" : "/") + names[i];
    const int next = openat(dir, names[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const int err = errno;
    struct stat link;
    const bool is_link = next < 0 && fstatat(dir, names[i].c_str(), &link, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(link.st_mode);
    close(dir);
    if (next < 0) {
      *why = is_link ? walked + " is a symbolic link (the grader follows none); " + shown + " not read"
                     : (err == ENOENT ? "no " + shown : walked + " is not a folder (" + strerror(err) + "); " + shown + " not read");
      return false;
    }
    dir = next;
  }
  // O_NONBLOCK: opening a FIFO must not wait for a writer; O_NOCTTY: nothing becomes a terminal.
  const int fd = openat(dir, names.back().c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  const int err = errno;
  struct stat link;
  const bool is_link = fd < 0 && fstatat(dir, names.back().c_str(), &link, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(link.st_mode);
  close(dir);
  if (fd < 0) {
    if (is_link) {
      *why = shown + " is a symbolic link (the grader follows none); not read";
    } else if (err == ENOENT) {
      *why = "no " + shown;
    } else {
      *why = "cannot open " + shown + ": " + strerror(err) + (err == ENXIO ? " (a socket is not a file)" : "");
    }
    return false;
  }
  if (fstat(fd, &st) != 0) {
    *why = "cannot open " + shown + ": " + strerror(errno);
    close(fd);
    return false;
  }
  if (!S_ISREG(st.st_mode) || (owner >= 0 && static_cast<int64_t>(st.st_uid) != owner)) {
    *why = shown + (S_ISREG(st.st_mode) ? " belongs to uid " + std::to_string(st.st_uid) + ", not the student's"
                                       : " is not a regular file") + "; not read";
    close(fd);
    return false;
  }
  const size_t want = std::min(max_bytes, static_cast<size_t>(st.st_size));
  out->resize(want);
  size_t got = 0;
  while (got < want) {
    ssize_t n = read(fd, out->data() + got, want - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  out->resize(got);
  *truncated = static_cast<size_t>(st.st_size) > max_bytes;
  close(fd);
  return true;
}

}  // namespace distlm::grading
