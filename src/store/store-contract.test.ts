/** The shared CheckpointStore contract (store-contract.ts) holds for memoryStore, the reference the IndexedDB store is held to. */
import { memoryStore } from '../train/checkpoint-files';
import { checkpointStoreContract } from '../testing/store-contract';

checkpointStoreContract('memoryStore', async () => memoryStore());
