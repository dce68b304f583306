#include "grading/submission.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "grading/jail/sandbox.h"

namespace distlm::grading {
namespace {

namespace fs = std::filesystem;

// Listing more entries than this is not a submission; stop reading.
constexpr size_t kMaxEntries = 10000;
// unzip's listings of a zip of kMaxEntries entries fit in this.
constexpr int64_t kListingBytes = 16 << 20;
// Ignored files listed one per line; the rest are counted.
constexpr size_t kMaxIgnoredListed = 30;

enum class Kind { kFile, kDir, kSymlink, kOther, kUnsafe };

struct Entry {
  std::string path;    // relative, '/'-separated, as the submission names it
  Kind kind = Kind::kFile;
  uint64_t size = 0;
  std::string source;  // a filesystem path, or the name inside the zip
};

std::vector<std::string> Split(const std::string& path) {
  std::vector<std::string> parts;
  std::stringstream ss(path);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

// Names a zip may not use: absolute, "..", backslashes (a Windows path the grader will not
// guess the meaning of), control characters.
bool UnsafeName(const std::string& name) {
  if (name.empty() || name[0] == '/' || name.find('\\') != std::string::npos) return true;
  for (char c : name) {
    if (static_cast<unsigned char>(c) < 0x20) return true;
  }
  for (const auto& p : Split(name)) {
    if (p == "..") return true;
  }
  return false;
}

// Hidden files and what archivers add (__MACOSX/, .DS_Store): reported as a count only.
bool SystemClutter(const std::string& path) {
  for (const auto& p : Split(path)) {
    if (p == "__MACOSX" || (!p.empty() && p[0] == '.')) return true;
  }
  return false;
}

std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool LooksLikeZip(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {0, 0, 0, 0};
  in.read(magic, 4);
  return magic[0] == 'P' && magic[1] == 'K' && (magic[2] == 3 || magic[2] == 5) && (magic[3] == 4 || magic[3] == 6);
}

std::vector<Entry> ListDirectory(const std::string& root, std::string* error) {
  std::vector<Entry> entries;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::none, ec), end;
  if (ec) {
    *error = "cannot read the directory " + root + ": " + ec.message();
    return entries;
  }
  for (; it != end; it.increment(ec)) {
    if (ec) {
      *error = "cannot read the directory " + root + ": " + ec.message();
      return entries;
    }
    if (entries.size() >= kMaxEntries) {
      *error = "the submission has more than " + std::to_string(kMaxEntries) + " files";
      return entries;
    }
    Entry e;
    e.source = it->path().string();
    e.path = it->path().lexically_relative(root).generic_string();
    fs::file_status st = it->symlink_status(ec);
    if (fs::is_symlink(st)) {
      e.kind = Kind::kSymlink;
    } else if (fs::is_directory(st)) {
      e.kind = Kind::kDir;
    } else if (fs::is_regular_file(st)) {
      e.kind = Kind::kFile;
      e.size = it->file_size(ec);
    } else {
      e.kind = Kind::kOther;
    }
    entries.push_back(e);
  }
  return entries;
}

// Runs unzip with stdout to `out`; "" on success, else unzip's complaint.
std::string RunUnzip(const std::vector<std::string>& args, const std::string& out, int64_t max_bytes) {
  SandboxCommand c;
  c.argv = {"/usr/bin/unzip"};
  for (const auto& a : args) c.argv.push_back(a);
  c.stdout_path = out;
  SandboxLimits limits;
  limits.timeout_s = 60;
  limits.max_output_bytes = 4096;
  limits.file_size_bytes = max_bytes;  // a zip bomb stops here (SIGXFSZ)
  SandboxResult r = RunSandboxed(c, limits);
  if (r.exit_code == 0) return "";
  std::string msg = r.output;
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  if (r.exit_code == 127) return "unzip is not available on the grader (" + msg + ")";
  return "unzip exited with " + std::to_string(r.exit_code) + (msg.empty() ? "" : ": " + msg);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) lines.push_back(line);
  return lines;
}

// Lists a zip without extracting it: names from `unzip -Z1`, kinds and sizes from the
// matching lines of `unzip -Z` (zipinfo's default listing, same order).
std::vector<Entry> ListZip(const std::string& zip, const std::string& work_dir, std::string* error) {
  std::vector<Entry> entries;
  const std::string names_file = work_dir + "/zip_names.txt", long_file = work_dir + "/zip_listing.txt";
  if (std::string err = RunUnzip({"-Z1", zip}, names_file, kListingBytes); !err.empty()) {
    *error = "cannot read the zip " + zip + ": " + err;
    return entries;
  }
  if (std::string err = RunUnzip({"-Z", zip}, long_file, kListingBytes); !err.empty()) {
    *error = "cannot read the zip " + zip + ": " + err;
    return entries;
  }
  std::vector<std::string> names = Lines(ReadFileBytes(names_file));
  std::vector<std::string> listing;
  for (const auto& line : Lines(ReadFileBytes(long_file))) {
    // Entry lines start with the 10-character permission string; the header ("Archive:",
    // "Zip file size:") and the trailer ("N files, ...") do not.
    if (line.size() > 10 && (line[0] == '-' || line[0] == 'd' || line[0] == 'l' || line[0] == '?' ||
                             line[0] == 'c' || line[0] == 'b' || line[0] == 'p' || line[0] == 's') &&
        line[10] == ' ') {
      listing.push_back(line);
    }
  }
  if (names.size() != listing.size()) {
    *error = "cannot read the zip " + zip + ": its listing is inconsistent (unusual file names?)";
    return entries;
  }
  if (names.size() > kMaxEntries) {
    *error = "the zip has more than " + std::to_string(kMaxEntries) + " entries";
    return entries;
  }
  for (size_t i = 0; i < names.size(); ++i) {
    Entry e;
    e.source = names[i];
    e.path = names[i];
    const std::string& line = listing[i];
    std::stringstream fields(line);
    std::string perms, version, os, size;
    fields >> perms >> version >> os >> size;
    e.size = std::strtoull(size.c_str(), nullptr, 10);
    if (UnsafeName(names[i])) {
      e.kind = Kind::kUnsafe;
    } else if (line[0] == 'l') {
      e.kind = Kind::kSymlink;
    } else if (line[0] == 'd' || names[i].back() == '/') {
      e.kind = Kind::kDir;
    } else if (line[0] == '-' || line[0] == '?') {
      e.kind = Kind::kFile;
    } else {
      e.kind = Kind::kOther;
    }
    entries.push_back(e);
  }
  return entries;
}

// unzip takes entry names as wildcard patterns; a backslash makes a character literal.
std::string EscapeZipPattern(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string AllowedList() {
  std::string s;
  for (const auto& st : stages::All()) {
    for (const auto& f : st.files) s += (s.empty() ? "" : ", ") + st.id + "/" + f;
  }
  return s;
}

// A zipped folder: one top-level folder and no stage folder beside it. Its name and a slash
// (the prefix every entry then has), or "".
std::string FolderAround(const std::vector<Entry>& entries) {
  std::set<std::string> top_dirs;
  for (const auto& e : entries) {
    if (e.kind == Kind::kUnsafe || SystemClutter(e.path)) continue;
    auto parts = Split(e.path);
    if (parts.empty()) continue;
    if (stages::Find(parts[0]) != nullptr) return "";
    if (parts.size() > 1 || e.kind == Kind::kDir) top_dirs.insert(parts[0]);
  }
  return top_dirs.size() == 1 ? *top_dirs.begin() + "/" : "";
}

// Where the entries come from: a directory (files copied) or a zip (entries extracted).
struct Origin {
  std::string path;
  bool is_dir = false;
  std::string work_dir;  // accepted files go to work_dir/accepted/<stage>/
};

// Takes the entry at `rel` (its path inside the submission's folder) as a student file of its
// stage: "" when accepted, else why it was not.
std::string TakeEntry(const Entry& e, const std::string& rel, const Origin& origin, Submission* sub) {
  auto parts = Split(rel);
  const stages::Row* st = parts.empty() ? nullptr : stages::Find(parts[0]);
  if (st != nullptr) sub->stages[st->id].folder_present = true;
  const bool allowed =
      st != nullptr && parts.size() == 2 && std::find(st->files.begin(), st->files.end(), parts[1]) != st->files.end();
  if (!allowed) {
    const std::string base = parts.empty() ? "" : parts.back();
    if (st != nullptr && std::find(st->files.begin(), st->files.end(), base) != st->files.end()) {
      return e.path + ": ignored; the files go directly into " + st->id + "/ (did you mean " + st->id + "/" + base + "?)";
    }
    return e.path + ": not a student file, ignored (the grader takes only " + AllowedList() + ")";
  }
  SubmittedStage& s = sub->stages[st->id];
  const std::string& name = parts[1];
  if (s.files.count(name) != 0) return e.path + ": a second copy of " + st->id + "/" + name + ", ignored";
  if (e.kind == Kind::kSymlink) return e.path + ": a symbolic link, not accepted (submit the file itself)";
  if (e.kind != Kind::kFile) return e.path + ": not a regular file, not accepted";
  if (e.size > kMaxStudentFileBytes) {
    return e.path + ": " + std::to_string(e.size) + " bytes, more than the " + std::to_string(kMaxStudentFileBytes) +
           " a student file may have; not accepted";
  }
  std::error_code ec;
  const std::string dest_dir = origin.work_dir + "/accepted/" + st->id;
  fs::create_directories(dest_dir, ec);
  const std::string dest = dest_dir + "/" + name;
  if (origin.is_dir) {
    std::ofstream out(dest, std::ios::binary | std::ios::trunc);
    out << ReadFileBytes(e.source);
    if (!out) return e.path + ": could not be copied";
  } else if (std::string err = RunUnzip({"-p", origin.path, EscapeZipPattern(e.source)}, dest, kMaxStudentFileBytes + 1);
             !err.empty()) {
    return e.path + ": could not be extracted (" + err + ")";
  }
  if (fs::file_size(dest, ec) > kMaxStudentFileBytes) return e.path + ": larger than its listing says; not accepted";
  s.files[name] = dest;
  s.missing.erase(std::remove(s.missing.begin(), s.missing.end(), name), s.missing.end());
  return "";
}

}  // namespace

Submission LoadSubmission(const std::string& path, const std::string& work_dir) {
  Submission sub;
  for (const auto& st : stages::All()) {
    SubmittedStage s;
    s.spec = &st;
    s.missing = st.files;
    sub.stages[st.id] = s;
  }

  std::error_code ec;
  fs::file_status status = fs::status(path, ec);
  const Origin origin{path, fs::is_directory(status), work_dir};
  const bool is_zip = fs::is_regular_file(status) && LooksLikeZip(path);
  if (!fs::exists(status)) {
    sub.fatal = "the submission " + path + " does not exist";
    return sub;
  }
  if (!origin.is_dir && !is_zip) {
    sub.fatal = "the submission " + path + " is neither a directory nor a .zip file";
    return sub;
  }
  std::string error;
  std::vector<Entry> entries = origin.is_dir ? ListDirectory(path, &error) : ListZip(path, work_dir, &error);
  if (!error.empty()) {
    sub.fatal = error;
    return sub;
  }
  sub.notes.push_back(std::string("read the ") + (origin.is_dir ? "directory " : "zip ") + path);
  const std::string prefix = FolderAround(entries);
  if (!prefix.empty()) sub.notes.push_back("the task folders were looked for inside '" + prefix + "'");

  std::vector<std::string> ignored;
  size_t clutter = 0;
  for (const auto& e : entries) {
    if (e.kind == Kind::kDir) continue;
    if (e.kind == Kind::kUnsafe) {
      ignored.push_back(e.path + ": unsafe path (absolute, '..' or unusual characters): not extracted");
    } else if (SystemClutter(e.path)) {
      ++clutter;
    } else if (!prefix.empty() && e.path.rfind(prefix, 0) != 0) {
      ignored.push_back(e.path + ": outside the folder '" + prefix + "': ignored");
    } else if (std::string why = TakeEntry(e, e.path.substr(prefix.size()), origin, &sub); !why.empty()) {
      ignored.push_back(why);
    }
  }
  if (clutter > 0) ignored.push_back(std::to_string(clutter) + " hidden or system file(s) (.*, __MACOSX/): ignored");
  for (size_t i = 0; i < ignored.size() && i < kMaxIgnoredListed; ++i) sub.ignored.push_back(ignored[i]);
  if (ignored.size() > kMaxIgnoredListed) {
    sub.ignored.push_back("... and " + std::to_string(ignored.size() - kMaxIgnoredListed) + " more ignored");
  }
  return sub;
}

}  // namespace distlm::grading
