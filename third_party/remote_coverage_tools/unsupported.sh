#!/bin/sh
echo "bazel coverage is not supported in distlm's offline build" >&2
exit 1
