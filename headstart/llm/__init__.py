"""The streaming-token LLM core: `engine` (prefill / decode / verify over an explicit KV cache, a
token generator), `cache` (the transformers cache shim), `sampling`, `detok` (incremental
detokenization with stop strings), `speculative` (exact speculative decoding: prompt lookup and
draft-model drafters, rejection sampling, break-even switch), `turn` (incremental prefill from
partial transcripts, synchronous), `shaping` (the soft sentence budget),
`stream` (the async reply stream on the "llm" executor) and `live` (the async form of a user turn).
Importing this package loads neither torch nor transformers."""
