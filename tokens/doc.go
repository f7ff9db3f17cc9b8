// Package tokens reads the token data of one captured model call: the prompt token ids the engine
// ran on, the token ids it generated for each choice, and the log probability of each generated
// token with its top alternatives. It reads the bodies exactly as a capture line stores them (the
// request object, the response object, the raw response text, which is the SSE body of a streamed
// call) and never changes them; the caller hands it the bytes (Call) and gets a Tokens value back.
//
// # Shapes read
//
// Only what an inference engine documents for its OpenAI-compatible endpoints is read; a call
// whose body carries none of it has Source "absent".
//
//   - vLLM, Chat Completions: top-level prompt_token_ids; per choice token_ids (asked with
//     return_token_ids) and logprobs.content[] {token, logprob, bytes, top_logprobs[]}. With
//     return_tokens_as_token_ids each token is the string "token_id:N". In a stream,
//     prompt_token_ids comes once, in the first chunk, and each chunk's choices[].token_ids holds
//     the ids of that chunk's delta.
//   - vLLM, Completions (/v1/completions): per choice token_ids and prompt_token_ids, and the
//     legacy logprobs object {tokens, token_logprobs, top_logprobs, text_offset}, whose
//     top_logprobs is one {token: logprob} object per position. The request's prompt may itself be
//     a list of ids.
//   - SGLang: per choice token_ids and prompt_token_ids (return_token_ids,
//     return_prompt_token_ids), and the response-level sglext.input_ids (the prompt) and
//     sglext.output_ids (one list per choice). In a stream the sglext ids come once, in a last
//     chunk with no choices, before [DONE]. SGLang's chat logprobs carry no ids.
//   - llama.cpp's llama-server: no id fields, but every logprob entry has the token's id:
//     logprobs.content[] {id, token, bytes, logprob, top_logprobs[{id, ...}]}, on Chat and on
//     Completions. A streamed chunk carries logprobs only for tokens that produced text. Prompt
//     ids come from the server's own chat template and tokenizer (/apply-template, /tokenize),
//     fetched by the gateway beside the call and stored on the line's token_capture object.
//
// # Where the ids came from
//
// Each choice, and the call (its first choice), says where its generated ids came from (Source):
// engine_ids (an id list the engine returned), logprob_entry_ids (the id of each logprob entry),
// logprob_token_strings ("token_id:N" logprob tokens), or absent. The prompt ids have their own
// source: engine_ids, request_ids (the prompt was sent as ids), server_render (the server's
// template and tokenizer, asked beside the call), or absent. When two sources are present they
// are compared, and the first in those orders is kept.
//
// # Findings
//
// What can be checked is checked, and a disagreement is a named Finding on the call; nothing is
// repaired or guessed. The codes are the Finding* constants; docs/tokens.md lists them with what
// each means for training. A body of a shape this package does not know gives Source absent and
// a finding, never a panic.
package tokens
