#!/usr/bin/env bash
# Regenerates the screenshots of the dashboard in docs/dashboard.md, docs/ui/overview.png and
# docs/ui/topic.png. They are taken by the browser test (crates/server/tests/ui.rs: headless
# Chromium through chromedriver, a 1280x900 window), which writes them into the directory
# DELAYQ_UI_DOCS names, so the project has one browser driver. Needs chromium and
# chromedriver (scripts/test.sh installs them on Debian), or DELAYQ_CHROMIUM and
# DELAYQ_CHROMEDRIVER.
set -euo pipefail
cd "$(dirname "$0")/.."

mkdir -p docs/ui
DELAYQ_UI_DOCS="$PWD/docs/ui" cargo test --locked -p delayq-server --test ui
for png in docs/ui/overview.png docs/ui/topic.png; do
  size=$(wc -c <"$png")
  echo "$png: $size bytes"
  # The docs' images stay small: a page of the dashboard is mostly flat colour.
  if [ "$size" -gt 204800 ]; then
    echo "$png is over 200 KiB; keep the window size and the page simple" >&2
    exit 1
  fi
done
