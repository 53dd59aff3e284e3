# One image for the server and the workers: `perfbisect server` / `perfbisect worker`.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release -p perfbisect-cli --locked

FROM debian:bookworm-slim
# git for repositories, a C toolchain and make for the builds workers run; what the kernel
# recipe and the qemu and ssh runners call (flex, bison, bc, libelf for kernels; qemu, cpio and
# busybox for VM boots; the OpenSSH client for bare-metal hosts).
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl git build-essential \
       flex bison bc libelf-dev libssl-dev ccache cpio busybox-static qemu-system-x86 openssh-client \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/perfbisect /usr/local/bin/perfbisect
RUN useradd --system --create-home --home-dir /var/lib/perfbisect perfbisect
# The mount points of docker-compose.yml's volumes, owned by the image's user: Docker copies
# a directory's ownership into a named volume the first time it mounts it there, so the
# volumes are writable by `perfbisect` (a root-owned volume would fail with EACCES).
RUN mkdir -p /var/lib/perfbisect/server /var/lib/perfbisect/worker /repos \
    && chown perfbisect:perfbisect /var/lib/perfbisect/server /var/lib/perfbisect/worker /repos
USER perfbisect
WORKDIR /var/lib/perfbisect
ENTRYPOINT ["perfbisect"]
CMD ["server", "--listen", "0.0.0.0:8080", "--data-dir", "/var/lib/perfbisect/server"]
