#!/usr/bin/env bash
# The release files (issue 32): `cargo xtask dist` makes them as a release does
# (release builds of the three targets this machine builds), then each is tried
# the way its user meets it. Called by .ci/run; runs alone too (as root: it
# installs and removes the .deb).
#
#   - SHA256SUMS.txt lists every file and matches it; each archive holds
#     exactly its files; the winget manifest validates against its vendored
#     schema and, with the scoop manifest, names this build's files and hashes
#     (.ci/dist/manifests.py);
#   - the Linux programs are static and run (the aarch64 one under qemu);
#   - the amd64 .deb installs with dpkg -i, `forza-relay` runs from PATH,
#     systemd-analyze accepts its user unit (not enabled), dpkg -r removes
#     every file it installed; the arm64 one holds the same files;
#   - under Wine (Debian's Wine 8): the zip, unzipped into a fresh folder,
#     started with no arguments from elsewhere, reads the forza-relay.toml
#     beside it and relays a simulated drive, and its page answers
#     (.ci/dist/relay.py); the MSI, in a fresh prefix, installs per user,
#     its Start-menu shortcut starts the program on the user's configuration,
#     a newer MSI upgrades it in place with that configuration untouched, an
#     older one refuses, and the uninstall removes the program and keeps it.
#
# Wine 8 has no bcryptprimitives.dll (.ci/windows.sh says why it matters): the
# stand-in built from .ci/wine/ goes next to the unzipped program, and into the
# MSI prefix's system32, never into a release file or the installed folder.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
source .ci/cross.sh

for target in x86_64-pc-windows-gnu x86_64-unknown-linux-musl aarch64-unknown-linux-musl; do
    rustup target list --installed | grep -qx "$target" || rustup target add "$target"
done
# wixl makes the MSI; msitools' msibuild sets what wixl ignores and msiinfo
# reads it back; musl-gcc compiles ring's C for the static x86_64 binary.
install_missing x86_64-w64-mingw32-gcc gcc-mingw-w64-x86-64 musl-gcc musl-tools \
    aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu qemu-aarch64 qemu-user wine wine \
    wixl wixl msibuild msitools msiinfo msitools unzip unzip file file Xvfb xvfb \
    systemd-analyze systemd
# Debian's Python (not a pyenv's) reads the winget manifest against its schema.
python=/usr/bin/python3
if ! "$python" -c 'import jsonschema, yaml' 2>/dev/null; then
    install_packages python3-jsonschema python3-yaml
fi

dist=target/dist
check=target/dist-check
rm -rf "$check" target/dist-upgrade
mkdir -p "$check"
export WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml=;winemenubuilder.exe=d"
# The relay started by a double-click opens its page: here, in no browser.
export FORZA_RELAY_OPENER=forza-relay-test-no-browser
cleanup() {
    for prefix in "$check"/zip-prefix "$check"/msi-prefix; do
        [[ -d $prefix ]] && WINEPREFIX=$PWD/$prefix wineserver -k 2>/dev/null || true
    done
    if [[ -n ${deb_installed:-} ]]; then dpkg -r forza-relay >/dev/null 2>&1 || true; fi
    stop_display
}
trap cleanup EXIT
# A command that fails stops the script (set -e; -E: in functions too): say
# which, in one line.
trap 'echo "dist: FAILED: ${BASH_SOURCE[0]}:$LINENO: $BASH_COMMAND"' ERR
fail() {
    echo "dist: FAILED: $*"
    exit 1
}
took() { echo "dist: $1 took $(($(date +%s) - $2)) s"; }
all=$(date +%s)

