# syntax=docker/dockerfile:1
# The imagebatch image: `worker` by default; `simulator`, `run`, `status` ... with the same image (docker-compose.yml).
#
#   docker build -t imagebatch .
#
# Two stages. `build` installs every dependency and builds dist/ with `npm run build`; `runtime` holds
# only the production dependencies, dist/, bin/ and the example batch, and runs as the unprivileged `node` user.
# scripts/check-artifact.mjs repeats these steps outside Docker (it reads the COPY and RUN lines below) and runs
# the result, so keep to COPY lines with plain paths and to npm in RUN lines.
#
# `npm ci`, as in scripts/setup.mjs: exactly the lock file, which records every platform's optional packages.

ARG NODE_IMAGE=node:24.21.0-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --loglevel=error
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# `npm run build` is tsc, then the workflow bundles the worker loads at start (dist/workflow-bundle*.js).
COPY scripts/bundle-workflows.mjs ./scripts/
RUN npm run build

FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund --loglevel=error && npm cache clean --force
COPY bin ./bin
COPY examples ./examples
# dist/ holds the workflow bundles `npm run build` made above: root's, readable by all and writable by root only,
# which is all the worker needs: it loads them and writes nothing there (it says so when it must bundle at start;
# scripts/check-artifact.mjs runs the artefact as an unprivileged user and fails on that).
COPY --from=build /app/dist ./dist
# The batch folder (a volume shared by the worker and the CLI) and the simulator's state, writable by `node` only.
RUN mkdir -p /batches /var/lib/imagebatch && chown node:node /batches /var/lib/imagebatch
USER node
WORKDIR /batches
# PID 1 should forward SIGTERM and reap children: run with `docker run --init` or compose's `init: true`.
ENTRYPOINT ["node", "/app/bin/imagebatch.js"]
CMD ["worker"]
# Healthy when the Temporal server lists a poller of this container on the task queue (imagebatch healthcheck).
HEALTHCHECK --interval=30s --timeout=20s --start-period=90s --retries=3 CMD ["node", "/app/bin/imagebatch.js", "healthcheck"]
