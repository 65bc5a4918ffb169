# One image, every role: `nfd master`, `nfd worker`, `nfd device-plugin`, `nfd discover`.
#
# BASE is any Debian-like image with `python` (3.11+) and `pip` on PATH: the official
# python image by default; scripts/image_test.py builds a stand-in from Debian packages.
ARG BASE=python:3.11.11-slim-bookworm

# -- deps: the pinned dependencies as wheels (only requirements-image.txt invalidates it) --
FROM ${BASE} AS deps
# pip >= 25.2 writes an `nfd` script that does not import re: a tenth of `nfd discover`.
# It runs from its wheel, so no stage upgrades the base's own pip.
ARG PIP_VERSION=26.3
ARG SETUPTOOLS_VERSION=84.2.1
# A CA bundle for pip behind a TLS-inspecting proxy (a bind-mounted file; never saved).
ARG PIP_CERT
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
COPY requirements-image.txt /src/
RUN pip download --no-deps --only-binary=:all: --dest /tools \
        "pip==${PIP_VERSION}" "setuptools==${SETUPTOOLS_VERSION}" \
    && ln -s "pip-${PIP_VERSION}-py3-none-any.whl" /tools/pip.whl \
    && python /tools/pip.whl/pip download --no-deps --only-binary=:all: --dest /wheels \
        --requirement /src/requirements-image.txt

# -- build: nfd's own wheel, offline -----------------------------------------------------
FROM deps AS build
COPY pyproject.toml README.md LICENSE /src/
COPY nfd /src/nfd
RUN python /tools/pip.whl/pip wheel --no-deps --no-index --find-links=/tools --wheel-dir=/dist /src \
    && cd /dist && sha256sum nfd-*.whl > SHA256SUMS

# -- run -------------------------------------------------------------------------------
FROM ${BASE}
# Wheels come from the other stages through bind mounts, so no layer keeps them, and
# nothing is downloaded here. Dependencies first: a code edit reuses this layer. (Each
# RUN mounts only stages that change when its own cache entry does: podman 4.3's buildah
# cannot mount a stage it took from its cache, containers/buildah#4375.)
RUN --mount=type=bind,from=deps,source=/tools,target=/tools \
    --mount=type=bind,from=deps,source=/wheels,target=/wheels \
    --mount=type=bind,from=deps,source=/src,target=/src \
    python /tools/pip.whl/pip install --no-cache-dir --disable-pip-version-check --root-user-action=ignore \
        --no-index --find-links=/wheels --compile --requirement /src/requirements-image.txt
# The wheel's digest is copied first so that a changed wheel changes this layer's parent:
# a builder may key the cache of a RUN on its text alone, not on what it mounts.
COPY --from=build /dist/SHA256SUMS /usr/share/doc/nfd/
RUN --mount=type=bind,from=build,source=/tools,target=/tools \
    --mount=type=bind,from=build,source=/wheels,target=/wheels \
    --mount=type=bind,from=build,source=/dist,target=/dist \
    python /tools/pip.whl/pip install --no-cache-dir --disable-pip-version-check --root-user-action=ignore \
        --no-index --find-links=/wheels --compile /dist/nfd-*.whl \
    && nfd --version
# Bytecode was compiled at install time: the root filesystem is read-only at run time.
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY LICENSE /usr/share/doc/nfd/
# A fixed numeric non-root user, so runAsNonRoot can be checked by the kubelet.
USER 65532:65532
ENTRYPOINT ["nfd"]
CMD ["discover"]

ARG BASE
ARG VERSION=unknown
ARG REVISION=unknown
LABEL org.opencontainers.image.title="nfd" \
      org.opencontainers.image.description="Node Feature Discovery for Kubernetes: node labels, extended resources and device plugins" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="${BASE}"
