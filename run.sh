#!/usr/bin/env bash
# Sets up .venv (once per pinned set) and dispatches subcommands.
#   TF_VARIANT=cpu|gpu chooses requirements.txt or requirements-gpu.txt (default: gpu when
#   `nvidia-smi -L` finds a GPU); switching variants rebuilds .venv.
#   ./run.sh                 the demo: offline digits -> shards -> train -> evaluate -> export -> predict
#   ./run.sh test [ARGS]     the test suite (ARGS go to pytest)
#   ./run.sh test-slow [ARGS]   the slow end-to-end tests (sweeps, the bench), which CI runs too
#   ./run.sh test-store-faults [ARGS]   the whole flow on s3:// and gs:// under each store fault mix
#                            (about an hour on 2 cores; CI runs only errors-5%, in test-slow)
#   ./run.sh test-container [--scenarios=a,b,c,d]   the image built and a TFJob run as containers
#                            the way the training operator runs it (needs a docker daemon)
#   ./run.sh faces [--lfw_dir=ROOT]   the face-pair demo (synthetic faces unless --lfw_dir)
#   ./run.sh tabular         the table demo: a CSV (scikit-learn's breast cancer data) -> prepare csv
#                            -> each canned model -> eval job -> export -> predict (offline)
#   ./run.sh digit_photos --output_dir=ROOT   the offline digits as PNG class folders, for
#                            `prepare images` (python -m demos.digit_photos)
#   ./run.sh prepare ...     python -m input_fns.prepare ...
#   ./run.sh trainer ...     python -m trainer.main ...
#   ./run.sh cluster ...     python -m trainer.cluster.local_cluster ...: chief, workers, ps, evaluator on loopback
#   ./run.sh status --model_dir=M [--format=json]   where a run stands: steps, checkpoints, eval jobs, exports
#   ./run.sh bench [ARGS]    the input-pipeline benchmark (python -m benchmarks.input_bench)
#   ./run.sh deploy tfjob|katib|vertex ...   print a Kubeflow TFJob, Katib Experiment or Vertex AI job
#                            (python -m trainer.deploy)
#   ./run.sh sweep --study_dir=DIR --trials=N --param=... --objective=... -- TRAINER_FLAGS
#                            a local Optuna sweep (python -m tools.sweep; installs requirements-sweep.txt)
#   ./run.sh screenshots --model_dir=M [--output_dir=docs]   TensorBoard dashboards in headless Chromium
#   ./run.sh serving-loader --saved_model=EXPORT_DIR [--examples=F] [--rest_body=F]   an export
#                            loaded and run by TF Serving's C++ loader (python -m
#                            tools.serving_loader; needs g++)
#   ./run.sh python ...      the venv's python
# Run from any folder: every command but the tests takes relative paths from the caller's.
set -euo pipefail
caller_dir=$PWD  # where the user's relative paths point
cd "$(dirname "$0")"
repo_dir=$PWD

venv=.venv
python_for_venv=${PYTHON:-python3.11}
stamp="$venv/.requirements.sha256"
variant_stamp="$venv/.tf_variant"

# Which pinned set: TF_VARIANT=cpu|gpu, else the GPU set when an NVIDIA GPU is visible.
variant=${TF_VARIANT:-}
if [ -z "$variant" ]; then
  variant=cpu
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then variant=gpu; fi
fi
case "$variant" in
  cpu) requirements=requirements.txt ;;
  gpu) requirements=requirements-gpu.txt ;;
  *) echo "run.sh: TF_VARIANT=$variant: use cpu or gpu" >&2; exit 2 ;;
esac

# tensorflow-cpu and tensorflow[and-cuda] install the same module: switching rebuilds the venv.
installed_variant=$(cat "$variant_stamp" 2>/dev/null || echo cpu)  # older venvs: the CPU set
if [ -x "$venv/bin/python" ] && [ "$installed_variant" != "$variant" ]; then
  echo "run.sh: $venv has the $installed_variant set; rebuilding it with the $variant set" >&2
  rm -rf "$venv"
fi

if [ ! -x "$venv/bin/python" ]; then
  if ! command -v "$python_for_venv" >/dev/null 2>&1; then
    echo "run.sh: $python_for_venv not found; install Python 3.11 or set PYTHON=/path/to/python3.11" >&2
    exit 2
  fi
  echo "run.sh: creating $venv with $python_for_venv" >&2
  "$python_for_venv" -m venv "$venv"
fi

