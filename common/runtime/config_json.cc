#include "common/runtime/config_json.h"

#include <cstdio>

#include "common/runtime/errors.h"

namespace distlm {

int64_t ConfigInt(const nlohmann::json& j, const char* key, const std::string& source, bool required, int64_t fallback) {
  if (!j.contains(key) || j[key].is_null()) {
    if (required) throw UserError(source + ": missing field \"" + key + "\"");
    return fallback;
  }
  const nlohmann::json& v = j[key];
  if (!v.is_number_integer()) throw UserError(source + ": field \"" + key + "\" must be an integer, got " + v.dump());
  return v.get<int64_t>();
}

double ConfigDouble(const nlohmann::json& j, const char* key, const std::string& source, double fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  const nlohmann::json& v = j[key];
  if (!v.is_number()) throw UserError(source + ": field \"" + key + "\" must be a number, got " + v.dump());
  return v.get<double>();
}

std::string StableFingerprint(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace distlm
