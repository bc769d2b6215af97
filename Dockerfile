# ratekeeper container image.
#   docker build -t ratekeeper .
#   docker run -p 8080:8080 ratekeeper            # SQLite in /data, Redis at RATEKEEPER_REDIS_URL
# docker-compose.yml runs it with PostgreSQL and Redis.

# ---- build -------------------------------------------------------------------
FROM rust:1-bookworm AS builder
WORKDIR /build
# The dependencies first, in a layer of their own: built from the manifest and the lock
# file with an empty crate, so that a change to ratekeeper's own code rebuilds only it
# (seconds to a minute), not the 300 crates under it (minutes).
# Every workspace member's manifest must be there (cargo loads the whole workspace), the
# bench's too, though only the server (and the Rust client, which its CLI uses) is built.
COPY Cargo.toml Cargo.lock ./
# The allocator's build options (mimalloc is compiled with the dependencies).
COPY .cargo .cargo/
COPY crates/limiter/Cargo.toml crates/limiter/
COPY clients/rust/Cargo.toml clients/rust/
COPY bench/Cargo.toml bench/
RUN mkdir -p src crates/limiter/src clients/rust/src bench/src \
 && echo 'fn main() {}' > src/main.rs \
 && echo 'fn main() {}' > bench/src/main.rs \
 && touch src/lib.rs crates/limiter/src/lib.rs clients/rust/src/lib.rs \
 && cargo build --release --locked -p ratekeeper \
 && rm -rf src crates/limiter/src clients/rust/src bench/src target/release/.fingerprint/ratekeeper* \
      target/release/deps/ratekeeper* target/release/deps/libratekeeper* target/release/ratekeeper*
# Then everything the crates compile in: sources, Lua scripts (include_str!), SQL
# migrations (sqlx::migrate!), templates and static files. .dockerignore keeps
# target/, .git and local databases out.
COPY . .
RUN cargo build --release --locked -p ratekeeper --bin ratekeeper \
 && strip target/release/ratekeeper

# ---- runtime -----------------------------------------------------------------
FROM debian:bookworm-slim
# curl only serves the health check in docker-compose.yml (GET /readyz).
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 ratekeeper \
 && useradd --system --uid 10001 --gid ratekeeper --home-dir /data --shell /usr/sbin/nologin ratekeeper \
 && install -d -o ratekeeper -g ratekeeper -m 0750 /data

COPY --from=builder /build/target/release/ratekeeper /usr/local/bin/ratekeeper

# The default RATEKEEPER_DATABASE_URL (sqlite://ratekeeper.db) is relative, so the
# SQLite file lands in /data; mount a volume there to keep it.
WORKDIR /data
USER ratekeeper:ratekeeper
ENV RATEKEEPER_LISTEN=0.0.0.0:8080
# 8081: Envoy's rate limit service (gRPC), when RATEKEEPER_GRPC_LISTEN is set.
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/ratekeeper"]
CMD ["serve"]
