# gitops-reverser: a static binary on distroless, running as the nonroot user (65532).
#   docker build -t ghcr.io/configbutler/gitops-reverser:dev .
# .dockerignore keeps the context to the daemon's sources; a test (install/image_test.go) runs the
# build step below on exactly that context and checks the result is static.

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/gitops-reverser .

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/gitops-reverser /gitops-reverser
USER 65532:65532
ENTRYPOINT ["/gitops-reverser"]
