# restarter's image: the app in a virtualenv on a Python base, run as uid 10001.
#   docker build -t registry.example.com/platform/restarter:0.1.0 .
# BASE is any image with python3 (with its venv module) and useradd: the default is the
# official slim Python; hack/build-image.sh passes a Debian bookworm made from Debian's
# packages, since these machines reach no container registry.
ARG BASE=python:3.11-slim

FROM ${BASE} AS build
# Only for builders behind a TLS-inspecting proxy: a CA bundle for pip, mounted by the builder
# (hack/build-image.sh does); unset, pip uses its own. Neither stays in the image.
ARG PIP_CERT
# Dependencies exactly as locked (uv.lock's export; hack/lock.sh): pip refuses any file whose
# sha256 is not in it, and --no-deps lets nothing in that the lock does not name.
RUN python3 -m venv /opt/restarter
COPY requirements/runtime.txt requirements/build.txt /src/requirements/
RUN /opt/restarter/bin/pip install --no-cache-dir --disable-pip-version-check \
      --require-hashes --no-deps --only-binary :all: -r /src/requirements/runtime.txt
# restarter's own wheel, built by the locked build backend in a throwaway venv, then installed
# without dependencies (they are all in already).
COPY pyproject.toml README.md /src/
COPY src /src/src
RUN python3 -m venv /opt/build \
 && /opt/build/bin/pip install --no-cache-dir --disable-pip-version-check \
      --require-hashes --no-deps --only-binary :all: -r /src/requirements/build.txt \
 && /opt/build/bin/pip wheel --no-cache-dir --disable-pip-version-check \
      --no-deps --no-build-isolation --wheel-dir /opt/wheels /src \
 && /opt/restarter/bin/pip install --no-cache-dir --disable-pip-version-check \
      --no-deps --no-index /opt/wheels/restarter-*.whl
# Then drop what never runs: the Kubernetes client's asyncio copy (kubernetes.aio, 68 MB;
# restarter uses the sync client and kopf its own) and the installers.
RUN rm -rf /opt/restarter/lib/python3*/site-packages/kubernetes/aio \
 && /opt/restarter/bin/python -m pip uninstall --yes --quiet pip setuptools

FROM ${BASE}
RUN useradd --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin restarter
COPY --from=build /opt/restarter /opt/restarter
# MALLOC_ARENA_MAX=2: glibc gives each of the operator's threads (stamps, restarts, streams)
# a malloc arena of its own by default, and memory freed after a burst stays in them:
# peak RSS 294 MB instead of 400 MB for a 1 000-dependent fan-out (docs/benchmarks.md).
ENV PATH=/opt/restarter/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MALLOC_ARENA_MAX=2
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["restarter"]
CMD ["--liveness", "http://0.0.0.0:8080/healthz"]
