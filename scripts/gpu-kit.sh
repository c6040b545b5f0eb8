#!/bin/bash
# Packs what the GPU checks need into .gpu-kit/ for a GPU machine that has a driver and the CUDA toolkit but no
# Node.js and no package registry (a machine lent for a few minutes): this machine's node binary, the checks bundled
# into single files (bench/cuda.ts, bench/webgpu.ts, bench/run.ts, bench/gpu.ts), the CUDA addon built here (sm_80, sm_90), Dawn
# for Linux x64, Vulkan's loader, and the headers that rebuild the addon there if the carried one cannot load.
# On a machine with npm, `npm install && npm run test:cuda && npm run test:webgpu && npm run bench:gpu && npm run bench` do the same.
# Then copy the repository with .gpu-kit/ and models/tiny/.kit-*.mjs, and run: bash scripts/gpu-kit-run.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
kit=.gpu-kit
rm -rf $kit models/tiny/.kit-*.mjs
mkdir -p $kit/nodeinc $kit/debs $kit/node_modules
[ -f native/cuda/build/rmas_cuda.node ] || npm run build:cuda
cp native/cuda/build/rmas_cuda.node $kit/
xz -T0 -6 -c "$(command -v node)" > $kit/node.xz
inc=$(node -p "require('path').resolve(process.execPath, '../../include/node')")
[ -f "$inc/node_api.h" ] || inc=/usr/include/node
cp "$inc"/{js_native_api.h,js_native_api_types.h,node_api.h,node_api_types.h} $kit/nodeinc/
cp -r node_modules/node-addon-api $kit/node_modules/
mkdir -p $kit/node_modules/webgpu/dist/linux-x64
cp node_modules/webgpu/{index.js,package.json} $kit/node_modules/webgpu/
xz -T0 -6 -c node_modules/webgpu/dist/linux-x64/dawn.node > $kit/node_modules/webgpu/dist/linux-x64/dawn.node.xz
# transformers.js (the tokenizers) loads onnxruntime-node when it starts in Node; no model of ours runs on it
mkdir -p $kit/node_modules/onnxruntime-node
echo '{"name":"onnxruntime-node","version":"0.0.0","main":"index.js"}' > $kit/node_modules/onnxruntime-node/package.json
cat > $kit/node_modules/onnxruntime-node/index.js <<'JS'
module.exports = {
  listSupportedBackends: () => [],
  InferenceSession: { create() { throw new Error("onnxruntime-node is not in the GPU kit"); } },
  Tensor: class {},
  env: {},
};
JS
# Vulkan's loader and glvnd, which NVIDIA's Vulkan driver (libGLX_nvidia) needs; Debian amd64 packages
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/gpu-kit-apt'
mkdir -p /tmp/gpu-kit-apt/partial
apt-get $o update -qq && (cd $kit/debs && apt-get $o download -qq libvulkan1 libglvnd0 libglx0 libegl1 libgl1 2>/dev/null)
# one file per check; placed in models/tiny/ so that the paths the code derives from its own location hold
for c in cuda webgpu run gpu; do
  npx esbuild bench/$c.ts --bundle --platform=node --format=esm --target=node20 --outfile=models/tiny/.kit-$c.mjs \
    --external:webgpu --external:onnxruntime-node --alias:sharp=./scripts/gpu-kit-empty.mjs --log-level=error \
    --banner:js="import { createRequire as __kitRequire } from 'node:module'; const require = __kitRequire(import.meta.url);"
done
du -sh $kit models/tiny/.kit-*.mjs
