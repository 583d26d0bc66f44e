# The same image as `make image`, for those who have a Docker daemon: the
# static binaries on an empty base, run as 65532:65532, the manager as
# entrypoint, OCI labels. test/image checks that this file and the image
# `make image` builds agree.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/manager ./cmd/graduator ./cmd/sample-webhook

FROM scratch
ARG VERSION=dev
ARG REVISION=
LABEL org.opencontainers.image.source="https://github.com/graduator/graduator" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/manager /manager
COPY --from=build /out/graduator /graduator
COPY --from=build /out/sample-webhook /sample-webhook
USER 65532:65532
ENTRYPOINT ["/manager"]
