#!/usr/bin/env bash
# The binary for a jump host (README "Install on a jump host"): static (musl), stripped,
# stamped with the git revision, packed with shell completions and man pages, and a krew
# plugin manifest for that archive, all in dist/.
#
#   deploy/dist.sh            build and pack
#   deploy/dist.sh --check    also check it: statically linked and stripped (file), runs the
#                             demo snapshot in an empty root (no libc, no toolchain, nothing but
#                             the binary) with the same output as the test build, runs the
#                             cockpit in tmux and quits cleanly, archive matches the manifest;
#                             with a krew binary in $KREW, installs the plugin through krew and
#                             runs `kubectl fabrik --version`.
#
# FABRIK_RELEASE_URL: where the archive will be published (the manifest's uri is
# $FABRIK_RELEASE_URL/<archive>); without it the uri is the local file, for `krew install
# --manifest dist/fabrik.yaml --archive dist/<archive>`.
set -euo pipefail
cd "$(dirname "$0")/.."

check=false
case "${1:-}" in
  --check) check=true ;;
  "") ;;
  *) echo "usage: deploy/dist.sh [--check]" >&2; exit 2 ;;
esac

target=x86_64-unknown-linux-musl
if ! rustup target list --installed | grep -qx "$target"; then
  rustup target add "$target"
fi
# ring (rustls' crypto) compiles C and assembly: for musl through musl-gcc.
if ! command -v musl-gcc >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends musl-tools
fi
cargo build --locked --profile dist --target "$target"
bin="target/$target/dist/fabrik"

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
name="fabrik-v$version-$target"
rm -rf "dist/$name" "dist/$name.tar.gz" dist/fabrik.yaml
mkdir -p "dist/$name/completions" "dist/$name/man"
cp "$bin" "dist/$name/fabrik"
"$bin" completions bash > "dist/$name/completions/fabrik.bash"
"$bin" completions zsh > "dist/$name/completions/_fabrik"
"$bin" completions fish > "dist/$name/completions/fabrik.fish"
"$bin" man --out "dist/$name/man" > /dev/null
# Reproducible archive: fixed order, owner and times.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2000-01-01 00:00Z' \
  -C "dist/$name" -czf "dist/$name.tar.gz" .
sha=$(sha256sum "dist/$name.tar.gz" | cut -d' ' -f1)
uri="${FABRIK_RELEASE_URL:+${FABRIK_RELEASE_URL%/}/$name.tar.gz}"
uri="${uri:-file://$PWD/dist/$name.tar.gz}"

