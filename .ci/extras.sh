#!/usr/bin/env bash
# Each extra alone, in a clean virtual environment (no system site-packages), runs one
# command that needs it: the extra must carry everything its commands import.
#   bash .ci/extras.sh [EXTRA ...]     (default: the base install, plot, run, test)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PIP_DISABLE_PIP_VERSION_CHECK=1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
EXTRAS=("$@")
[ ${#EXTRAS[@]} -gt 0 ] || EXTRAS=(base plot run test)

check() {  # extra, then the command to run inside its venv
  local extra=$1; shift
  local venv="$WORK/$extra"
  python -m venv "$venv"
  local spec="$ROOT"
  [ "$extra" = base ] || spec="$ROOT[$extra]"
  local t0=$SECONDS
  "$venv/bin/pip" install -q "$spec"
  # run from an empty folder: the installed package, not the checkout, is what runs
  (cd "$WORK" && PATH="$venv/bin:$PATH" "$@") > "$WORK/$extra.log" 2>&1 || {
    echo "extra '$extra': the command failed:"; tail -20 "$WORK/$extra.log"; return 1; }
  echo "extra '$extra': ok ($((SECONDS - t0)) s): $*"
}

for extra in "${EXTRAS[@]}"; do
  case $extra in
    base) check base meshplan plan --model llama3.1-8b --gpus 16xH100-SXM-80GB --seq-len 4096 \
            --global-batch 64 --rerank 0 ;;
    plot) check plot meshplan simulate --model llama3.1-8b --gpus 16xH100-SXM-80GB \
            --seq-len 4096 --global-batch 64 --dp 4 --pp 4 --png "$WORK/timeline.png" ;;
    # a pipeline-parallel run: torch's object send/recv needs numpy
    run) check run meshplan run --pp 2 --steps 1 --device cpu ;;
    test) check test python -m pytest -q -p no:cacheprovider "$ROOT/tests/test_plan.py" ;;
    *) echo "unknown extra $extra"; exit 2 ;;
  esac
done
