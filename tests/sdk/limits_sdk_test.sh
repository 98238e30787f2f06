#!/usr/bin/env bash
# sg-fakemodel's limits read by the providers' own clients: the official
# openai and @anthropic-ai/sdk SDKs (pinned in package.json, installed by
# scripts/setup.sh), with their retries on, against the rate limiter's
# 429s in either style (retry-after-ms, retry-after) and an upstream that
# fails N times then recovers; limits_check.mjs prints one ok/FAIL line
# per check.
# Usage: limits_sdk_test.sh SG_FAKEMODEL
set -u
FM=$1
. "$(dirname "$0")/../integration/fakemodel_lib.sh"
. "$(dirname "$0")/sdk_lib.sh"
sdk_require openai @anthropic-ai/sdk
fm_start "$FM"
sdk_run 20 limits_check.mjs "http://127.0.0.1:$FM_PORT"
fm_finish
