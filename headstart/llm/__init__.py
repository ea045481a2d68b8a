"""The streaming-token LLM core: `engine` (prefill / decode / verify over an explicit KV cache, a
token generator), `cache` (the transformers cache shim), `sampling`, `detok` (incremental
detokenization with stop strings) and `stream` (the async adapter on the "llm" executor).
Importing this package loads neither torch nor transformers."""
