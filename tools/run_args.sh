#!/usr/bin/env bash
# The arguments `./distlm run` hands the main job, one per line (NUL-separated with -0).
#
#   tools/run_args.sh [-0] DEMO_FLAGFILE [USER_FLAGS...]
#
# The demo (DEMO_FLAGFILE: a tiny BERT on the demo sample, which visibly learns) is the
# default: its flags come first and each flag of the user's, after them, overrides the one of
# the same name (absl keeps the last value). It gives way only to the user's own data or model:
# a flag that names a data set, a task, a model or a flagfile of the user's drops the demo's
# flags altogether, since the demo's data and learning rate only fit the demo's model. Asking
# for help keeps them too (they change nothing there).
set -euo pipefail
format='%s\n'
if [ "${1:-}" = -0 ]; then
  format='%s\0'
  shift
fi
if [ $# -lt 1 ]; then
  echo "usage: tools/run_args.sh [-0] DEMO_FLAGFILE [USER_FLAGS...]" >&2
  exit 2
fi
demo=$1
shift

# Flags that say "my data or my model": with any of them the demo steps aside. --model_type
# only when it names another model than the demo's (bert).
own_data_or_model=(data_dir model_name_or_path task_name flagfile)

demo_applies=1
for arg in "$@"; do
  [ "$arg" = -- ] && break
  name=${arg#--}
  name=${name#-}
  value=""
  case "$name" in
    *=*) value=${name#*=} name=${name%%=*} ;;
  esac
  for flag in "${own_data_or_model[@]}"; do
    [ "$name" = "$flag" ] && demo_applies=0
  done
  if [ "$name" = model_type ] && [ "$value" != bert ]; then
    demo_applies=0
  fi
done

out=()
if [ "$demo_applies" = 1 ]; then
  out+=("--flagfile=$demo")
fi
out+=("$@")
if [ ${#out[@]} -gt 0 ]; then
  printf "$format" "${out[@]}"
fi