# --- the release files ----------------------------------------------------------
start=$(date +%s)
cargo xtask dist
took "cargo xtask dist (3 release builds and the files)" "$start"
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
IFS=. read -r major minor patch <<<"$version"
newer=$major.$minor.$((patch + 1))
# Where the manifests say the files are: xtask's default.
repository=$(sed -n 's/^repository = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
base_url=${repository:-https://github.com/OWNER/forza-relay}/releases/download/v$version
zip=$dist/forza-relay-v$version-x86_64-pc-windows-gnu.zip
msi=$dist/forza-relay-v$version-x86_64.msi
# The same program in an installer of a newer version, for the upgrade.
cargo xtask dist --prebuilt --target x86_64-pc-windows-gnu --version "$newer" --out target/dist-upgrade
msi_newer=target/dist-upgrade/forza-relay-v$newer-x86_64.msi

# --- sums, contents, manifests ---------------------------------------------------
(cd "$dist" && sha256sum --check --strict SHA256SUMS.txt)
listed=$(awk '{ print $2 }' "$dist/SHA256SUMS.txt" | sort)
present=$(find "$dist" -maxdepth 1 -type f ! -name SHA256SUMS.txt -printf '%f\n' | sort)
[[ $listed == "$present" ]] || fail "SHA256SUMS.txt lists $listed, the folder holds $present"
expected_files="forza-relay-v$version-aarch64-unknown-linux-musl.tar.gz
forza-relay-v$version-x86_64-pc-windows-gnu.zip
forza-relay-v$version-x86_64-unknown-linux-musl.tar.gz
forza-relay-v$version-x86_64.msi
forza-relay_$version-1_amd64.deb
forza-relay_$version-1_arm64.deb"
[[ $present == "$expected_files" ]] || fail "the release files are $present"

same() { [[ $2 == "$3" ]] || fail "$1 holds:
$2
not:
$3"; }
same "the zip" "$(unzip -Z1 "$zip")" "forza-relay.exe
forza-relayw.exe
forza-relay.toml
README.txt
LICENSE-MIT.txt
LICENSE-APACHE.txt"
cmp <(unzip -p "$zip" forza-relay.toml) config.example.toml
cmp <(unzip -p "$zip" README.txt) packaging/windows/README.txt
for target in x86_64-unknown-linux-musl aarch64-unknown-linux-musl; do
    folder=forza-relay-v$version-$target
    same "$folder.tar.gz" "$(tar -tzf "$dist/$folder.tar.gz")" "$folder/
$folder/forza-relay
$folder/forza-relay.toml
$folder/README.txt
$folder/LICENSE-MIT
$folder/LICENSE-APACHE"
    tar -xzf "$dist/$folder.tar.gz" -C "$check"
    kind=$(file --brief "$check/$folder/forza-relay")
    echo "dist: $folder/forza-relay: $kind"
    [[ $kind == *"statically linked"* || $kind == *"static-pie linked"* ]] ||
        fail "$folder/forza-relay is not static"
done
said=$("$check/forza-relay-v$version-x86_64-unknown-linux-musl/forza-relay" --version)
same "x86_64's --version" "$said" "forza-relay $version"
said=$(qemu-aarch64 "$check/forza-relay-v$version-aarch64-unknown-linux-musl/forza-relay" --version)
same "aarch64's --version" "$said" "forza-relay $version"

deb_files="./
./usr/
./usr/bin/
./usr/bin/forza-relay
./usr/lib/
./usr/lib/systemd/
./usr/lib/systemd/user/
./usr/lib/systemd/user/forza-relay.service
./usr/share/
./usr/share/doc/
./usr/share/doc/forza-relay/
./usr/share/doc/forza-relay/config.example.toml
./usr/share/doc/forza-relay/README.txt
./usr/share/doc/forza-relay/copyright"
for arch in amd64 arm64; do
    deb=$dist/forza-relay_$version-1_$arch.deb
    same "$deb" "$(dpkg-deb --fsys-tarfile "$deb" | tar -t)" "$deb_files"
    same "$deb's Architecture" "$(dpkg-deb --field "$deb" Architecture)" "$arch"
    # No maintainer script: nothing enables or starts the unit.
    same "$deb's control archive" "$(dpkg-deb --ctrl-tarfile "$deb" | tar -t)" "./
./control
./md5sums"
done
"$python" .ci/dist/manifests.py "$dist" packaging/winget/schema "$version" "$base_url"

# --- the .deb, installed ---------------------------------------------------------
start=$(date +%s)
if dpkg -s forza-relay >/dev/null 2>&1; then
    fail "a forza-relay package is installed already: remove it first (dpkg -r forza-relay)"
fi
deb_installed=1
dpkg -i "$dist/forza-relay_${version}-1_amd64.deb"
same "forza-relay on PATH" "$(command -v forza-relay)" /usr/bin/forza-relay
same "forza-relay --version from PATH" "$(cd / && forza-relay --version)" "forza-relay $version"
runtime=$(mktemp -d)
said=$(XDG_RUNTIME_DIR=$runtime systemd-analyze verify --user --man=no \
    /usr/lib/systemd/user/forza-relay.service 2>&1) || fail "systemd-analyze verify: $said"
rm -rf "$runtime"
[[ $said != *forza-relay.service:* ]] || fail "systemd-analyze verify: $said"
echo "dist: systemd-analyze verify --user accepts /usr/lib/systemd/user/forza-relay.service"
enabled=$(find /etc/systemd /usr/lib/systemd -name forza-relay.service ! -path /usr/lib/systemd/user/forza-relay.service)
[[ -z $enabled ]] || fail "the unit is enabled: $enabled"
installed=$(dpkg -L forza-relay | while read -r path; do if [[ -f $path ]]; then echo "$path"; fi; done)
dpkg -r forza-relay
deb_installed=
for path in $installed; do [[ ! -e $path ]] || fail "dpkg -r left $path"; done
! dpkg -s forza-relay >/dev/null 2>&1 || fail "dpkg still knows forza-relay after dpkg -r"
echo "dist: dpkg -r removed the $(wc -w <<<"$installed") files dpkg -i installed"
took "the .deb" "$start"

# --- the zip, under Wine ---------------------------------------------------------
x86_64-w64-mingw32-gcc -O2 -shared -o "$check/bcryptprimitives.dll" \
    .ci/wine/bcryptprimitives.c .ci/wine/bcryptprimitives.def -ladvapi32
start=$(date +%s)
mkdir "$check/zip"
unzip -q "$zip" -d "$check/zip"
cp "$check/bcryptprimitives.dll" "$check/zip/"
export WINEPREFIX=$PWD/$check/zip-prefix
wineboot --init >/dev/null 2>&1
"$python" .ci/dist/relay.py zip "$check/zip/forza-relay.exe" "$check/zip/forza-relay.toml"
wineserver -k
took "the zip under Wine" "$start"

# --- the MSI, under Wine ---------------------------------------------------------
source .ci/dist/msi.sh

# The release files stay in target/dist; the Wine prefixes (1.4 GB) go.
rm -rf "$check" target/dist-upgrade
took "all of .ci/dist.sh" "$all"
echo "dist: passed"
