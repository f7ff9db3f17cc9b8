// Package lineage derives, from the captured calls of one rollout alone, which call continues
// which, who wrote each message of a call's context, the rollout's main chain, and, when calls
// carry token ids, whether each continuation kept the earlier tokens exactly.
//
// # Input
//
// A Call is the evidence of one captured call: its ids, dialect, whether it completed, its request
// and response objects, the ids a client declared, and its token ids when it has them. FromRecords
// builds the calls of a rollout from its records (package record); Derive does the rest and never
// fails: a call it cannot place is a root. Messages are read with the dialects' conversation
// parser (package dialect).
//
// # Relations
//
// Each call gets at most one parent, an earlier call of the rollout (lower capture index), and a
// Relation to it:
//
//   - extends: its context is the parent's context, then the parent's answer as the model wrote it,
//     then new messages;
//   - retry: the same context as the parent, whose call did not complete (error, cancelled,
//     incomplete), asked again;
//   - resample: the same context as the parent, which did complete: another answer to the same
//     question;
//   - fork: it continues from an earlier point than the latest call there: either it continues the
//     parent's answer when another call already did (a branch), or it takes the parent's context
//     but not its answer (the answer dropped, replaced or edited);
//   - compaction: its history is replaced by what an earlier call answered: a line of that answer
//     (at least 64 bytes) pasted into a client message (a summary), or the answer itself as a turn
//     of a history that no longer starts the same way. The new history may keep the old one's first
//     messages (Codex keeps the user's): a call that would fork from an earlier call's bare context
//     but holds the summary a later call wrote is a compaction of that later call;
//   - root: no earlier call explains it (the first call, a side call such as a title, a sub-agent).
//
// How the parent was found is the Evidence, strongest first: a declared header carried by the
// capture line (EvidenceDeclared), the Responses previous_response_id (EvidencePreviousResponse),
// message matching (EvidenceMessages) and token-id prefixes (EvidenceTokens).
//
// # Message matching
//
// A context is compared as a list of segments: every message that is not the assistant's is one
// segment (role, text, tool results by call id, other parts), and a run of consecutive assistant
// messages is one turn (Responses splits one answer into several items). A turn is compared
// canonically: its text (the texts joined, surrounding white space trimmed), then its tool calls
// by name and arguments compared as JSON values (key order and spacing do not matter). Reasoning is
// left out of the comparison (harnesses drop or keep it) and so are tool call ids. The answer of a
// call is compared the same way, so a turn equals an answer when the model's words and calls came
// back unchanged.
//
// # Authors
//
// Each message of a call's context has an Author: AuthorModel when it is an assistant turn equal to
// what an earlier call of the rollout answered, AuthorClient otherwise, an edited or injected
// assistant turn included.
//
// # Main chain
//
// The main chain is the longest path of extends edges (and forks that continue the parent's
// answer: the child's context still holds the parent's context and answer exactly) and compaction
// edges (the same conversation going on with its history replaced by the summary the parent wrote)
// ending in a completed call; a retry or resample edge is passed through to the call it repeats,
// which is not itself on the chain (its answer was not continued). Ties: the chain that ends in the
// later call (higher capture index) wins. Lineage.Segments splits a chain at its compactions into
// coherent conversations, as package samples exports them.
//
// # Token audit
//
// With token ids on both ends of a chained edge (parent's prompt and generated ids, child's prompt
// ids), Audit checks that the parent's prompt ids followed by its generated ids are an exact prefix
// of the child's prompt ids, and when not, names the first position that differs and what is
// there on each side.
package lineage
