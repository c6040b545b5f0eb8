/**
 * Device acquisition: the browser page, a Worker (both `navigator.gpu`) and Node (the `webgpu` package,
 * Dawn). Reports adapter info, the features we care about and the limits we request.
 */
import { WebGpuUnavailable } from '../errors';
import { nodeImport } from '../util/node-import';

export const WANTED_FEATURES = ['shader-f16', 'subgroups', 'timestamp-query'] as const;
export type WantedFeature = (typeof WANTED_FEATURES)[number];

export interface AdapterReport {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  isFallback: boolean;
  /** The adapter's subgroup widths (GPUAdapterInfo.subgroupMinSize/MaxSize); 0 where the browser does not say. */
  subgroupMinSize: number;
  subgroupMaxSize: number;
  features: Record<WantedFeature, boolean>;
  limits: {
    maxStorageBufferBindingSize: number;
    maxBufferSize: number;
    maxComputeWorkgroupStorageSize: number;
    maxComputeInvocationsPerWorkgroup: number;
    maxComputeWorkgroupSizeX: number;
    maxComputeWorkgroupsPerDimension: number;
    maxStorageBuffersPerShaderStage: number;
    minUniformBufferOffsetAlignment: number;
  };
  runtime: 'browser' | 'worker' | 'node';
}

export interface AcquireOptions {
  powerPreference?: GPUPowerPreference;
  /** Features to leave off even where the adapter has them (tests use it to exercise fallbacks). */
  disableFeatures?: WantedFeature[];
}

const isNode = () => typeof process !== 'undefined' && !!process.versions?.node && typeof window === 'undefined';

async function getGpu(): Promise<{ gpu: GPU; runtime: AdapterReport['runtime'] }> {
  const nav = (globalThis as { navigator?: Navigator }).navigator;
  if (nav && 'gpu' in nav && nav.gpu) {
    const runtime = typeof window === 'undefined' ? 'worker' : 'browser';
    return { gpu: nav.gpu, runtime };
  }
  if (isNode()) {
    const g = globalThis as { __rmasDawnGpu?: GPU };
    if (!g.__rmasDawnGpu) {
      // nodeImport keeps bundlers from pulling Dawn into the page
      const mod = await nodeImport('webgpu').catch((e: Error) => {
        throw new WebGpuUnavailable(`the 'webgpu' package (Dawn for Node) failed to load: ${e.message}. Run npm install.`);
      });
      Object.assign(globalThis, mod.globals);
      // Dawn crashes or hangs if this object is garbage-collected while devices are alive: keep it forever.
      g.__rmasDawnGpu = mod.create([]);
    }
    return { gpu: g.__rmasDawnGpu, runtime: 'node' };
  }
  throw new WebGpuUnavailable(
    'this browser exposes no WebGPU (navigator.gpu is missing). Use a recent Chrome/Edge, or Firefox/Safari with WebGPU enabled, served over https or localhost; the CPU backend still works.',
  );
}

/** Requests an adapter and a device with the adapter's full buffer limits and our wanted features. */
export async function acquireDevice(opts: AcquireOptions = {}): Promise<{ device: GPUDevice; report: AdapterReport }> {
  const { gpu, runtime } = await getGpu();
  const adapter = await gpu.requestAdapter({ powerPreference: opts.powerPreference ?? 'high-performance' });
  if (!adapter) {
    const hint =
      runtime === 'node'
        ? 'In Node, set VK_ICD_FILENAMES to a Vulkan driver Dawn accepts (scripts/setup-system.sh installs Mesa 25 lavapipe; source scripts/env.sh).'
        : 'Enable WebGPU in the browser (chrome://flags/#enable-unsafe-webgpu on Linux) or use the CPU backend.';
    throw new WebGpuUnavailable(`requestAdapter() returned no adapter. ${hint}`);
  }
  const features = {} as Record<WantedFeature, boolean>;
  for (const f of WANTED_FEATURES) features[f] = adapter.features.has(f) && !opts.disableFeatures?.includes(f);
  const L = adapter.limits;
  const device = await adapter.requestDevice({
    requiredFeatures: WANTED_FEATURES.filter((f) => features[f]) as GPUFeatureName[],
    requiredLimits: {
      maxStorageBufferBindingSize: L.maxStorageBufferBindingSize,
      maxBufferSize: L.maxBufferSize,
      maxComputeWorkgroupStorageSize: L.maxComputeWorkgroupStorageSize,
      maxComputeInvocationsPerWorkgroup: L.maxComputeInvocationsPerWorkgroup,
      maxComputeWorkgroupSizeX: L.maxComputeWorkgroupSizeX,
      maxStorageBuffersPerShaderStage: L.maxStorageBuffersPerShaderStage,
    },
  });
  const info = adapter.info ?? ({} as GPUAdapterInfo);
  const D = device.limits;
  const report: AdapterReport = {
    vendor: info.vendor ?? '',
    architecture: info.architecture ?? '',
    device: info.device ?? '',
    description: info.description ?? '',
    isFallback: !!(info as { isFallbackAdapter?: boolean }).isFallbackAdapter,
    subgroupMinSize: (info as { subgroupMinSize?: number }).subgroupMinSize ?? 0,
    subgroupMaxSize: (info as { subgroupMaxSize?: number }).subgroupMaxSize ?? 0,
    features,
    limits: {
      maxStorageBufferBindingSize: D.maxStorageBufferBindingSize,
      maxBufferSize: D.maxBufferSize,
      maxComputeWorkgroupStorageSize: D.maxComputeWorkgroupStorageSize,
      maxComputeInvocationsPerWorkgroup: D.maxComputeInvocationsPerWorkgroup,
      maxComputeWorkgroupSizeX: D.maxComputeWorkgroupSizeX,
      maxComputeWorkgroupsPerDimension: D.maxComputeWorkgroupsPerDimension,
      maxStorageBuffersPerShaderStage: D.maxStorageBuffersPerShaderStage,
      minUniformBufferOffsetAlignment: D.minUniformBufferOffsetAlignment,
    },
    runtime,
  };
  return { device, report };
}

/**
 * A software rasteriser: WebGPU run on the CPU (SwiftShader, Mesa's lavapipe/llvmpipe, softpipe). Dawn and Chromium
 * mark them isFallbackAdapter; the names catch a browser that does not.
 */
export function isSoftwareAdapter(r: Pick<AdapterReport, 'isFallback' | 'architecture' | 'device' | 'description' | 'vendor'>): boolean {
  return r.isFallback || /swiftshader|llvmpipe|lavapipe|softpipe/i.test(`${r.architecture} ${r.device} ${r.description}`)
    || (r.vendor === 'mesa' && r.architecture === 'software');
}