py="$repo_dir/$venv/bin/python"
# pip install -r FILE into the venv unless the stamp says this exact file is installed.
install_pinned() {  # FILE STAMP [PIP OPTIONS]
  local wanted
  wanted=$(sha256sum "$1" | cut -d' ' -f1)
  if [ "$(cat "$2" 2>/dev/null)" != "$wanted" ]; then
    echo "run.sh: installing pinned $1 into $venv (once)" >&2
    "$py" -m pip install --quiet --disable-pip-version-check "${@:3}" -r "$1"
    echo "$wanted" > "$2"
  fi
}
install_pinned "$requirements" "$stamp"  # the run-time set, the image's too
# --no-deps: tensorflow-serving-api requires `tensorflow` by name (see requirements-serving.txt).
install_pinned requirements-serving.txt "$venv/.requirements-serving.sha256" --no-deps
echo "$variant" > "$variant_stamp"
# The offline demo's data (scikit-learn) only where the digits demo runs, and the test-only set
# only for the tests (which prepare the digits too); neither is in the image.
case "${1:-demo}" in
  demo|tabular|digit_photos) install_pinned requirements-demo.txt "$venv/.requirements-demo.sha256" ;;
  prepare) [[ " $* " != *" digits "* ]] \
    || install_pinned requirements-demo.txt "$venv/.requirements-demo.sha256" ;;
  test|test-slow|test-store-faults)  # the tests prepare the digits and run small sweeps too
    install_pinned requirements-demo.txt "$venv/.requirements-demo.sha256"
    install_pinned requirements-test.txt "$venv/.requirements-test.sha256"
    install_pinned requirements-sweep.txt "$venv/.requirements-sweep.sha256" ;;
  test-container) install_pinned requirements-test.txt "$venv/.requirements-test.sha256" ;;
  sweep) install_pinned requirements-sweep.txt "$venv/.requirements-sweep.sha256" ;;  # Optuna
esac
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-1}
command=${1:-demo}
[ $# -gt 0 ] && shift
# Every command but the tests runs in the caller's directory, so `~/svc/run.sh prepare csv
# --source=sales.csv` reads ./sales.csv. The service's packages come from PYTHONPATH, and
# PYTHONSAFEPATH keeps a folder of the caller's named models/ or trainer/ from shadowing them
# (inherited by the processes the trainer, cluster and sweep start).
case "$command" in
  test|test-slow|test-store-faults|test-container) ;;
  *) cd "$caller_dir"
     export PYTHONPATH="$repo_dir${PYTHONPATH:+:$PYTHONPATH}"
     [ "$command" = python ] || export PYTHONSAFEPATH=1 ;;  # a script's own folder stays first
esac
case "$command" in
  demo)    exec "$py" -m demos.digits "$@" ;;
  faces)   exec "$py" -m demos.faces "$@" ;;
  tabular) exec "$py" -m demos.tabular "$@" ;;
  digit_photos) exec "$py" -m demos.digit_photos "$@" ;;
  # pytest.ini: testpaths = tests, not the slow ones. A test file per worker, one per core (at
  # most 4): most of a test is TensorFlow starting in a subprocess, one core's work. -n 0: serial.
  test)    exec "$py" -m pytest -n auto --maxprocesses=4 --dist loadfile "$@" ;;
  test-slow) exec "$py" -m pytest -m slow "$@" ;;
  test-store-faults) exec "$py" -m pytest -m store_faults "$@" ;;
  test-container) exec "$py" -m tests.containers.scenarios "$@" ;;
  prepare) exec "$py" -m input_fns.prepare "$@" ;;
  trainer) exec "$py" -m trainer.main "$@" ;;
  cluster) exec "$py" -m trainer.cluster.local_cluster "$@" ;;
  bench)   exec "$py" -m benchmarks.input_bench "$@" ;;
  deploy)  exec "$py" -m trainer.deploy "$@" ;;
  screenshots) exec "$py" -m tools.screenshots "$@" ;;
  serving-loader) exec "$py" -m tools.serving_loader "$@" ;;
  sweep)   exec "$py" -m tools.sweep "$@" ;;
  status)  exec "$py" -m trainer.observe.status "$@" ;;
  python)  exec "$py" "$@" ;;
  *) echo "run.sh: unknown command '$command' (use: demo, faces, tabular, digit_photos, test, test-container, prepare, trainer, cluster, status, bench, screenshots, serving-loader, deploy, sweep, test-slow, test-store-faults, python)" >&2; exit 2 ;;
esac
