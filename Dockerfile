# delayq server image: `docker build -t delayq .`, then
#   docker run -p 127.0.0.1:7070:7070 -v delayq-data:/var/lib/delayq delayq
#
# Multi-stage: the Rust toolchain image builds the binary; a slim Debian image runs it as
# the non-root user delayq (uid 10001), its data in the volume /var/lib/delayq.
#
# Inside the container the server listens on 0.0.0.0:7070, so that a published port
# reaches it. Without tokens anyone who reaches that port can use the queue: publish it on
# loopback only (as above), or set DELAYQ_TOKENS (at least 16 characters each) and either
# give the server a certificate (DELAYQ_TLS_CERT and DELAYQ_TLS_KEY: files mounted
# read-only, readable by uid 10001) or put a TLS proxy in front; with tokens and no TLS
# the server warns at start that they cross the network in clear. Every setting is a
# DELAYQ_* variable (`docker run --rm delayq serve --help`).
#
# A HEALTHCHECK runs `delayq health` (exit 0 when /readyz answers 200). It asks
# http://127.0.0.1:7070: with another port in DELAYQ_LISTEN, or with DELAYQ_TLS_CERT set,
# also set DELAYQ_SERVER (https://<a name in the certificate>:7070, and DELAYQ_CA_CERT for a
# self-signed one), or docker marks the container unhealthy.
#
# Not built by the test suite (it needs a Docker daemon and a registry); hadolint checks it.

# cargo-chef builds the dependencies alone, from the manifests and Cargo.lock (its
# recipe.json), as a layer of their own: a change to delayq's sources rebuilds delayq only.
FROM rust:1.95-slim-trixie AS chef
RUN cargo install cargo-chef --locked --version 0.1.77
WORKDIR /src

FROM chef AS plan
COPY . .
RUN cargo chef prepare --recipe-path recipe.json

FROM chef AS build
COPY --from=plan /src/recipe.json recipe.json
RUN cargo chef cook --release --locked -p delayq-cli --recipe-path recipe.json
COPY . .
# The context has no .git (.dockerignore), so `delayq --version` names no commit ("unknown").
RUN cargo build --release --locked -p delayq-cli \
    && cp target/release/delayq /usr/local/bin/delayq

FROM debian:trixie-slim
# The system's certificate authorities: rediss://, amqps://, https:// webhooks and
# PostgreSQL's verify-full check servers against them. Unpinned on purpose: the image should
# get Debian's current list of authorities when it is built.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 delayq \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/delayq --create-home \
        --shell /usr/sbin/nologin delayq
COPY --from=build /usr/local/bin/delayq /usr/local/bin/delayq
USER 10001:10001
ENV DELAYQ_LISTEN=0.0.0.0:7070 \
    DELAYQ_DATA_DIR=/var/lib/delayq
VOLUME /var/lib/delayq
EXPOSE 7070
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["delayq", "health", "--timeout", "4s"]
# SIGTERM (docker stop) stops it gracefully: open long-polls answer empty, in-flight
# requests finish. /healthz and /readyz answer without a token, for probes.
ENTRYPOINT ["delayq"]
CMD ["serve"]
