/**
 * Named errors. Each carries a message that says what happened and what the user can do next;
 * `name` is stable so that callers (UI, runner, tests) can switch on it.
 */
export class RmasError extends Error {
  constructor(name: string, message: string) {
    super(message);
    this.name = name;
  }
}

const named = (name: string) =>
  class extends RmasError {
    constructor(message: string) {
      super(name, message);
    }
  };

/** No WebGPU adapter or device could be obtained. */
export class WebGpuUnavailable extends named('WebGpuUnavailable') {}
/** The CUDA backend cannot run here: the addon is not built, or no driver or device; the message says which and what to do. */
export class CudaUnavailable extends named('CudaUnavailable') {}
/** The GPU device was lost (driver reset, tab backgrounded too long, device destroyed). */
export class DeviceLost extends named('DeviceLost') {}
/** Shapes of the operands do not fit the operation. */
export class ShapeMismatch extends named('ShapeMismatch') {}
/** A dtype the operation does not accept, or operands whose dtypes disagree. */
export class DTypeMismatch extends named('DTypeMismatch') {}
/** Tensors that live on different backends were combined. */
export class BackendMismatch extends named('BackendMismatch') {}
/** A buffer would exceed the device's storage-binding or buffer-size limit. */
export class BindingLimitExceeded extends named('BindingLimitExceeded') {}
/** A device feature (shader-f16, subgroups, ...) is required but missing. */
export class UnsupportedFeature extends named('UnsupportedFeature') {}
/** WGSL failed to compile or a pipeline failed validation. */
export class ShaderCompileError extends named('ShaderCompileError') {}
/** The device reported a validation error for submitted work. */
export class GpuValidationError extends named('GpuValidationError') {}
/** The device ran out of memory while allocating. */
export class GpuOutOfMemory extends named('GpuOutOfMemory') {}
/** A tensor was used after dispose(). */
export class TensorDisposed extends named('TensorDisposed') {}
/** A command line the program cannot run (unknown command or flag, a bad or missing value); rmas prints its usage and exits 2. */
export class UsageError extends named('UsageError') {}
/** An argument is outside what the operation accepts (negative size, bad option, ...). */
export class InvalidArgument extends named('InvalidArgument') {}
/** config.json names a model_type this engine does not run. */
export class UnknownModelType extends named('UnknownModelType') {}
/** config.json is malformed or holds values the engine cannot use. */
export class InvalidModelConfig extends named('InvalidModelConfig') {}
/** A checkpoint file (safetensors, GGUF, ...) is truncated, malformed, or disagrees with its own header. */
export class CorruptCheckpoint extends named('CorruptCheckpoint') {}
/** tokenizer.json / tokenizer_config.json / chat_template.jinja is missing or malformed, or a chat template is needed but absent. */
export class TokenizerError extends named('TokenizerError') {}
/** A checkpoint (PyTorch .pt pickle) asks for code or objects beyond plain tensors; it was refused, nothing was executed. */
export class UnsafeCheckpoint extends named('UnsafeCheckpoint') {}
/** A --style (or style name in a request) that the registry does not know. */
export class UnknownStyle extends named('UnknownStyle') {}
/** A role model, inner link or outer link file a system needs is not where it should be. */
export class MissingCheckpoint extends named('MissingCheckpoint') {}
/** A prompt template lacks a slot string its stage fills, or holds one nobody fills. */
export class PromptSlotMissing extends named('PromptSlotMissing') {}
/** The caller cancelled the run (AbortSignal); nothing stored was changed. */
export class Cancelled extends named('Cancelled') {}
/**
 * Storage is full: IndexedDB in the page (the message says how much is needed and what can be deleted; nothing stored
 * was changed), or the disk or quota under the runner (ENOSPC, EDQUOT: the message says what was being written, what
 * is kept and how to resume).
 */
export class QuotaExceeded extends named('QuotaExceeded') {}
/** A download failed, was interrupted or did not match its expected size/hash; what was stored before is intact. */
export class DownloadFailed extends named('DownloadFailed') {}
/**
 * The hub refused a gated or private repository (HTTP 401/403 with X-Error-Code GatedRepo, or 401/403 to a token): the
 * message names the repository's page, where its terms are accepted, and where the token goes (HF_TOKEN, the page's token field).
 */
