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
RUN python3 -m venv /opt/restarter
COPY pyproject.toml README.md /src/
COPY src /src/src
# Then drop what never runs: the Kubernetes client's asyncio copy (kubernetes.aio, 68 MB;
# restarter uses the sync client and kopf its own) and the installers.
RUN /opt/restarter/bin/pip install --no-cache-dir --disable-pip-version-check /src \
 && rm -rf /opt/restarter/lib/python3*/site-packages/kubernetes/aio \
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
