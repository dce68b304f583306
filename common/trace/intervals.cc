#include "common/trace/intervals.h"

#include <algorithm>

namespace distlm::trace {

std::vector<Interval> Union(std::vector<Interval> spans) {
  spans.erase(std::remove_if(spans.begin(), spans.end(), [](const Interval& s) { return s.end <= s.begin; }),
              spans.end());
  std::sort(spans.begin(), spans.end(),
            [](const Interval& x, const Interval& y) { return x.begin < y.begin || (x.begin == y.begin && x.end < y.end); });
  std::vector<Interval> out;
  for (const Interval& s : spans) {
    if (!out.empty() && s.begin <= out.back().end) {
      out.back().end = std::max(out.back().end, s.end);
    } else {
      out.push_back(s);
    }
  }
  return out;
}

std::vector<Interval> Intersect(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t begin = std::max(a[i].begin, b[j].begin), end = std::min(a[i].end, b[j].end);
    if (begin < end) out.push_back({begin, end});
    // The one that ends first can meet nothing further on.
    if (a[i].end < b[j].end) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

std::vector<Interval> Subtract(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> out;
  size_t j = 0;
  for (const Interval& s : a) {
    int64_t from = s.begin;
    while (j < b.size() && b[j].end <= from) ++j;
    for (size_t k = j; k < b.size() && b[k].begin < s.end; ++k) {
      if (b[k].begin > from) out.push_back({from, b[k].begin});
      from = std::max(from, b[k].end);
    }
    if (from < s.end) out.push_back({from, s.end});
  }
  return out;
}

int64_t Length(const std::vector<Interval>& u) {
  int64_t n = 0;
  for (const Interval& s : u) n += s.end - s.begin;
  return n;
}

std::vector<Interval> UnionWithin(const std::vector<Interval>& spans, Interval window) {
  std::vector<Interval> cut;
  for (const Interval& s : spans) cut.push_back({std::max(s.begin, window.begin), std::min(s.end, window.end)});
  return Union(std::move(cut));
}

}  // namespace distlm::trace
