#!/usr/bin/env bash
# Checks packaging: `cpack -G DEB` on the build directory makes a .deb whose
# file list is the expected layout (binary in /usr/bin, gzipped man page,
# bash/zsh/fish completions), whose Depends (computed by dpkg-shlibdeps, plus
# libssl3, which rlock loads with dlopen() for TLS and so shlibdeps cannot see)
# names libhiredis and libssl, every one of which is installed here, and whose
# binary runs once unpacked; and `cmake --install` into a temporary prefix
# installs the same files (with the man page uncompressed).
# Build directory: $BUILD_DIR, else build/ (configured by scripts/test).
set -euo pipefail
REPO="${REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
BUILD="${BUILD_DIR:-$REPO/build}"
[[ -x "$BUILD/rlock" ]] || { echo "package.sh: no binary at $BUILD/rlock" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/rlock-package.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# A build directory configured before packaging/ existed has no CPack config.
if [[ ! -f "$BUILD/CPackConfig.cmake" ]]; then
  cmake "$BUILD" >/dev/null
fi
if ! (cd "$work" && cpack -G DEB --config "$BUILD/CPackConfig.cmake" -B "$work/out" \
  >"$work/cpack.log" 2>&1); then
  cat "$work/cpack.log" >&2
  echo "package.sh: cpack -G DEB failed" >&2
  exit 1
fi
debs=("$work"/out/*.deb)
[[ -f "${debs[0]}" && ${#debs[@]} -eq 1 ]] || { echo "package.sh: expected one .deb, got: ${debs[*]}" >&2; exit 1; }
deb="${debs[0]}"
echo "cpack -G DEB: $(basename "$deb")"

expected="./usr/bin/rlock
./usr/share/bash-completion/completions/rlock
./usr/share/fish/vendor_completions.d/rlock.fish
./usr/share/man/man1/rlock.1.gz
./usr/share/zsh/vendor-completions/_rlock"
files="$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {print $NF}' | LC_ALL=C sort)"
if [[ "$files" != "$expected" ]]; then
  echo "package.sh: unexpected files in the .deb:" >&2
  diff <(echo "$expected") <(echo "$files") >&2 || true
  exit 1
fi
echo "dpkg-deb -c: $(wc -l <<<"$files") files, as expected: ${files//$'\n'/ }"

depends="$(dpkg-deb -f "$deb" Depends)"
for lib in libhiredis libssl; do
  grep -q "$lib" <<<"$depends" || { echo "package.sh: Depends does not name $lib: $depends" >&2; exit 1; }
done
# Every dependency must be satisfiable on this Debian: installed here.
IFS=',' read -ra deps <<<"$depends"
for dep in "${deps[@]}"; do
  pkg="$(awk '{print $1}' <<<"$dep")"
  [[ "$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null)" == installed ]] ||
    { echo "package.sh: dependency $pkg is not an installed package" >&2; exit 1; }
done
echo "Depends: $depends"
for field in Package Version Section Maintainer Description; do
  [[ -n "$(dpkg-deb -f "$deb" "$field")" ]] || { echo "package.sh: empty $field" >&2; exit 1; }
done
[[ "$(dpkg-deb -f "$deb" Section)" == utils ]] || { echo "package.sh: Section is not utils" >&2; exit 1; }

dpkg-deb -x "$deb" "$work/root"
"$work/root/usr/bin/rlock" --version | grep -q '^rlock ' ||
  { echo "package.sh: the packaged binary does not run" >&2; exit 1; }
gzip -t "$work/root/usr/share/man/man1/rlock.1.gz"
zcat "$work/root/usr/share/man/man1/rlock.1.gz" | cmp -s - "$REPO/man/rlock.1" ||
  { echo "package.sh: the packaged man page differs from man/rlock.1" >&2; exit 1; }
echo "unpacked: /usr/bin/rlock --version runs; rlock.1.gz is man/rlock.1"

cmake --install "$BUILD" --prefix "$work/prefix" >/dev/null
installed="$(cd "$work/prefix" && find . -type f | LC_ALL=C sort)"
want_install="$(sed -e 's|^\./usr/|./|' -e 's|\.gz$||' <<<"$expected")"
if [[ "$installed" != "$want_install" ]]; then
  echo "package.sh: cmake --install layout differs from the package:" >&2
  diff <(echo "$want_install") <(echo "$installed") >&2 || true
  exit 1
fi
echo "cmake --install --prefix: the same $(wc -l <<<"$installed") files (man page uncompressed)"
