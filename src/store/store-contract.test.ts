/** The shared FileStore contract (store-contract.ts) holds for memoryStore, the reference the IndexedDB store is held to. */
import { memoryStore } from '../train/file-store';
import { checkpointStoreContract } from '../testing/store-contract';

checkpointStoreContract('memoryStore', async () => memoryStore());
