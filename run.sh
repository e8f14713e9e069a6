#!/usr/bin/env bash
# Sets up .venv (once per requirements.txt) and dispatches subcommands.
#   ./run.sh                 the demo: offline digits -> shards -> train -> evaluate -> export -> predict
#   ./run.sh test [ARGS]     the test suite (ARGS go to pytest)
#   ./run.sh faces [--lfw_dir=ROOT]   the face-pair demo (synthetic faces unless --lfw_dir)
#   ./run.sh prepare ...     python -m input_fns.prepare ...
#   ./run.sh trainer ...     python -m trainer.main ...
#   ./run.sh cluster ...     python -m trainer.local_cluster ...: chief, workers, ps, evaluator on loopback
#   ./run.sh bench [ARGS]    the input-pipeline benchmark (python -m benchmarks.input_bench)
#   ./run.sh python ...      the venv's python
set -euo pipefail
cd "$(dirname "$0")"

venv=.venv
python_for_venv=${PYTHON:-python3.11}
stamp="$venv/.requirements.sha256"

if [ ! -x "$venv/bin/python" ]; then
  if ! command -v "$python_for_venv" >/dev/null 2>&1; then
    echo "run.sh: $python_for_venv not found; install Python 3.11 or set PYTHON=/path/to/python3.11" >&2
    exit 2
  fi
  echo "run.sh: creating $venv with $python_for_venv" >&2
  "$python_for_venv" -m venv "$venv"
fi

wanted=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  echo "run.sh: installing pinned requirements into $venv (once)" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements.txt
  echo "$wanted" > "$stamp"
fi

py="$venv/bin/python"
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-1}
command=${1:-demo}
[ $# -gt 0 ] && shift
case "$command" in
  demo)    exec "$py" -m demos.digits "$@" ;;
  faces)   exec "$py" -m demos.faces "$@" ;;
  test)    exec "$py" -m pytest "$@" ;;  # pytest.ini: testpaths = tests
  prepare) exec "$py" -m input_fns.prepare "$@" ;;
  trainer) exec "$py" -m trainer.main "$@" ;;
  cluster) exec "$py" -m trainer.local_cluster "$@" ;;
  bench)   exec "$py" -m benchmarks.input_bench "$@" ;;
  python)  exec "$py" "$@" ;;
  *) echo "run.sh: unknown command '$command' (use: demo, faces, test, prepare, trainer, cluster, bench, python)" >&2; exit 2 ;;
esac
