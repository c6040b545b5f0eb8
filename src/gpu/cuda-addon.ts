/**
 * The CUDA addon (native/cuda, built by scripts/build-cuda.mjs): finding it, loading it, and saying why the
 * cuda backend cannot run when it cannot. Node only (createRequire of a .node file).
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CudaUnavailable } from '../errors';

export interface CudaDeviceInfo {
  index: number;
  name: string;
  major: number;
  minor: number;
  totalMem: number;
  multiProcessors: number;
}

/** What the addon sees without touching a device: code 0 with devices, or the CUDA error that stops it. */
export interface CudaProbe {
  code: number;
  error: string | null;
  devices: CudaDeviceInfo[];
  driverVersion: number;
  runtimeVersion: number;
  cublasLt: string | null;
  cublasLtError: string | null;
}

/** The exports of rmas_cuda.node (native/cuda/src/addon.cc). Failed CUDA calls throw CudaError. */
export interface CudaAddon {
  probe(): CudaProbe;
  /** Opens `device` (once; later calls only select it) and makes it the current device. */
  init(device: number): { device: number; name: string; major: number; minor: number };
  /** Makes an open device the current one: every call below works on the current device. */
  use(device: number): number;
  /** The current device (-1 before any init). */
  current(): number;
  /** Copies `bytes` from `src` on `srcDevice` to `dst` on `dstDevice` (both open), ordered after both streams' queued work. */
  copyPeer(dst: bigint, dstDevice: number, src: bigint, srcDevice: number, bytes: number): void;
  malloc(bytes: number): bigint;
  free(ptr: bigint): void;
  upload(ptr: bigint, bytes: Uint8Array): void;
  download(ptr: bigint, bytes: number): Uint8Array;
  memset(ptr: bigint, bytes: number, value?: number): void;
  copy(dst: bigint, src: bigint, bytes: number): void;
  sync(): void;
  /** poolUsedHigh: the most the pool has had in use since init or resetPeak(). */
  memInfo(): { free: number; total: number; poolUsed: number; poolReserved: number; poolUsedHigh: number };
  /** Restarts the pool's high-water marks from what is in use now. */
  resetPeak(): void;
  launch(name: string, ptrs: readonly bigint[], ints: readonly number[], floats: readonly number[]): void;
  kernels(): string[];
  deviceName(): string;
  capability(): { major: number; minor: number };
  /**
   * Loads NCCL on first use (RMAS_NCCL, a path, alone when set; else libnccl.so.2; the emulator's libnccl_emu.so):
   * where from and its version code (MAJOR*10000 + MINOR*100 + PATCH), or why it does not load. Never throws.
   */
  ncclProbe(): NcclProbe;
  /** A fresh ncclUniqueId (128 bytes) for ncclCommInit on every rank; throws when NCCL does not load. */
  ncclUniqueId(): Uint8Array;
  /** Joins the communicator of `id` as `rank` of `nranks` on the current device, waiting for every rank; a handle. */
  ncclCommInit(id: Uint8Array, nranks: number, rank: number): number;
  /**
   * Sums `count` f32 values at `ptr` over the ranks, in place, queued on the current device's stream (ordered with
   * the kernels around it); the communicator must belong to the current device.
   */
  ncclAllReduce(comm: number, ptr: bigint, count: number): void;
  /** Root's `count` f32 values at `ptr` on every rank, in place, on the current device's stream. */
  ncclBroadcast(comm: number, ptr: bigint, count: number, root: number): void;
  ncclCommDestroy(comm: number): void;
}

/** Whether NCCL loads, for ncclProbe(): its file and version code, or the reason it does not. */
export interface NcclProbe {
  loaded: boolean;
  path: string | null;
  version: number | null;
  error: string | null;
}

/** An Error thrown by the addon for a failed NCCL call (ncclResult: its ncclResult_t, e.g. 6 for ncclRemoteError). */
export type NcclError = Error & { ncclResult: number };

/** An Error thrown by the addon for a failed CUDA call. */
export type CudaError = Error & { code: number; cudaError: string };
export const isCudaError = (e: unknown): e is CudaError => e instanceof Error && typeof (e as CudaError).cudaError === 'string';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** Where the build puts the addon; RMAS_CUDA_ADDON (a path, relative to the working folder) overrides it. */
export const addonPath = (): string =>
  process.env.RMAS_CUDA_ADDON ? resolve(process.env.RMAS_CUDA_ADDON) : resolve(root, 'native/cuda/build/rmas_cuda.node');
const BUILD_HINT = 'build it with `npm run build:cuda` (needs the CUDA toolkit: nvcc and cmake)';

let cached: { addon: CudaAddon } | { error: string } | null = null;

/** The loaded addon; throws CudaUnavailable when it is not built or does not load. */
export function loadCudaAddon(): CudaAddon {
  if (!cached) {
    const path = addonPath();
    if (!existsSync(path)) cached = { error: `the CUDA addon is not built (${path} is missing); ${BUILD_HINT}` };
    else {
      try {
        cached = { addon: createRequire(import.meta.url)(path) as CudaAddon };
      } catch (e) {
        cached = {
          error: `the CUDA addon at ${path} does not load (${(e as Error).message}); rebuild it with \`npm run build:cuda -- --force\``,
        };
      }
    }
  }
  if ('error' in cached) throw new CudaUnavailable(cached.error);
  return cached.addon;
}

/** What to do about a probe's CUDA error (35: no or old driver, 100: no device). */
function adviceFor(code: number): string {
  if (code === 35)
    return 'no NVIDIA driver (or one older than the CUDA runtime the addon was built with); install or update the driver, or use --backend webgpu|cpu';
  if (code === 100) return 'the driver sees no CUDA device (check nvidia-smi and CUDA_VISIBLE_DEVICES), or use --backend webgpu|cpu';
  return 'check the driver with nvidia-smi, or use --backend webgpu|cpu';
}

/** The reason the cuda backend cannot run on this machine, or null when it can (device `device` exists). */
export function cudaUnavailableReason(probe: CudaProbe, device = 0): string | null {
  if (probe.code !== 0) return `CUDA reports ${probe.error ?? `error ${probe.code}`} (code ${probe.code}): ${adviceFor(probe.code)}`;
  if (device >= probe.devices.length) {
    const n = probe.devices.length;
    return `CUDA device ${device} does not exist (${n} device${n === 1 ? '' : 's'} found); pick ${n === 1 ? '--devices 0' : `--devices among 0..${n - 1}`}`;
  }
  return null;
}

export interface CudaStatus {
  built: boolean;
  path: string;
  probe: CudaProbe | null;
  /** What to do next: build the addon, fix the driver, or nothing (null). */
  hint: string | null;
}

/** For the healthcheck: is the addon built, what does it see, and what to do about it. Never throws. */
export function cudaStatus(): CudaStatus {
  const path = addonPath();
  let addon: CudaAddon;
  try {
    addon = loadCudaAddon();
  } catch (e) {
    return { built: existsSync(path), path, probe: null, hint: (e as Error).message };
  }
  const probe = addon.probe();
  let hint = cudaUnavailableReason(probe);
  if (!hint && !probe.cublasLt) hint = `cuBLASLt is missing, so large matmuls cannot run: ${probe.cublasLtError}`;
  return { built: true, path, probe, hint };
}
