#include "task3/ddp_flags.h"

#include "absl/flags/flag.h"
#include "common/runtime/errors.h"

ABSL_FLAG(std::string, ddp, "buckets",
          "task3: which of your DistributedDataParallel versions trains: buckets (3b) or per_parameter (3a)");
ABSL_FLAG(double, bucket_cap_mb, 25, "task3: the bucket size cap of --ddp=buckets, in MiB (PyTorch's bucket_cap_mb)");
ABSL_FLAG(bool, ddp_unused_parameter, false,
          "task3: also hand your DDP a parameter that takes no part in the loss (named "
          "'unused_by_the_loss.weight'); your FinishGradientSync must then fail naming it. For the "
          "local tests and the grader: a run with it exits with that error");

ABSL_FLAG(std::string, embedding_sync, "dense",
          "task3: how the word embedding's gradient is averaged: dense (inside your DDP, as every other "
          "parameter) or rows (outside it, only the rows some rank's batch touched: the same average for "
          "fewer bytes; see task3/embedding_row_sync.h)");

namespace distlm::task3 {

DdpFlags DdpFlagsFromCommandLine() {
  DdpFlags f;
  f.kind = absl::GetFlag(FLAGS_ddp);
  f.bucket_cap_mb = absl::GetFlag(FLAGS_bucket_cap_mb);
  f.unused_parameter = absl::GetFlag(FLAGS_ddp_unused_parameter);
  const std::string embedding = absl::GetFlag(FLAGS_embedding_sync);
  if (embedding != "dense" && embedding != "rows") {
    throw UserError("--embedding_sync=" + embedding + " is not a way to sync the embedding: use dense or rows");
  }
  f.embedding_rows = embedding == "rows";
  if (f.kind != "buckets" && f.kind != "per_parameter") {
    throw UserError("--ddp=" + f.kind + " is not a DDP version: use buckets (3b) or per_parameter (3a)");
  }
  if (f.kind == "buckets" && (!(f.bucket_cap_mb > 0) || f.bucket_cap_mb > 1e6)) {
    throw UserError("--bucket_cap_mb=" + std::to_string(f.bucket_cap_mb) + " must be a positive size in MiB");
  }
  return f;
}

}  // namespace distlm::task3
