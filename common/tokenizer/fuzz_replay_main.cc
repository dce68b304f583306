// Replays a libFuzzer entry point (LLVMFuzzerTestOneInput) without libFuzzer: over every file
// of the seed folders named on the command line (workspace-relative runfiles), then over
// inputs made by a fixed-seed generator (random bytes, and random mixes of the characters
// tokenizers care about). gcc has no libFuzzer; this keeps the fuzz targets built and run in
// CI, and any input that crashes or trips an invariant fails the test.
#include <dirent.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/testing/subprocess.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> files;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return files;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") files.push_back(dir + "/" + name);
  }
  closedir(d);
  return files;
}

void Run(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

// Pieces that hit the interesting paths: separators, controls, invalid UTF-8, accents, CJK,
// Greek sigma, special tokens, TSV tabs and line ends.
const char* const kAtoms[] = {
    " ",   "\t",   "\n",   "\r\n", "\r",     "a",        "Z",           "un",           "##",       "[CLS]",
    "[",   "]",    ".",    ",",    "'",      "\xC3\xA9", "e\xCC\x81",   "\xC4\xB0",     "\xCE\xA3", "\xCE\x91",
    "\xE4\xB8\xAD",        "\xC2\xA0",       "\xE2\x80\xA8",            "\xEF\xBF\xBD", "\xC2\xAD", "\xEE\x80\x80",
    "\xFF", "\xC3", "\xED\xA0\x80",          "\xF0\x9F\x98\x80",        "\0" /* NUL */, "entailment",
    "not_entailment",       "0",             "index\tsentence1\tsentence2\tlabel\n",
};

}  // namespace

int main(int argc, char** argv) {
  size_t files = 0, generated = 0;
  for (int i = 1; i < argc; ++i) {
    for (const std::string& path : FilesIn(distlm::testing::Runfile(argv[i]))) {
      std::ifstream in(path, std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      Run(ss.str());
      ++files;
    }
  }
  std::mt19937_64 rng(20240611);
  const size_t atoms = sizeof(kAtoms) / sizeof(kAtoms[0]);
  for (int round = 0; round < 3000; ++round) {
    std::string input;
    const size_t len = rng() % 64;
    if (round % 2 == 0) {
      for (size_t k = 0; k < len; ++k) input.push_back(static_cast<char>(rng() & 0xFF));
    } else {
      for (size_t k = 0; k < len; ++k) {
        const char* atom = kAtoms[rng() % atoms];
        if (atom[0] == '\0') {
          input.push_back('\0');
        } else {
          input += atom;
        }
      }
    }
    Run(input);
    ++generated;
  }
  // One long input: words over the 100-character limit and many pieces.
  Run(std::string(5000, 'a') + " " + std::string(101, 'b') + "\t" + std::string(3000, '\xE4'));
  std::printf("replayed %zu seed files and %zu generated inputs\n", files, generated + 1);
  return files == 0 ? 1 : 0;  // a missing seed folder is a broken test, not a pass
}
