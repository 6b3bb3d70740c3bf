#!/usr/bin/env bash
# The real peers the tests and the bench meet, built or fetched from the package registries into
# .ci/peers (git-ignored): oauth2-proxy, Ory Hydra, Caddy and Traefik from the Go module proxy, Keycloak's
# quarkus distribution from Maven Central. Nothing is downloaded from anywhere else.
#
#   bash .ci/peers.sh                 every peer
#   bash .ci/peers.sh keycloak hydra  only those
#
# Cached twice: a peer whose .ci/peers/<name>.version already names the wanted version is not
# touched, and a fresh clone rebuilds from the registries' own caches (Go's module and build caches,
# Maven's ~/.m2), which outlive the clone: then a Go peer costs its link, Keycloak its unzip.
# docs/peers.md has the versions, and what each costs the first time and from cache. Each failure
# names the peer and the tool it needed.
set -Eeuo pipefail
cd "$(dirname "$0")/.."

OAUTH2_PROXY_VERSION=v7.15.6
HYDRA_VERSION=v2.3.0
CADDY_VERSION=v2.11.9
# The last Caddy that passes a client's copy of a header copy_headers lists and the answer lacks
# (2.9.0 to 2.11.1, GHSA-7r4p-vjf4-gxv4): the Caddy recipe's line that removes it is tested on it.
CADDY_PASSING_VERSION=v2.11.1
# v3.7.12 or later: the recipe's aliasHeadersStrategy (docs/deploy/traefik.md) is new in v3.7.12.
TRAEFIK_VERSION=v3.7.13
KEYCLOAK_VERSION=26.7.3

PEERS="$PWD/.ci/peers"
mkdir -p "$PEERS/bin"

need() {
  command -v "$1" >/dev/null || { echo "peers: $2 needs '$1' on PATH ($3)" >&2; exit 1; }
}

# fresh <name> <version>: true when the peer must be (re)installed.
fresh() { [ "$(cat "$PEERS/$1.version" 2>/dev/null)" != "$2" ]; }
stamp() { echo "$2" >"$PEERS/$1.version"; }

# A module whose go.mod has replace directives cannot be built by `go install module@version`
# ("must not contain directives that would cause it to be interpreted differently"): its source
# comes from the module proxy (`go mod download`) into a writable copy, built there.
module_source() {
  local dir
  dir="$(go mod download -json "$1@$2" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  [ -n "$dir" ] || { echo "peers: go mod download $1@$2 found no source" >&2; return 1; }
  rm -rf "$PEERS/src/$3"
  mkdir -p "$PEERS/src"
  cp -r "$dir" "$PEERS/src/$3"
  chmod -R u+w "$PEERS/src/$3"
}

install_oauth2_proxy() {
  fresh oauth2-proxy "$OAUTH2_PROXY_VERSION" || return 0
  need go oauth2-proxy "Go 1.26, the machine's toolchain"
  # The version string oauth2-proxy's release build sets (its Makefile's ldflags), so that
  # `oauth2-proxy --version` names it.
  GOBIN="$PEERS/bin" go install -ldflags "-X github.com/oauth2-proxy/oauth2-proxy/v7/pkg/version.VERSION=$OAUTH2_PROXY_VERSION" \
    "github.com/oauth2-proxy/oauth2-proxy/v7@$OAUTH2_PROXY_VERSION"
  stamp oauth2-proxy "$OAUTH2_PROXY_VERSION"
}

# install_caddy <peer> <version>: Caddy at <version> as .ci/peers/bin/<peer> (go install names the
# binary after its package, so it is built in a folder of its own and moved).
install_caddy() {
  fresh "$1" "$2" || return 0
  need go "$1" "Go 1.26, the machine's toolchain"
  local tmp="$PEERS/src/$1"
  rm -rf "$tmp" && mkdir -p "$tmp"
  GOBIN="$tmp" go install "github.com/caddyserver/caddy/v2/cmd/caddy@$2"
  mv "$tmp/caddy" "$PEERS/bin/$1"
  rm -rf "$tmp"
  stamp "$1" "$2"
}

install_hydra() {
  fresh hydra "$HYDRA_VERSION" || return 0
  need go hydra "Go 1.26, the machine's toolchain"
  need gcc hydra "cgo, for its SQLite driver (Debian's gcc)"
  module_source github.com/ory/hydra/v2 "$HYDRA_VERSION" hydra
  # Hydra's go.mod points its client library at ./internal/httpclient, a module of its own that the
  # module proxy's zip leaves out; the version of it that go.mod requires (hydra-client-go v2.2.1,
  # a module on the proxy) is used instead. Only Hydra's command-line client commands use it, not
  # the servers the tests run.
  # The sqlite tags are Hydra's own release build's: they give the `memory` DSN the tests use.
  (cd "$PEERS/src/hydra" &&
    go mod edit -dropreplace github.com/ory/hydra-client-go/v2 &&
    go mod download github.com/ory/hydra-client-go/v2 &&
    CGO_ENABLED=1 go build -trimpath -tags sqlite,sqlite_omit_load_extension \
      -ldflags "-X github.com/ory/hydra/v2/driver/config.Version=$HYDRA_VERSION" -o "$PEERS/bin/hydra" .)
  rm -rf "$PEERS/src/hydra"
  stamp hydra "$HYDRA_VERSION"
}

