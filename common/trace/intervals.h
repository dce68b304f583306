// Interval arithmetic for timelines: unions, intersections and their lengths, over half-open
// spans [begin, end) of one clock (nanoseconds). What the overlap analysis of a trace is made of
// (common/trace/overlap.h), kept apart and free of LibTorch so that it is tested on its own.
#pragma once

#include <cstdint>
#include <vector>

namespace distlm::trace {

struct Interval {
  int64_t begin = 0;
  int64_t end = 0;  // exclusive; an interval with end <= begin is empty
};

// Sorted, disjoint, non-empty intervals covering exactly what `spans` cover (empty ones dropped).
std::vector<Interval> Union(std::vector<Interval> spans);

// What `a` and `b` both cover; both must be unions (sorted, disjoint).
std::vector<Interval> Intersect(const std::vector<Interval>& a, const std::vector<Interval>& b);

// What `a` covers and `b` does not; both must be unions.
std::vector<Interval> Subtract(const std::vector<Interval>& a, const std::vector<Interval>& b);

// The total length of a union (sorted, disjoint).
int64_t Length(const std::vector<Interval>& u);

// `spans` cut to `window` (those outside it dropped), then their union.
std::vector<Interval> UnionWithin(const std::vector<Interval>& spans, Interval window);

}  // namespace distlm::trace
