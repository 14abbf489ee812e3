# Shared by tools/test and tools/demo: install the Debian packages taskferry
# needs to build, test and run, and build it with CMake.
# shellcheck shell=bash

TF_PACKAGES=(
  build-essential cmake pkg-config
  libsystemd-dev libjson-c-dev libmount-dev check libsubunit-dev
  bubblewrap git rsync
  systemd systemd-container dbus-user-session
  util-linux passwd procps
)

tf_install_deps() {
  local missing=()
  for p in "${TF_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    echo "tools: all packages present"
    return 0
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "tools: missing packages: ${missing[*]}" >&2
    echo "tools: run as root (or: sudo apt-get install -y ${missing[*]})" >&2
    return 1
  fi
  echo "tools: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${TF_PACKAGES[@]}" >/dev/null
}

# tf_build <source dir> <build dir> [extra cmake args...]
tf_build() {
  local src=$1 dir=$2
  shift 2
  cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Debug "$@" >/dev/null
  cmake --build "$dir" -j"$(nproc)"
}
