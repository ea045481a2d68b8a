#!/usr/bin/env bash
# The Debian/Ubuntu packages the test suite needs, installed when missing (`make test` runs this).
# As root it installs them; otherwise through sudo when sudo needs no password; where neither can run,
# it stops at once and prints the one command to run. Idempotent: with everything present it does nothing.
#   espeak-ng                 the fallback voice; the conversation bench speaks its everyday questions with it
#   libsndfile1               soundfile's library where its wheel has none
#   chromium fonts-dejavu-core  tests/test_web.py: Playwright drives Debian's browser
#   pulseaudio pulseaudio-utils libasound2-plugins libportaudio2
#                             tests/test_mic_device.py: a private PulseAudio with null sinks, reached by
#                             PortAudio through ALSA's pulse plugin
#   nginx                     tests/test_scale.py: two servers behind a real nginx (run unprivileged)
set -euo pipefail
packages=(espeak-ng libsndfile1 chromium fonts-dejavu-core pulseaudio pulseaudio-utils libasound2-plugins
  libportaudio2 nginx)
# tests/test_system_deps.py checks the refusal path with a list of its own
if [ -n "${HEADSTART_SYSTEM_PACKAGES:-}" ]; then
  read -ra packages <<< "$HEADSTART_SYSTEM_PACKAGES"
fi
if [ "${1:-}" = "--list" ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi
if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "system-deps: this is not a Debian/Ubuntu system; install the equivalents of: ${packages[*]}" >&2
  echo "system-deps: then run make with SYSTEM_DEPS= to skip this check" >&2
  exit 1
fi
missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
command_line="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  run=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  run=(sudo)
else
  echo "system-deps: the tests need these system packages: ${missing[*]}" >&2
  echo "system-deps: install them (as root), then run make test again:" >&2
  echo "  sudo sh -c '$command_line'" >&2
  exit 1
fi
echo "system-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${run[@]}" apt-get update -qq
"${run[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
