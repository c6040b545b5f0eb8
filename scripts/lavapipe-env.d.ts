/** The environment with Dawn pointed at .cache/lavapipe25, unless a Vulkan driver is already chosen. */
export function lavapipeEnv(env?: NodeJS.ProcessEnv): NodeJS.ProcessEnv;
