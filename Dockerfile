# One image, every role: `nfd master`, `nfd worker`, `nfd device-plugin`, `nfd discover`.

# -- build: wheels for nfd and everything it needs ----------------------------------------
FROM python:3.11.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY nfd ./nfd
RUN pip wheel --wheel-dir /wheels .

# -- run -------------------------------------------------------------------------------
FROM python:3.11.11-slim-bookworm
# Bytecode is compiled at install time: the root filesystem is read-only at run time.
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /wheels /wheels
# pip >= 25.2 writes an `nfd` script that does not import re: a tenth of `nfd discover`.
RUN pip install --upgrade 'pip>=25.2' \
    && pip install --no-index --find-links=/wheels --compile nfd \
    && rm -rf /wheels \
    && nfd --version
# A fixed numeric non-root user, so runAsNonRoot can be checked by the kubelet.
USER 65532:65532
ENTRYPOINT ["nfd"]
CMD ["discover"]
