# Sourced by scripts that run WebGPU in Node: points Dawn at the unpacked Mesa 25 lavapipe.
_RMAS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -f "$_RMAS_ROOT/.cache/lavapipe25/lvp_icd.json" ] && [ -z "${VK_ICD_FILENAMES:-}" ]; then
  export VK_ICD_FILENAMES="$_RMAS_ROOT/.cache/lavapipe25/lvp_icd.json"
  export LD_LIBRARY_PATH="$_RMAS_ROOT/.cache/lavapipe25/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
