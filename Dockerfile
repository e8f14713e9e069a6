# The trainer's image: `python -m trainer.main` under tini, with the run-time pinned set only
# (no tests, no demo data, no build tools), from the CPU set or the GPU set:
#   docker build -t trainer .                               # requirements.txt (tensorflow-cpu)
#   docker build -t trainer-gpu --build-arg VARIANT=gpu .   # requirements-gpu.txt
#   docker run --rm trainer --mode=train --model_dir=gs://BUCKET/run --train_files=...
# The venv is built in a first stage and copied over alone: no pip cache or build files.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ARG VARIANT=cpu
COPY requirements.txt requirements-gpu.txt requirements-serving.txt /tmp/
RUN case "$VARIANT" in \
      cpu) requirements=/tmp/requirements.txt ;; \
      gpu) requirements=/tmp/requirements-gpu.txt ;; \
      *) echo "VARIANT=$VARIANT: use cpu or gpu" >&2; exit 2 ;; \
    esac \
 && python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check -r "$requirements" \
 && /opt/venv/bin/pip check --disable-pip-version-check \
 && /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check --no-deps \
      -r /tmp/requirements-serving.txt
# tensorflow-serving-api after pip check: it requires `tensorflow` by name, which tensorflow-cpu
# provides only as a module (BUILD.md, "TF Serving's protos").
# Never used at run time: TensorFlow's C++ headers (for compiling custom ops), libclang (a
# build-time dependency of TensorFlow's wheel; nothing imports it), and pip (nothing is
# installed into the image later). setuptools stays: `tensorboard` imports its pkg_resources.
RUN rm -rf /opt/venv/lib/python3.*/site-packages/tensorflow/include \
 && /opt/venv/bin/python -m pip uninstall --yes --quiet --disable-pip-version-check \
      libclang pip

FROM ${PYTHON_IMAGE}
# tini is pid 1: the kernel gives pid 1 no default signal handling and nobody else reaps
# orphaned children, so tini passes SIGTERM on to the trainer and reaps.
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends tini \
 && apt-get clean && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
COPY common/ common/
COPY features/ features/
COPY input_fns/ input_fns/
COPY models/ models/
COPY trainer/ trainer/
COPY recipes/ recipes/
RUN useradd --create-home --uid 1000 trainer
USER trainer
# pkg_resources warns on import that it is deprecated; tensorboard 2.15 needs it all the same.
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=1 \
    PYTHONWARNINGS="ignore:pkg_resources is deprecated as an API:UserWarning"
ENTRYPOINT ["tini", "--", "python", "-m", "trainer.main"]
