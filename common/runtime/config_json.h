// Reading model config.json files (BERT's, ViT's): typed fields with one-line errors naming the
// file and the field, and a stable fingerprint for ranks and snapshots to compare.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace distlm {

// j[key] as an integer: `fallback` when absent or null (a UserError naming `source` and the key
// when `required`), a UserError when it is not an integer.
int64_t ConfigInt(const nlohmann::json& j, const char* key, const std::string& source, bool required, int64_t fallback);
// j[key] as a number, `fallback` when absent or null.
double ConfigDouble(const nlohmann::json& j, const char* key, const std::string& source, double fallback);

// FNV-1a, 64 bit, as 16 hex digits: stable across builds and machines (std::hash is not).
std::string StableFingerprint(const std::string& text);

}  // namespace distlm
