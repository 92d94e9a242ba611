"""A local stand-in for the Anthropic and OpenAI APIs and its simulated judges: a test double
and a demo tool (`juryflow stub-server`), kept out of the product's judges."""
