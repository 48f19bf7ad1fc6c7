# The MSI under Wine (sourced by .ci/dist.sh, which sets $msi, $msi_newer,
# $version, $newer, $zip, $check, $python, fail, same and took).
#
# Wine's msiexec is not Windows Installer: what it shows here is that the
# tables ask for the right things and that an implementation honours them
# (docs/releasing.md lists what only a real Windows 10/11 can show).

start=$(date +%s)
# What the file says before anything runs it: no administrator needed (summary
# Word Count bit 3, and no ALLUSERS), the configuration's component Permanent
# (16) and NeverOverwrite (128), the shortcut's folder the configuration's.
msiinfo suminfo "$msi" | grep -q '^Source: 10 ' || fail "$msi asks for elevation: $(msiinfo suminfo "$msi")"
! msiinfo export "$msi" Property | grep -q '^ALLUSERS' || fail "$msi sets ALLUSERS"
attributes=$(msiinfo export "$msi" Component | tr -d '\r' | awk -F'\t' '$1 == "UserConfiguration" { print $4 }')
(((attributes & 144) == 144)) || fail "UserConfiguration's attributes are $attributes"
shortcut=$(msiinfo export "$msi" Shortcut | tr -d '\r' | awk -F'\t' '$1 == "StartMenuShortcut" { print $5 "|" $12 }')
same "the shortcut's target and folder" "$shortcut" "[INSTALLDIR]forza-relayw.exe|CONFIGDIR"

code_of() { msiinfo export "$1" Property | tr -d '\r' | awk -F'\t' '$1 == "ProductCode" { print $2 }'; }
code=$(code_of "$msi")
code_newer=$(code_of "$msi_newer")
[[ $code != "$code_newer" ]] || fail "both versions have ProductCode $code"

export WINEPREFIX=$PWD/$check/msi-prefix
# A display: the program the shortcut starts shows its tray icon.
start_display
wineboot --init >/dev/null 2>&1
# A system DLL this Wine lacks, for the installed program to start (see
# .ci/dist.sh): the installed folder stays exactly what the MSI put there.
cp "$check/bcryptprimitives.dll" "$WINEPREFIX/drive_c/windows/system32/"
windows_folder() { winepath -u "$(wine cmd /c echo "$1" | tr -d '\r')"; }
program=$(windows_folder '%LOCALAPPDATA%')/Programs/forza-relay
appdata=$(windows_folder '%APPDATA%')
config=$appdata/forza-relay/forza-relay.toml
lnk="$appdata/Microsoft/Windows/Start Menu/Programs/forza-relay.lnk"
products() { wine uninstaller --list | tr -d '\r'; }
msiexec() { wine msiexec "$1" "$(winepath -w "$2")" /qn; }

msiexec /i "$msi"
same "the installed folder" "$(cd "$program" && ls)" "LICENSE-APACHE.txt
LICENSE-MIT.txt
forza-relay.exe
forza-relayw.exe"
cmp "$program/forza-relay.exe" <(unzip -p "$zip" forza-relay.exe)
cmp "$program/forza-relayw.exe" <(unzip -p "$zip" forza-relayw.exe)
[[ -f $lnk ]] || fail "no Start-menu shortcut at $lnk"
cmp "$config" config.example.toml
same "Add/Remove Programs" "$(products)" "$code|||forza-relay"
echo "dist: the MSI installed $program, $lnk, $config and its Add/Remove Programs entry"

# The user's edit (test ports), then the relay started as the shortcut starts it.
"$python" .ci/dist/relay.py shortcut "$lnk" "$program/forza-relay.exe" "$config"
# forza-relayw.exe started the relay in the tray, with no console window; its
# log is in the state folder.
log=$(windows_folder '%LOCALAPPDATA%')/forza-relay/forza-relay.log
for said in "the tray icon is shown" "in the tray from now on" "no console window is shown"; do
    grep -q "$said" "$log" || fail "the log of the relay the shortcut started does not say \"$said\": $(cat "$log")"
done
echo "dist: the shortcut started forza-relayw.exe, and it the relay in the tray with no console window"
cp "$config" "$check/config.edited"
! cmp -s "$config" config.example.toml || fail "the configuration was not edited"

msiexec /i "$msi_newer"
cmp "$config" "$check/config.edited" || fail "the upgrade changed the user's configuration"
same "Add/Remove Programs after the upgrade" "$(products)" "$code_newer|||forza-relay"
[[ -f $program/forza-relay.exe && -f $lnk ]] || fail "the upgrade lost the program or its shortcut"
echo "dist: $newer replaced $version in place; the user's configuration is unchanged, byte for byte"

if msiexec /i "$msi"; then fail "$version installed over $newer"; fi
same "Add/Remove Programs after a downgrade was refused" "$(products)" "$code_newer|||forza-relay"
echo "dist: $version refuses to install over $newer"

msiexec /x "$msi_newer"
[[ ! -e $program ]] || fail "the uninstall left $program: $(ls -A "$program")"
[[ ! -e $lnk ]] || fail "the uninstall left $lnk"
same "Add/Remove Programs after the uninstall" "$(products)" ""
! wine reg query 'HKCU\Software\forza-relay' >/dev/null 2>&1 || fail "the uninstall left HKCU\\Software\\forza-relay"
cmp "$config" "$check/config.edited" || fail "the uninstall changed the user's configuration"
echo "dist: the uninstall removed the program, its shortcut and its entry, and kept the configuration"
wineserver -k
stop_display
took "the MSI under Wine" "$start"
