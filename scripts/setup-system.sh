#!/usr/bin/env bash
# Installs what the tests need beyond node_modules, on Debian 12:
#  - chromium (headless WebGPU on SwiftShader, for the browser test project)
#  - libvulkan1 (the loader dawn.node opens)
#  - python3-torch (PyTorch 1.13 for /usr/bin/python3: test/mas/torch-interop loads our link files with
#    torch.load and writes torch.save files for us to read)
#  - g++ (builds the CUDA emulator, native/cuda/emu, on which test/cuda-emu*.test.ts run the cuda backend's kernels)
#  - Open MPI (openmpi-bin: mpirun; libopenmpi-dev: mpicxx, which builds native/mpi on npm install): test/dist runs
#    data-parallel training and sharded evaluation under mpirun -np 2
#  - bubblewrap (bwrap): the sandbox model-written code runs in (src/mas/tools/sandbox.ts; MBPP+, LiveCodeBench,
#    deliberation's Python tool); without it rmas run and ask refuse such code (SandboxUnavailable)
#  - Mesa 25 lavapipe from bookworm-backports, unpacked into .cache/lavapipe25 (the system's Mesa 22
#    lavapipe has no adapter under Dawn); the system's apt state is left untouched.
# Idempotent: does nothing for parts already present. Needs root for apt-get (CI and dev machines run as root).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST="$ROOT/.cache/lavapipe25"

need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
ldconfig -p | grep -q 'libvulkan.so.1' || need+=(libvulkan1)
/usr/bin/python3 -c 'import torch' 2>/dev/null || need+=(python3-torch)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v mpirun >/dev/null 2>&1 || need+=(openmpi-bin)
command -v mpicxx >/dev/null 2>&1 || need+=(libopenmpi-dev)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup-system: missing ${need[*]}; run as root: apt-get update && apt-get install -y --no-install-recommends ${need[*]}" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if [ ! -f "$DEST/lvp_icd.json" ]; then
  URI=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$URI" ] || URI=$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [ -n "$URI" ] || { echo "setup-system: cannot find the Debian mirror in apt sources" >&2; exit 1; }
  W=$(mktemp -d); mkdir -p "$W/lists/partial" "$W/cache/archives/partial" "$DEST"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $URI bookworm-backports main" > "$W/sources.list"
  O=(-o APT::Sandbox::User=root -o Dir::Etc::SourceList="$W/sources.list" -o Dir::Etc::SourceParts=/dev/null
     -o Dir::State::Lists="$W/lists" -o Dir::Cache="$W/cache")
  apt-get "${O[@]}" update -qq
  (cd "$W" && apt-get "${O[@]}" download -qq mesa-vulkan-drivers/bookworm-backports libdrm2/bookworm-backports \
     libdrm-amdgpu1/bookworm-backports)
  for d in "$W"/*.deb; do dpkg -x "$d" "$DEST"; done
  rm -rf "$W"
  cat > "$DEST/lvp_icd.json" <<JSON
{ "file_format_version": "1.0.0", "ICD": { "library_path": "$DEST/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so", "api_version": "1.4.305" } }
JSON
fi
CHROMIUM=$(/usr/bin/chromium --version 2>/dev/null | awk '{print $2}')
echo "setup-system: chromium $CHROMIUM, lavapipe in $DEST, $(mpirun --version 2>/dev/null | head -1)"
