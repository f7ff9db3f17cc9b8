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

// SplitPath splits a request path of the form /ng-rollout/<id>/<rest> into the id and "/<rest>".
// The id is any non-empty run of characters other than '/', not validated here (the gateway
// validates it and answers invalid ids itself). ok is false when p has no such prefix or nothing
// follows the id ("/ng-rollout/abc" does not match, as NeMo Gym's capture middleware does not
// route it). Only one prefix is stripped.
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
	return tail[:slash], tail[slash:], true
}