export class GatedRepo extends named('GatedRepo') {}
/** The hub has no such repository or revision (X-Error-Code RepoNotFound / RevisionNotFound); the message says what to check. */
export class RepoNotFound extends named('RepoNotFound') {}
/**
 * Offline mode (HF_HUB_OFFLINE=1, the page's cache-only mode) and the file is not in the cache: nothing was requested; the
 * message says what is missing and how to fetch it while online.
 */
export class HubOffline extends named('HubOffline') {}
/** The engine worker died (crash, out of memory, unresponsive) and was restarted; calls in flight were lost, stored data is intact. */
export class EngineRestarted extends named('EngineRestarted') {}
/** The LLM judge (API_BASE_URL) could not be reached or refused the request, after retries where they make sense; the message says what to check. */
export class JudgeUnavailable extends named('JudgeUnavailable') {}
/** A training step's planned device memory (src/train/memory.ts) exceeds the budget; the message says what to change. */
export class TrainingMemoryExceeded extends named('TrainingMemoryExceeded') {}
/**
 * A training step's loss or gradient norm is NaN or infinite (a learning rate too high, bad data): the run stops
 * before the update; or an update left the links non-finite: the run stops before the save. Every saved checkpoint
 * stays finite; the message names the step and what to resume from.
 */
export class NonFiniteLoss extends named('NonFiniteLoss') {}
/**
 * A run under a launcher (mpirun) cannot form its process group: the MPI addon is not built, or the
 * launcher's environment and MPI disagree about the ranks; the message says what to install or how to launch.
 */
export class DistUnavailable extends named('DistUnavailable') {}
/**
 * Another rank of the job failed or was killed, so this one stops too (a collective cannot finish without it);
 * the message names the last checkpoint or result file to resume from.
 */
export class RankLost extends named('RankLost') {}
/** The ranks of a data-parallel run no longer hold the same link parameters (a bug or a faulty node); nothing was saved. */
export class RanksDiverged extends named('RanksDiverged') {}
/**
 * A prompt does not fit the model's context (max_position_embeddings): refused before any forward pass, so no time
 * or memory is spent on it; the message gives the prompt's token count, the context and what to shorten.
 */
export class ContextTooLong extends named('ContextTooLong') {}
/**
 * A write failed for a reason other than a full disk. In the page, IndexedDB aborted or refused a transaction (the
 * browser aborted it, the database was closed or deleted under the tab, a disk error): the operation changed nothing,
 * and what was stored before is intact. Under the runner, the file system refused a write (EIO, EROFS, EACCES): the
 * message says what was being written, what is kept and how to resume.
 */
export class StorageFailed extends named('StorageFailed') {}
/**
 * Another process holds the lock of an output this command would write (--save_dir, --result_jsonl, --output_jsonl, …):
 * the message names the output, the owner's PID and host, and what to do (wait for it, or delete the lock of a
 * process that is gone on another host). Nothing was written.
 */
export class OutputLocked extends named('OutputLocked') {}
/**
 * A training --save_dir holds something this run did not make: an earlier run's checkpoints (pass --resume to continue
 * it, or --overwrite_output_dir to start over), other files, or a model folder (never written into). Nothing was written.
 */
export class OutputDirNotEmpty extends named('OutputDirNotEmpty') {}
/**
 * A chat template went past a bound while rendering: a range() of more than 100,000 items (Hugging Face's Jinja sandbox
 * cap), output or work past its cap, too many steps or too long; it was stopped. The message names the bound and the file.
 */
export class TemplateLimitExceeded extends named('TemplateLimitExceeded') {}
/**
 * A tokenizer.json pattern (pre-tokenizer, normalizer, decoder) that can backtrack catastrophically, such as `(a+)+$`:
 * refused when the tokenizer loads, before any text meets it. The message names the pattern and where it is.
 */
export class UnsafeTokenizerPattern extends named('UnsafeTokenizerPattern') {}
/**
 * A model folder's metadata file (config.json, the tokenizer files, a chat template, ...) that is a symlink leading out of
 * the folder (or out of the hub cache's repo folder), not a regular file (a device, a FIFO), or larger than its cap:
 * refused before it is read, and nothing of its content is shown.
 */
export class UnsafeModelFile extends named('UnsafeModelFile') {}
