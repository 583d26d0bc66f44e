# Builds the operator, the CLI and the sample webhook into one small image.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/...

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/manager /manager
COPY --from=build /out/graduator /graduator
COPY --from=build /out/sample-webhook /sample-webhook
USER 65532:65532
ENTRYPOINT ["/manager"]
