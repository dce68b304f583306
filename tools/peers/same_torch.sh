# Sourced by compare_step.sh and compare_common.sh (compare_ddp.sh, compare_fsdp.sh): whether a
# distlm binary and the peer's Python load the same libtorch_cpu (a timing comparison means
# little otherwise).
#   same_torch SCRIPT BINARY PYTHON HINT   prints true or false; warns on stderr when false.
# The libtorch_cpu a binary or the peer's torch loads, resolved (empty if ldd cannot tell).
torch_cpu_of() { { ldd "$1" 2>/dev/null || true; } | awk '/libtorch_cpu/ { print $3; exit }' | xargs -r readlink -f; }
same_torch() {
  local script=$1 binary=$2 python=$3 hint=$4 cpp_lib peer_lib
  cpp_lib=$(torch_cpu_of "$binary")
  peer_lib=$(torch_cpu_of "$("$python" -c 'import torch._C; print(torch._C.__file__)' || true)")
  if [ -n "$cpp_lib" ] && [ "$cpp_lib" = "$peer_lib" ]; then echo true; return; fi
  echo "$script: WARNING: $binary loads ${cpp_lib:-an unknown libtorch_cpu}, the peer ${peer_lib:-an unknown one}: not the same torch ($hint)" >&2
  echo false
}
