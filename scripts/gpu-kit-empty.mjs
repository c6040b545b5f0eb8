// An empty module in place of transformers.js's image library in the GPU kit's bundles (scripts/gpu-kit.sh).
export default {};
