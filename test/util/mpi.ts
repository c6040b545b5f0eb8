/** What the tests that launch `mpirun` share: where it is, whether the MPI addon is built, and the environment. */
import { existsSync } from 'node:fs';
import { mpiAddonPath } from '../../src/dist/mpi';

export const mpirunPath = ['/usr/bin/mpirun', '/usr/local/bin/mpirun'].find((p) => existsSync(p)) ?? null;
export const mpiAddonBuilt = existsSync(mpiAddonPath());

/**
 * `base` made fit for mpirun: CI runs as root, which Open MPI refuses without both ALLOW variables; containers
 * often forbid the shared-memory transport's cross-memory attach; and no launcher's rank variables leak in from
 * the test runner's own environment.
 */
export function mpiEnv(base: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...base,
    OMPI_ALLOW_RUN_AS_ROOT: '1',
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: '1',
    OMPI_MCA_btl_vader_single_copy_mechanism: 'none',
  };
  for (const k of ['OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_SIZE', 'PMI_RANK', 'PMI_SIZE', 'RANK', 'WORLD_SIZE']) delete env[k];
  return env;
}
