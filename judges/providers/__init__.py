"""Model providers, one module each. Each translates its SDK's errors into ours at the boundary."""
