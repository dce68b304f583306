#!/usr/bin/env bash
# Builds delay_holder outside Bazel (needs: apt-get install libnetfilter-queue-dev).
set -euo pipefail
cd "$(dirname "$0")"
g++ -std=c++17 -O2 -Wall -Wextra -pthread -o delay_holder delay_holder.cc -lnetfilter_queue -lnfnetlink
