// differentiable optim ops: filled in by the kernel work for this family
export {};
