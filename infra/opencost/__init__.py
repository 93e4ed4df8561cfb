"""OpenCost on train stacks: cost allocation per pod, namespace and team at the prices the stack pays."""
