// Reading what a graded run logged (train_log.jsonl), trusting nothing about it: a submission
// writes this file, so a line may be anything (not JSON, a JSON array, an object whose numbers
// are strings, null for NaN, huge, nested, duplicated keys, invalid UTF-8). Nothing here throws
// on what the file holds; tools/fuzz/run_fuzzers.sh fuzzes it (train_log_fuzzer.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace distlm::grading {

// The lines of `text` that are JSON objects, in order; every other non-empty line goes to
// *bad, cut to 200 bytes.
void ParseTrainLog(const std::string& text, std::vector<nlohmann::json>* log, std::vector<std::string>* bad);

// A number the run logged under `key`: NaN when it is missing, null (a non-finite float is
// logged as null), or not a number.
double NumberField(const nlohmann::json& line, const std::string& key);
// The sum over the lines of the finite numbers logged under `key` (others count 0).
double SumOfField(const std::vector<nlohmann::json>& log, const std::string& key);
// An integer the run logged under `key`: -1 when it is missing, not an integer or past int64.
int64_t IntegerField(const nlohmann::json& line, const std::string& key);

// The collectives a log line's "comm_ops" object records, as "allreduce x41, gather x2"
// ("no collective at all" for an empty object); values that are not counts show as "?". At
// most 300 bytes, printable (text.h).
std::string DescribeOps(const nlohmann::json& ops);

// "" when every update's "comm_ops" holds each of `required` and none of `forbidden`; else the
// first update that does not, in words ("update 1 called allreduce x41").
std::string CollectivesProblem(const std::vector<nlohmann::json>& log, const std::vector<std::string>& required,
                               const std::vector<std::string>& forbidden);

}  // namespace distlm::grading