cat > dist/fabrik.yaml <<EOF
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: fabrik
spec:
  version: "v$version"
  shortDescription: Terminal cockpit for GPU clusters (GPUs, MIG, DRA, tenants, quotas)
  description: |
    A terminal cockpit for GPU clusters on Kubernetes: allocation, utilisation,
    idle-but-allocated GPUs, MIG slices, DRA devices and tenant quotas at a glance, with
    previewed and audited cordon, drain, MIG reslice and quota changes.
    \`kubectl fabrik\` runs it on the current context; \`kubectl fabrik demo\` on a
    simulated factory.
  platforms:
  - selector:
      matchLabels:
        os: linux
        arch: amd64
    uri: $uri
    sha256: $sha
    bin: fabrik
    files:
    - from: fabrik
      to: .
EOF
size=$(stat -c %s "$bin")
echo "built $bin ($((size / 1024 / 1024)) MiB), $("$bin" --version)"
echo "packed dist/$name.tar.gz (sha256 $sha) and dist/fabrik.yaml"
$check || exit 0

fail() { echo "dist check FAILED: $*" >&2; exit 1; }

# Statically linked (static-pie is static too) and stripped.
desc=$(file -b "$bin")
echo "file: $desc"
[[ "$desc" == *"statically linked"* || "$desc" == *"static-pie linked"* ]] || fail "not static: $desc"
[[ "$desc" == *", stripped"* ]] || fail "not stripped: $desc"

# Runs where there is nothing but itself: an empty root with the binary in it. The demo
# snapshot is deterministic (seed, simulated ticks), so it must equal the test build's.
root=$(mktemp -d)
trap 'rm -rf "$root"; tmux -L fabrik-dist kill-server 2>/dev/null || true' EXIT
cp "$bin" "$root/fabrik"
chroot_run() {
  if [ "$(id -u)" = 0 ]; then chroot "$root" "$@"; else unshare -r chroot "$root" "$@"; fi
}
chroot_run /fabrik snapshot --demo --view fleet --format json > "$root/static.json" \
  || fail "the static binary did not run in an empty root"
ref=target/debug/fabrik
cargo build --locked --bin fabrik # the test build of this same tree (a no-op when it is fresh)
HOME="$root/home" "$ref" snapshot --demo --view fleet --format json > "$root/ref.json"
cmp -s "$root/static.json" "$root/ref.json" || {
  diff "$root/static.json" "$root/ref.json" | head -20
  fail "the static binary's demo snapshot differs from the test build's"
}
echo "empty root: the demo snapshot ran and equals the test build's ($(wc -c < "$root/static.json") bytes)"

# The cockpit in a real terminal, in the same empty root (plus /dev for the terminal):
# the header counts the demo's nodes, and q exits with status 0.
mkdir -p "$root/dev"
if [ "$(id -u)" = 0 ]; then
  mount --bind /dev "$root/dev"
  trap 'umount "$root/dev" 2>/dev/null; rm -rf "$root"; tmux -L fabrik-dist kill-server 2>/dev/null || true' EXIT
  demo=(chroot "$root" /fabrik demo)
else
  demo=("$PWD/$bin" demo) # without root the terminal check runs outside the empty root
fi
tmux -L fabrik-dist -f /dev/null new-session -d -s dist -x 140 -y 40 \
  "${demo[*]}; echo fabrik-exit=\$?; sleep 30"
ok=false
for _ in $(seq 1 100); do
  if tmux -L fabrik-dist capture-pane -p -t dist | grep -q "48/48"; then ok=true; break; fi
  sleep 0.1
done
screen=$(tmux -L fabrik-dist capture-pane -p -t dist)
$ok || { echo "$screen"; fail "the cockpit did not show the demo's 48 nodes in tmux"; }
tmux -L fabrik-dist send-keys -t dist q
for _ in $(seq 1 50); do
  screen=$(tmux -L fabrik-dist capture-pane -p -t dist)
  if grep -q "fabrik-exit=" <<< "$screen"; then break; fi
  sleep 0.1
done
grep -q "fabrik-exit=0" <<< "$screen" || { echo "$screen"; fail "the cockpit did not exit with 0 on q"; }
echo "tmux: the static cockpit showed the demo and exited 0 on q"

# The archive the manifest names is the one built, and holds the binary the manifest runs.
[ "$(sha256sum "dist/$name.tar.gz" | cut -d' ' -f1)" = "$sha" ] || fail "archive sha256 != manifest"
listing=$(tar -tzf "dist/$name.tar.gz")
grep -qx "./fabrik" <<< "$listing" || fail "the archive has no ./fabrik"
bash -n "dist/$name/completions/fabrik.bash" || fail "bash completion does not parse"

# krew itself, when given: install from the manifest and the archive into a scratch
# KREW_ROOT, then `kubectl fabrik --version` through kubectl's plugin lookup.
if [ -n "${KREW:-}" ]; then
  kroot=$(mktemp -d)
  KREW_ROOT="$kroot" "$KREW" install --manifest dist/fabrik.yaml --archive "dist/$name.tar.gz"
  got=$(PATH="$kroot/bin:$PATH" kubectl fabrik --version)
  rm -rf "$kroot"
  [ "$got" = "$("$bin" --version)" ] || fail "kubectl fabrik --version said: $got"
  echo "krew: installed, kubectl fabrik --version says $got"
fi
echo "dist check passed"
