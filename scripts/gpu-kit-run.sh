#!/bin/bash
# Runs the GPU checks from the kit scripts/gpu-kit.sh packed: npm run test:cuda part by part, npm run test:webgpu,
# npm run bench:gpu (WebGPU and CUDA; JSON in OUTDIR/bench-gpu.json) and npm run bench on the GPU through Dawn, each
# bounded in time (GPU_KIT_BUDGET seconds in all, default 530). Writes everything to OUTDIR/log.txt (default
# .gpu-kit/out). CUDA_PARTS picks parts of test:cuda; SKIP_BENCH_GPU=1 skips bench:gpu, SKIP_BENCH=1 the bench.
cd "$(dirname "$0")/.."
out=${1:-.gpu-kit/out}; mkdir -p "$out"; log=$out/log.txt
start=$(date +%s); deadline=$((start + ${GPU_KIT_BUDGET:-530}))
step() { # step NAME SECONDS CMD...
  local name=$1 want=$2; shift 2; local left=$((deadline - $(date +%s) - 5)); local t=$((want < left ? want : left))
  if ((t < 10)); then echo "=== $name: skipped, out of time" | tee -a "$log"; return; fi
  echo "=== $name (timeout ${t}s) at +$(($(date +%s) - start))s" | tee -a "$log"
  timeout "$t" "$@" >>"$log" 2>&1; echo "=== $name rc=$?" | tee -a "$log"
}
{ nvidia-smi; uname -a; } >"$log" 2>&1
mkdir -p /tmp/gpu-kit-node/bin /tmp/gpu-kit-node/include/node
xz -dc .gpu-kit/node.xz >/tmp/gpu-kit-node/bin/node && chmod +x /tmp/gpu-kit-node/bin/node
cp .gpu-kit/nodeinc/*.h /tmp/gpu-kit-node/include/node/
export PATH=/tmp/gpu-kit-node/bin:$PATH
mkdir -p node_modules && cp -r .gpu-kit/node_modules/. node_modules/
xz -df node_modules/webgpu/dist/linux-x64/dawn.node.xz
cub=$(ls /usr/local/cuda/lib64/libcublasLt.so.1[23] /usr/local/cuda*/targets/x86_64-linux/lib/libcublasLt.so.1[23] 2>/dev/null \
  | head -1 || true)
[ -n "$cub" ] && export LD_LIBRARY_PATH=$(dirname "$cub")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p native/cuda/build && cp .gpu-kit/rmas_cuda.node native/cuda/build/
if ! node -e "const p = require('./native/cuda/build/rmas_cuda.node').probe(); process.exit(p.code === 0 && p.devices.length ? 0 : 1)" \
  >>"$log" 2>&1; then
  echo "the carried addon finds no device: building it here" >>"$log"
  step "build:cuda" 240 node scripts/build-cuda.mjs --force
fi
for p in ${CUDA_PARTS:-parity golden gemm train scale devices nccl perf ask}; do
  step "test:cuda $p" 150 env RMAS_CUDA_ONLY=$p node --input-type=module -e "await import('$PWD/models/tiny/.kit-cuda.mjs')"
done
for f in .gpu-kit/debs/*.deb; do dpkg -x "$f" /; done
ldconfig
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/nvidia/lib64
for j in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
  [ -f "$j" ] && { export VK_DRIVER_FILES=$j VK_ICD_FILENAMES=$j; break; }
done
step "test:webgpu" 120 node models/tiny/.kit-webgpu.mjs
# the kit carries no onnxruntime-node (nor PyTorch for the ONNX export): no peer run; --budget-s ends it inside its step
[ -z "${SKIP_BENCH_GPU:-}" ] && step "bench:gpu" 300 \
  sh -c "node models/tiny/.kit-gpu.mjs --no-peer --json --budget-s 270 >'$out/bench-gpu.json'"
[ -z "${SKIP_BENCH:-}" ] && step "bench" 200 node models/tiny/.kit-run.mjs --size full
echo "total $(($(date +%s) - start)) s" | tee -a "$log"
