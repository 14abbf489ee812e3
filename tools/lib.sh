# Shared by tools/test and tools/demo: install the Debian packages taskferry
# needs to build, test and run, and build it with CMake.
# shellcheck shell=bash

TF_PACKAGES=(
  build-essential cmake pkg-config
  libsystemd-dev libjson-c-dev libmount-dev check libsubunit-dev
  bubblewrap git rsync
  systemd systemd-container dbus-user-session
  util-linux passwd procps
  python3
  clang libclang-rt-dev
  go-md2man man-db
  dbus-daemon libglib2.0-bin
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
  # one command: its status is the function's, with or without set -e
  cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Debug "$@" >/dev/null &&
    cmake --build "$dir" -j"$(nproc)"
}

# The real worker CLIs the real-agents suite runs (tests/integration/
# test-real-agents.c), pinned, in an npm prefix every user (and every
# sandbox) can read. Skipped when the installed versions already match.
TF_AGENTS_DIR=${TF_AGENTS_DIR:-/opt/taskferry-test/agents}
TF_PI_PACKAGE=@mariozechner/pi-coding-agent
TF_PI_VERSION=0.73.1
TF_OPENCODE_PACKAGE=opencode-ai
TF_OPENCODE_VERSION=1.18.33

# tf_agent_version <package>: the installed version, or nothing
tf_agent_version() {
  local pj="$TF_AGENTS_DIR/node_modules/$1/package.json"
  [ -r "$pj" ] || return 0
  node -e 'process.stdout.write(String(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).version || ""))' "$pj" 2>/dev/null || true
}

tf_install_agents() {
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
      echo "tools: node and npm are needed for the real-agents suite; run as root (or: sudo apt-get install -y nodejs npm)" >&2
      return 1
    fi
    echo "tools: installing nodejs npm"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  fi
  if [ "$(tf_agent_version "$TF_PI_PACKAGE")" = "$TF_PI_VERSION" ] &&
     [ "$(tf_agent_version "$TF_OPENCODE_PACKAGE")" = "$TF_OPENCODE_VERSION" ] &&
     [ -x "$TF_AGENTS_DIR/bin/pi" ] && [ -x "$TF_AGENTS_DIR/bin/opencode" ]; then
    echo "tools: pi $TF_PI_VERSION and opencode $TF_OPENCODE_VERSION present in $TF_AGENTS_DIR"
    return 0
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "tools: pi $TF_PI_VERSION / opencode $TF_OPENCODE_VERSION missing from $TF_AGENTS_DIR; run tools/test as root" >&2
    return 1
  fi
  echo "tools: installing $TF_PI_PACKAGE@$TF_PI_VERSION $TF_OPENCODE_PACKAGE@$TF_OPENCODE_VERSION into $TF_AGENTS_DIR"
  local old_umask
  old_umask=$(umask)
  umask 022
  mkdir -p "$TF_AGENTS_DIR/bin"
  # install scripts stay off (npm 11 skips them anyway): opencode's platform
  # binary is called directly below
  npm install --prefix "$TF_AGENTS_DIR" --save-exact --no-audit --no-fund --omit=dev --ignore-scripts \
    --loglevel=error "$TF_PI_PACKAGE@$TF_PI_VERSION" "$TF_OPENCODE_PACKAGE@$TF_OPENCODE_VERSION"
  ln -sfn ../node_modules/.bin/pi "$TF_AGENTS_DIR/bin/pi"
  ln -sfn ../node_modules/opencode-linux-x64/bin/opencode "$TF_AGENTS_DIR/bin/opencode"
  chmod -R a+rX "$TF_AGENTS_DIR"
  umask "$old_umask"
  [ "$(tf_agent_version "$TF_PI_PACKAGE")" = "$TF_PI_VERSION" ] &&
    [ "$(tf_agent_version "$TF_OPENCODE_PACKAGE")" = "$TF_OPENCODE_VERSION" ] || {
    echo "tools: the installed agent versions do not match the pins" >&2
    return 1
  }
}
