# Ferry's container image (docs/container.md). Multi-stage: the Go toolchain
# builds the binary (cgo: the native plugin loader), a minimal base with glibc runs it as a
# non-root user. The base images are build arguments, so a mirror or a local image can
# stand in for each:
#
#   docker build -t ferry .
#   docker run -v ferry-data:/var/lib/ferry -p 127.0.0.1:8081:8081 ferry
#
# BIN_IMAGE skips the build stage: an image holding a built binary at /out/ferry and an
# empty /out/data (scripts/container.sh builds one from the CI's own binary).
ARG GO_IMAGE=docker.io/library/golang:1.26-bookworm
ARG RUN_IMAGE=gcr.io/distroless/base-debian12:nonroot
ARG BIN_IMAGE=build

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=1 go build -trimpath -ldflags "-X main.Version=$(cat VERSION)" -o /out/ferry ./cmd/ferry \
 && mkdir -p /out/data

FROM ${BIN_IMAGE} AS bin

FROM ${RUN_IMAGE}
COPY --from=bin /out/ferry /usr/local/bin/ferry
COPY deploy/container/config.toml /etc/ferry/config.toml
COPY deploy/container/connectors/ /etc/ferry/connectors/
# The data volume: the embedded server's data, the sources' state, the file sink's output.
COPY --from=bin --chown=65532:65532 /out/data /var/lib/ferry
USER 65532:65532
VOLUME ["/var/lib/ferry"]
# 8081: the HTTP API, status page and metrics; 8090: the embedded Iggy server.
EXPOSE 8081 8090
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["/usr/local/bin/ferry", "health", "--config", "/etc/ferry/config.toml"]
ENTRYPOINT ["/usr/local/bin/ferry"]
CMD ["run", "--config", "/etc/ferry/config.toml", "--embedded", "--progress", "0"]
