# The trainer's image: `python -m trainer.main` with the pinned CPU set, or the GPU set:
#   docker build -t trainer .                          # requirements.txt (tensorflow-cpu)
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
 && /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check --no-deps \
      -r /tmp/requirements-serving.txt

FROM ${PYTHON_IMAGE}
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
COPY common/ common/
COPY input_fns/ input_fns/
COPY models/ models/
COPY trainer/ trainer/
COPY recipes/ recipes/
RUN useradd --create-home --uid 1000 trainer
USER trainer
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=1
ENTRYPOINT ["python", "-m", "trainer.main"]