install_traefik() {
  fresh traefik "$TRAEFIK_VERSION" || return 0
  need go traefik "Go 1.26, the machine's toolchain"
  module_source github.com/traefik/traefik/v3 "$TRAEFIK_VERSION" traefik
  # Three edits of the downloaded copy, none near forwardAuth (docs/peers.md says why each):
  # - the basic-auth library's fork at the pseudo-version v3.7 pins is refused by the module proxy;
  #   the one v3.6 pins is served and used instead (the basicAuth middleware only);
  # - 14 SDKs of the ACME client's DNS-01 providers are refused too: the provider registry is left
  #   out, and a DNS challenge fails naming this build;
  # - go.mod replaces github.com/traefik/traefik/dynamic/ext with ./pkg/config/dynamic/ext, a
  #   module of its own that the proxy's zip leaves out: written back as the two empty types the
  #   build reads from it.
  (cd "$PEERS/src/traefik" &&
    go mod edit -replace github.com/abbot/go-http-auth=github.com/containous/go-http-auth@v0.4.1-0.20200324110947-a37a7636d23e &&
    sed -i -e '\#"github.com/go-acme/lego/v5/providers/dns"#d' \
      -e 's#provider, err = dns.NewDNSChallengeProviderByName(p.DNSChallenge.Provider)#provider, err = nil, fmt.Errorf("ACME DNS challenge provider %q: not in this build", p.DNSChallenge.Provider)#' \
      pkg/provider/acme/provider.go &&
    ! grep -q 'providers/dns"' pkg/provider/acme/provider.go &&
    mkdir -p pkg/config/dynamic/ext &&
    printf 'module github.com/traefik/traefik/dynamic/ext\n\ngo 1.24.0\n' >pkg/config/dynamic/ext/go.mod &&
    printf 'package ext\n\ntype HTTP struct{}\n\ntype Router struct{}\n' >pkg/config/dynamic/ext/ext.go &&
    CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "-X github.com/traefik/traefik/v3/pkg/version.Version=$TRAEFIK_VERSION" \
      -o "$PEERS/bin/traefik" ./cmd/traefik)
  rm -rf "$PEERS/src/traefik"
  stamp traefik "$TRAEFIK_VERSION"
}

install_keycloak() {
  fresh keycloak "$KEYCLOAK_VERSION" || return 0
  need mvn keycloak "Maven, to fetch org.keycloak:keycloak-quarkus-dist from Maven Central"
  need java keycloak "a JDK 17 or later"
  need unzip keycloak "Debian's unzip"
  local dl="$PEERS/download"
  mkdir -p "$dl"
  # Maven's quiet mode still writes terminal escapes: its output is shown only when it fails.
  mvn -q -B dependency:copy "-Dartifact=org.keycloak:keycloak-quarkus-dist:$KEYCLOAK_VERSION:zip" "-DoutputDirectory=$dl" >"$PEERS/mvn.log" 2>&1 ||
    { cat "$PEERS/mvn.log" >&2; return 1; }
  rm -rf "$PEERS/keycloak" "$PEERS/keycloak-$KEYCLOAK_VERSION"
  unzip -q "$dl/keycloak-quarkus-dist-$KEYCLOAK_VERSION.zip" -d "$PEERS"
  mv "$PEERS/keycloak-$KEYCLOAK_VERSION" "$PEERS/keycloak"
  rm -rf "$dl"
  stamp keycloak "$KEYCLOAK_VERSION"
}

[ $# -gt 0 ] || set -- oauth2-proxy hydra caddy caddy-2.11.1 traefik keycloak
# Not `install_x || ...`: bash ignores `set -e` inside a function called on the left of `||`, so
# a failed build would be stamped as installed. The ERR trap names the peer instead.
peer=
trap 'echo "peers: installing $peer failed" >&2' ERR
for peer in "$@"; do
  start=$SECONDS
  case "$peer" in
    oauth2-proxy) install_oauth2_proxy ;;
    hydra) install_hydra ;;
    caddy) install_caddy caddy "$CADDY_VERSION" ;;
    caddy-2.11.1) install_caddy caddy-2.11.1 "$CADDY_PASSING_VERSION" ;;
    traefik) install_traefik ;;
    keycloak) install_keycloak ;;
    *) echo "peers: no peer named '$peer'" >&2; exit 2 ;;
  esac
  echo "peers: $peer $(cat "$PEERS/$peer.version") ready in $((SECONDS - start)) s"
done
