package rollout

import "strings"

// PrefixSegment is the first path segment of a rollout-keyed model call URL, NeMo Gym's prefix
// protocol: {base}/ng-rollout/<rollout_id>/v1/...
const PrefixSegment = "ng-rollout"

// PathPrefix returns "/ng-rollout/<id>", or "" for an empty id.
func PathPrefix(id string) string {
	if id == "" {
		return ""
	}
	return "/" + PrefixSegment + "/" + id
}

// ApplyPrefix returns base with trailing slashes removed and the rollout prefix appended
// ("http://h:1/" + "r1" gives "http://h:1/ng-rollout/r1"); an empty id leaves base unchanged.
func ApplyPrefix(base, id string) string {
	if id == "" {
		return base
	}
	return strings.TrimRight(base, "/") + PathPrefix(id)
}

// TokenCaptureSegment is the path segment NeMo Gym's token-id capture adds after the rollout id:
// an agent whose training tokens are wanted calls /ng-rollout/<id>/training-token-capture/v1/...,
// and the call belongs to rollout <id> as if the segment were not there.
const TokenCaptureSegment = "training-token-capture"

// SplitPath splits a request path of the form /ng-rollout/<id>/<rest> into the id and "/<rest>".
// The id is any non-empty run of characters other than '/', not validated here (the gateway
// validates it and answers invalid ids itself). ok is false when p has no such prefix or nothing
// follows the id ("/ng-rollout/abc" does not match, as NeMo Gym's capture middleware does not
// route it). Only one prefix is stripped. A TokenCaptureSegment right after the id, followed by
// a slash, is stripped with the prefix, as NeMo Gym does: /ng-rollout/r1/training-token-capture/
// v1/chat/completions gives r1 and /v1/chat/completions.
func SplitPath(p string) (id, rest string, ok bool) {
	const lead = "/" + PrefixSegment + "/"
	if !strings.HasPrefix(p, lead) {
		return "", "", false
	}
	tail := p[len(lead):]
	slash := strings.IndexByte(tail, '/')
	if slash <= 0 {
		return "", "", false
	}
	id, rest = tail[:slash], tail[slash:]
	if r, cut := strings.CutPrefix(rest, "/"+TokenCaptureSegment+"/"); cut {
		rest = "/" + r
	}
	return id, rest, true
}
