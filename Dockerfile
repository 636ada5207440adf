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
# Not built by the test suite (it needs a Docker daemon and a registry); hadolint checks it.

FROM rust:1.95-slim-trixie AS build
WORKDIR /src
COPY . .
# The context has no .git (.dockerignore), so `delayq --version` names no commit ("unknown").
RUN cargo build --release --locked -p delayq-cli \
    && cp target/release/delayq /usr/local/bin/delayq

FROM debian:trixie-slim
RUN groupadd --system --gid 10001 delayq \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/delayq --create-home \
        --shell /usr/sbin/nologin delayq
COPY --from=build /usr/local/bin/delayq /usr/local/bin/delayq
USER 10001:10001
ENV DELAYQ_LISTEN=0.0.0.0:7070 \
    DELAYQ_DATA_DIR=/var/lib/delayq
VOLUME /var/lib/delayq
EXPOSE 7070
# SIGTERM (docker stop) stops it gracefully: open long-polls answer empty, in-flight
# requests finish. /healthz and /readyz answer without a token, for probes.
ENTRYPOINT ["delayq"]
CMD ["serve"]
