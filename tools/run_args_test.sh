#!/usr/bin/env bash
# tools/run_args.sh: the demo's flags are defaults that the user's override one by one, and the
# demo gives way only to data or a model of the user's.
set -uo pipefail
run_args=$1
failures=0
# expect "USER ARGS" "WANTED OUTPUT (space-separated)"
expect() {
  local got
  # shellcheck disable=SC2086
  got=$("$run_args" demo.flags $1 | tr '\n' ' ' | sed 's/ $//')
  if [ "$got" = "$2" ]; then
    echo "OK      [$1] -> $got"
  else
    echo "NOT OK  [$1] -> '$got', wanted '$2'"
    failures=$((failures + 1))
  fi
}
expect "" "--flagfile=demo.flags"
expect "--num_train_epochs=5" "--flagfile=demo.flags --num_train_epochs=5"
expect "--output_dir=X --learning_rate=1e-3" "--flagfile=demo.flags --output_dir=X --learning_rate=1e-3"
expect "--model_type=bert" "--flagfile=demo.flags --model_type=bert"
expect "--helpfull" "--flagfile=demo.flags --helpfull"
expect "--data_dir=D" "--data_dir=D"
expect "--data_dir D --num_train_epochs=1" "--data_dir D --num_train_epochs=1"
expect "-model_name_or_path=M" "-model_name_or_path=M"
expect "--model_type=vit" "--model_type=vit"
expect "--task_name=rte" "--task_name=rte"
expect "--flagfile=mine.flags" "--flagfile=mine.flags"
# An argument with a space survives the NUL-separated form.
mapfile -d '' got < <("$run_args" -0 demo.flags "--output_dir=a b")
if [ "${#got[@]}" = 2 ] && [ "${got[1]}" = "--output_dir=a b" ]; then
  echo "OK      -0 keeps 'a b' whole"
else
  echo "NOT OK  -0 split 'a b': ${got[*]}"
  failures=$((failures + 1))
fi
"$run_args" >/dev/null 2>&1
if [ $? = 2 ]; then echo "OK      no arguments: exit 2"; else echo "NOT OK  no arguments should exit 2"; failures=$((failures + 1)); fi
exit $((failures > 0))
