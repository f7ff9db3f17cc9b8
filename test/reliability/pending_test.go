//go:build unix

package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/rollout"
)

// Item 9: merge while captures are still being written. Outstanding claims hold the merge's
// quiescence wait; claims still live after the wait give model_call_capture_pending with their
// count (never a silently short call list), claims of dead processes give
// model_call_capture_incomplete, and a rerun after the writes finished gives the complete set.

// okExchange is a small successful chat exchange with model call id mcid.
func okExchange(mcid string, tokensIn int) *capture.Exchange {
	status := 200
	return &capture.Exchange{
		ModelCallID: mcid,
		Dialect:     "chat",
		StartedAt:   1.7e9,
		CompletedAt: 1.7e9 + 1,
		LatencyMS:   1000,
		StatusCode:  &status,
		Request:     json.RawMessage(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`),
		Response: json.RawMessage(fmt.Sprintf(`{"id":"c-%s","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":2,"total_tokens":%d}}`,
			mcid, tokensIn, tokensIn+2)),
	}
}

// attachment is the part of ng_model_call_capture the tests look at.
type attachment struct {
	RolloutID string `json:"rollout_id"`
	Calls     []struct {
		ModelCallID   string  `json:"model_call_id"`
		CallIndex     int     `json:"call_index"`
		ErrorCategory *string `json:"error_category"`
	} `json:"calls"`
	Gaps []rollout.Gap `json:"gaps"`
}

// mergeOne merges one rollout record and returns the attachment, checking that every byte of the
// record outside ng_model_call_capture is kept (the field is appended last to a record without it).
func mergeOne(t *testing.T, m *modelcalls.Merger, record string) attachment {
	t.Helper()
	out, res, err := m.Merge(context.Background(), []byte(record))
	return checkMerged(t, record, out, res, err)
}

// checkMerged is mergeOne's check of a merge result, for merges run on another goroutine.
func checkMerged(t *testing.T, record string, out []byte, res modelcalls.MergeResult, err error) attachment {
	t.Helper()
	if err != nil || !res.Attached {
		t.Fatalf("merge: %v (attached %v)", err, res.Attached)
	}
	head := record[:len(record)-1] // the record without its closing brace
	if !bytes.HasPrefix(out, []byte(head+`,"ng_model_call_capture":`)) || out[len(out)-1] != '}' {
		t.Fatalf("merge changed the record outside its attachment:\n%s", out)
	}
	var rec struct {
		Capture attachment `json:"ng_model_call_capture"`
	}
	if err := json.Unmarshal(out, &rec); err != nil {
		t.Fatalf("merged record: %v\n%s", err, out)
	}
	return rec.Capture
}

func gapCodes(gs []rollout.Gap) map[string]string {
	m := map[string]string{}
	for _, g := range gs {
		m[g.Code] = g.Detail
	}
	return m
}

func TestMergeWhileWriting(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, capture.Open, dir)
	const id = "pending-0"
	const done, outstanding = 3, 5
	for i := range done {
		if err := store.AppendExchange(id, okExchange(fmt.Sprintf("done-%d", i), 10)); err != nil {
			t.Fatal(err)
		}
	}
	// Writers that claimed their call and have not written yet, as a gateway does while the
	// upstream is still answering.
	release := make(chan struct{})
	var wg sync.WaitGroup
	var claimed sync.WaitGroup
	claimed.Add(outstanding)
	errs := make(chan error, outstanding)
	for i := range outstanding {
		wg.Go(func() {
			mcid := fmt.Sprintf("late-%d", i)
			c, err := store.Claim(id, mcid)
			claimed.Done()
			if err != nil {
				errs <- err
				return
			}
			<-release
			if err := store.AppendExchange(id, okExchange(mcid, 20)); err != nil {
				errs <- err
			}
			if err := c.Release(); err != nil {
				errs <- err
			}
		})
	}
	claimed.Wait()
	record := `{"_ng_rollout_id":"pending-0","reward":1.0,"responses_create_params":{"input":[]}}`

	// A merge whose wait ends before the writers: pending with the count, the durable calls kept.
	short, err := modelcalls.NewMerger([]string{dir}, modelcalls.MergeOptions{DrainTimeout: 200 * time.Millisecond, DrainPoll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	a := mergeOne(t, short, record)
	waited := time.Since(t0)
	g := gapCodes(a.Gaps)
	if len(a.Calls) != done || g[rollout.GapCapturePending] != "count="+strconv.Itoa(outstanding) || len(a.Gaps) != 1 {
		t.Fatalf("merge during writes: %d calls, gaps %+v; want %d calls and only pending count=%d", len(a.Calls), a.Gaps, done, outstanding)
	}
	if waited < 200*time.Millisecond {
		t.Fatalf("merge returned after %v, before its 200ms wait for the claims", waited)
	}

	// A merge that starts while the writes are outstanding and outlasts them: it waits, then reads
	// everything.
	long, err := modelcalls.NewMerger([]string{dir}, modelcalls.MergeOptions{DrainTimeout: waitFor, DrainPoll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		out []byte
		res modelcalls.MergeResult
		err error
	}
	got := make(chan result, 1)
	go func() {
		out, res, err := long.Merge(context.Background(), []byte(record))
		got <- result{out, res, err}
	}()
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r := <-got
	a = checkMerged(t, record, r.out, r.res, r.err)
	if len(a.Calls) != done+outstanding || len(a.Gaps) != 0 {
		t.Fatalf("merge across the writes: %d calls, gaps %+v; want %d calls and no gaps", len(a.Calls), a.Gaps, done+outstanding)
	}
	// The rerun after the writes finished gives the same complete set, in durable order.
	a = mergeOne(t, short, record)
	if len(a.Calls) != done+outstanding || len(a.Gaps) != 0 {
		t.Fatalf("rerun: %d calls, gaps %+v", len(a.Calls), a.Gaps)
	}
	for i, c := range a.Calls {
		if c.CallIndex != i {
			t.Fatalf("call %d has call_index %d", i, c.CallIndex)
		}
	}
}

// claimerRole claims MR_COUNT model calls of rollout MR_ROLLOUT in MR_DIR, prints "claimed", and
// holds them until killed (or stdin closes).
func claimerRole() int {
	store, err := capture.Open(os.Getenv("MR_DIR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	n, _ := strconv.Atoi(os.Getenv("MR_COUNT"))
	for range n {
		if _, err := store.Claim(os.Getenv("MR_ROLLOUT"), capture.NewModelCallID()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Println("claimed")
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// A gateway process that dies with calls in flight leaves claims nobody will release. A merge must
// not wait for them (their process is gone) and must not pretend the capture is complete.
func TestMergeAfterWriterDied(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, capture.Open, dir)
	const id = "died-0"
	if err := store.AppendExchange(id, okExchange("before-crash", 10)); err != nil {
		t.Fatal(err)
	}
	p := startHelper(t, "claimer", "MR_DIR="+dir, "MR_ROLLOUT="+id, "MR_COUNT=2")
	p.expect("claimed")

	// While the process lives, its claims are live: pending.
	m, err := modelcalls.NewMerger([]string{dir}, modelcalls.MergeOptions{DrainTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	record := `{"_ng_task_index":7,"_ng_rollout_index":0,"_ng_rollout_id":"died-0"}`
	a := mergeOne(t, m, record)
	if g := gapCodes(a.Gaps); g[rollout.GapCapturePending] != "count=2" || len(a.Calls) != 1 {
		t.Fatalf("live claims: %d calls, gaps %+v", len(a.Calls), a.Gaps)
	}

	p.kill()
	long, err := modelcalls.NewMerger([]string{dir}, modelcalls.MergeOptions{DrainTimeout: waitFor})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	a = mergeOne(t, long, record)
	if elapsed := time.Since(t0); elapsed > waitFor/2 {
		t.Fatalf("merge waited %v for claims of a dead process", elapsed)
	}
	g := gapCodes(a.Gaps)
	if detail, ok := g[rollout.GapCaptureIncomplete]; !ok || detail != "stale_claims=2" || len(a.Calls) != 1 {
		t.Fatalf("stale claims: %d calls, gaps %+v; want 1 call and incomplete stale_claims=2", len(a.Calls), a.Gaps)
	}
	if _, ok := g[rollout.GapCapturePending]; ok {
		t.Fatal("claims of a dead process reported as pending")
	}
}

// The same through the gateway: calls whose upstream has not answered yet hold claims, so a merge
// in the meantime reports them as pending next to the calls already durable, and a rerun once they
// were answered attaches every call.
func TestMergeDuringGatewayCalls(t *testing.T) {
	const done, outstanding = 4, 6
	upURL, arrived, release := heldUpstream(t, outstanding)
	g := startGateway(t, upURL, nil)
	const id = "gw-pending-0"
	for i := range done {
		if _, err := echoCall(t, g.client, g.srv.URL, id, fmt.Sprintf("done-%d", i), i%2 == 0, 10); err != nil {
			t.Fatal(err)
		}
	}
	errs := heldCalls(t, g.client, g.srv.URL, id, outstanding)
	awaitArrived(t, arrived, outstanding)
	awaitClaims(t, g.store, id, outstanding)
	record := `{"_ng_task_index":3,"_ng_rollout_index":1,"_ng_rollout_id":"gw-pending-0","response":{"output":[]}}`
	short, err := modelcalls.NewMerger([]string{g.dir}, modelcalls.MergeOptions{DrainTimeout: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	a := mergeOne(t, short, record)
	if gp := gapCodes(a.Gaps); len(a.Calls) != done || gp[rollout.GapCapturePending] != fmt.Sprintf("count=%d", outstanding) || len(a.Gaps) != 1 {
		t.Fatalf("merge during the calls: %d calls, gaps %+v; want %d and pending count=%d", len(a.Calls), a.Gaps, done, outstanding)
	}
	close(release)
	for range outstanding {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	long, err := modelcalls.NewMerger([]string{g.dir}, modelcalls.MergeOptions{DrainTimeout: waitFor})
	if err != nil {
		t.Fatal(err)
	}
	a = mergeOne(t, long, record)
	if len(a.Calls) != done+outstanding || len(a.Gaps) != 0 {
		t.Fatalf("rerun: %d calls, gaps %+v; want %d and none", len(a.Calls), a.Gaps, done+outstanding)
	}
	for _, c := range a.Calls {
		if c.ErrorCategory != nil {
			t.Errorf("call %s: %s", c.ModelCallID, *c.ErrorCategory)
		}
	}
}
