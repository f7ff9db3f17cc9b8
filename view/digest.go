package view

import (
	"cmp"
	"errors"
	"hash/maphash"
	"slices"
	"sync"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/record"
)

// A rollout's digest is what its page and its calls' pages need of every call without reading
// every line again: the call's record without payloads, and a hash of each part of its messages
// (the keys markNew compares), so that telling a call's new messages from resent history takes
// the call's own line and the digest. It is built by one pass over the capture file, one line in
// memory at a time, and then extended with what was appended. The index keeps the digests of the
// rollouts looked at last (maxDigests, maxDigestKeys), not of every rollout.

const (
	// maxDigests is how many rollouts' digests the index keeps.
	maxDigests = 8
	// maxDigestKeys bounds the part hashes kept over all digests (8 bytes each: 32 MiB).
	maxDigestKeys = 4 << 20
)

// digest is one rollout's digest. mu is held while it is extended or read.
type digest struct {
	mu     sync.Mutex
	store  *capture.Store
	resume capture.Resume
	calls  []digestCall // readable lines, in file order
	done   int          // calls from complete lines (the rest is read again)
	keys   int          // part hashes held
	used   uint64       // the index's digest clock at the last use
}

// digestCall is one call of a digest.
type digestCall struct {
	index, line int
	start       float64 // started_at; NaN unknown
	record      []byte  // the record without payloads, as JSON
	in          [][]uint64
	out         []uint64
}

var partSeed = maphash.MakeSeed()

// messageKeys hashes what markNew compares of one message: each part's partKey, or for a message
// without parts its role's empty key.
func messageKeys(m *Message) []uint64 {
	if len(m.Parts) == 0 {
		return []uint64{maphash.String(partSeed, m.Role+"\x00(empty)")}
	}
	keys := make([]uint64, len(m.Parts))
	for j := range m.Parts {
		keys[j] = maphash.String(partSeed, partKey(m.Role, &m.Parts[j]))
	}
	return keys
}

// digestOf returns rollout id's digest, extended to the end of its capture file in st, with its
// mu held: the caller unlocks it.
func (x *Index) digestOf(id string, st *capture.Store) (*digest, error) {
	x.digMu.Lock()
	if x.digests == nil {
		x.digests = map[string]*digest{}
	}
	d := x.digests[id]
	if d == nil || d.store != st {
		d = &digest{store: st}
		x.digests[id] = d
	}
	x.digClock++
	d.used = x.digClock
	x.digMu.Unlock()

	d.mu.Lock()
	err := d.extend(id)
	if errors.Is(err, capture.ErrRewritten) {
		d.resume, d.calls, d.done, d.keys = capture.Resume{}, nil, 0, 0
		err = d.extend(id)
	}
	if err != nil {
		d.mu.Unlock()
		return nil, err
	}
	keys := d.keys
	x.digMu.Lock()
	x.trimDigests(d, keys)
	x.digMu.Unlock()
	return d, nil
}

// trimDigests drops the least recently used digests (never keep, whose size is keepKeys) until at
// most maxDigests remain and they hold at most maxDigestKeys hashes. x.digMu is held.
func (x *Index) trimDigests(keep *digest, keepKeys int) {
	for {
		total := keepKeys
		var oldestID string
		var oldest *digest
		for id, d := range x.digests {
			if d == keep {
				continue
			}
			total += d.keys
			if oldest == nil || d.used < oldest.used {
				oldestID, oldest = id, d
			}
		}
		if oldest == nil || len(x.digests) <= maxDigests && total <= maxDigestKeys {
			return
		}
		delete(x.digests, oldestID)
	}
}

// extend reads what was appended to the capture file since the digest last looked.
func (d *digest) extend(id string) error {
	for i := d.done; i < len(d.calls); i++ {
		d.keys -= d.calls[i].keyCount()
	}
	d.calls = d.calls[:d.done]
	resume, err := d.store.ScanFrom(id, d.resume, func(l capture.ScannedLine) {
		if l.Complete {
			defer func() { d.done = len(d.calls) }()
		}
		if capture.CheckLine(l.Data) != nil {
			return
		}
		r, err := record.BuildRecord(l.Data, l.Index)
		if err != nil {
			return
		}
		conv := conversation(r)
		c := digestCall{index: l.Index, line: l.Line, start: f64(r.StartedAt), record: r.AppendJSON(nil, false),
			in: make([][]uint64, len(conv.Input))}
		for i := range conv.Input {
			c.in[i] = messageKeys(&conv.Input[i])
		}
		for i := range conv.Output {
			c.out = append(c.out, messageKeys(&conv.Output[i])...)
		}
		d.keys += c.keyCount()
		d.calls = append(d.calls, c)
	})
	if err == nil {
		d.resume = resume
	}
	return err
}

func (c *digestCall) keyCount() int {
	n := len(c.out)
	for _, k := range c.in {
		n += len(k)
	}
	return n
}

// order returns the positions of d.calls in started_at order (capture order for equal or unknown
// times, which sort first), the order in which markNew takes calls.
func (d *digest) order() []int {
	order := make([]int, len(d.calls))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(d.calls[a].start, d.calls[b].start) })
	return order
}

// newCounts returns, per call in file order, how many of its input messages are new (markNew's
// rule over the digest's keys).
func (d *digest) newCounts() []int {
	counts := make([]int, len(d.calls))
	seen := map[uint64]struct{}{}
	for _, i := range d.order() {
		c := &d.calls[i]
		for _, keys := range c.in {
			if anyUnseen(keys, seen) {
				counts[i]++
			}
		}
		c.addTo(seen)
	}
	return counts
}

// seenBefore returns the keys of the calls markNew takes before the call of capture index index
// (started at start): the history that call's messages are compared with.
func (d *digest) seenBefore(index int, start float64) map[uint64]struct{} {
	seen := map[uint64]struct{}{}
	for _, i := range d.order() {
		c := &d.calls[i]
		if c.index == index {
			break
		}
		// A call the digest does not hold yet: stop where it would sort.
		if cmp.Compare(c.start, start) > 0 {
			break
		}
		c.addTo(seen)
	}
	return seen
}

func (c *digestCall) addTo(seen map[uint64]struct{}) {
	for _, keys := range c.in {
		for _, k := range keys {
			seen[k] = struct{}{}
		}
	}
	for _, k := range c.out {
		seen[k] = struct{}{}
	}
}

func anyUnseen(keys []uint64, seen map[uint64]struct{}) bool {
	for _, k := range keys {
		if _, ok := seen[k]; !ok {
			return true
		}
	}
	return false
}

// markCall sets New on one call's messages, given the keys of the calls before it: an input
// message is new when one of its keys is not among them; every output message is new.
func markCall(c *Conversation, seen map[uint64]struct{}) {
	for i := range c.Input {
		c.Input[i].New = anyUnseen(messageKeys(&c.Input[i]), seen)
	}
	for i := range c.Output {
		c.Output[i].New = true
	}
}
