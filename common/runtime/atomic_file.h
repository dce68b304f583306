// Writing files so that a reader (or a crash) never sees half of one.
#pragma once

#include <string>

namespace distlm {

// Writes bytes to path through a temporary file in the same folder: write, fsync, rename over
// path, fsync the folder. Either the old file or the whole new one is there afterwards.
// Throws UserError naming the path on failure.
void WriteFileAtomically(const std::string& path, const std::string& bytes);

// Reads a whole file; throws UserError naming the path when it cannot.
std::string ReadFile(const std::string& path);

// Appends one line (a '\n' is added) and fsyncs, so every logged line survives a crash whole.
// Keeps no state: opens, appends, closes.
void AppendLineDurably(const std::string& path, const std::string& line);

// mkdir -p. Throws UserError naming the path on failure.
void MakeDirs(const std::string& path);

bool PathExists(const std::string& path);

}  // namespace distlm
