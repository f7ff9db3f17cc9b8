//go:build unix

// These tests write capture dirs, which the store does on Linux and macOS only.

package capture

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// listTree lists every path under dir (relative), directories with a trailing '/'.
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	return out
}

// Claims do not cost a file per call: 200 calls in flight over 20 rollouts are one slot file, and
// no per-rollout directory exists before, during or after.
func TestClaimsNoFilePerCall(t *testing.T) {
	s := newStore(t)
	var claims []*Claim
	for i := range 200 {
		c, err := s.Claim(fmt.Sprintf("r-%02d", i%20), NewModelCallID())
		if err != nil {
			t.Fatal(err)
		}
		claims = append(claims, c)
	}
	tree := listTree(t, s.Dir())
	if len(tree) != 2 || tree[0] != ClaimSlotsDir+"/" || !strings.HasSuffix(tree[1], SlotFileSuffix) {
		t.Fatalf("capture dir with 200 claims: %v; want the slot dir and one slot file", tree)
	}
	for r := range 20 {
		if c, err := s.Claims(fmt.Sprintf("r-%02d", r)); err != nil || c != (ClaimCount{Live: 10}) {
			t.Fatalf("rollout %d: %+v %v; want 10 live", r, c, err)
		}
	}
	all, err := s.AllClaims()
	if err != nil || len(all) != 20 || all["r-07"] != (ClaimCount{Live: 10}) {
		t.Fatalf("AllClaims = %v %v", all, err)
	}
	for _, c := range claims {
		if err := c.Release(); err != nil {
			t.Fatal(err)
		}
	}
	if c, _ := s.Claims("r-00"); c != (ClaimCount{}) {
		t.Errorf("after release: %+v", c)
	}
	if tree := listTree(t, s.Dir()); len(tree) != 2 {
		t.Errorf("after release: %v", tree)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if tree := listTree(t, s.Dir()); len(tree) != 1 {
		t.Errorf("after Close: %v; want only the empty slot dir", tree)
	}
}

// writeSlotFile writes a slot file that no process holds (its owner is gone) with the given raw
// slots after a header for pid.
func writeSlotFile(t *testing.T, s *Store, name string, pid int, slots ...[]byte) {
	t.Helper()
	dir := filepath.Join(s.Dir(), ClaimSlotsDir)
	os.MkdirAll(dir, 0o750)
	b := encodeHeader(pid, localHost(), 1)
	for _, sl := range slots {
		b = append(b, sl...)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o640); err != nil {
		t.Fatal(err)
	}
}

func slot(id, mcid string) []byte {
	rec := make([]byte, SlotSize)
	encodeSlot(rec, id, mcid, 1)
	return rec
}

// A claim is complete or absent: a record that stays torn (its checksum does not match) is stale,
// never live, and so is a per-call claim file that is empty or not JSON (a writer that died between
// creating and writing it). A dead owner's complete records are stale too.
func TestUnreadableClaimsAreStale(t *testing.T) {
	s := newStore(t)
	torn := slot("r", "torn-call")
	torn[300] ^= 0xff // a byte of the record changed after the checksum: torn
	garbage := make([]byte, SlotSize)
	copy(garbage, "not a record at all")
	writeSlotFile(t, s, "99-dead.slots", 1<<30, slot("r", "dead-call"), make([]byte, SlotSize), torn, garbage)
	legacy, _ := s.ClaimsPath("r")
	os.MkdirAll(legacy, 0o750)
	os.WriteFile(filepath.Join(legacy, "empty-claim"), nil, 0o640)
	os.WriteFile(filepath.Join(legacy, "half-claim"), []byte(`{"pid":`), 0o640)
	c, err := s.Claims("r")
	if err != nil || c != (ClaimCount{Stale: 4}) {
		t.Fatalf("Claims = %+v %v; want 4 stale (dead, torn, empty, half-written) and nothing live", c, err)
	}
	// Clear takes the dead owner's records away and removes the file once it holds none.
	if err := s.Clear("r"); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.Claims("r"); c != (ClaimCount{}) {
		t.Errorf("after Clear: %+v", c)
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), ClaimSlotsDir, "99-dead.slots")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("dead slot file with only a foreign record left: %v", err)
	}
}

// Claims of another process are live while it runs, whatever its pid, and stale the moment it is
// killed; a reader polling while that process claims and releases as fast as it can never sees a
// half-written claim (nothing stale while it lives, never more than its one claim).
func TestClaimsAcrossProcesses(t *testing.T) {
	s := newStore(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestClaimChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CAPTURE_CLAIM_CHILD_DIR="+s.Dir())
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || sc.Text() != "claimed" {
		t.Fatalf("child: %q", sc.Text())
	}
	if c, err := s.Claims("held"); err != nil || c != (ClaimCount{Live: 3}) {
		t.Fatalf("child's held claims: %+v %v; want 3 live", c, err)
	}
	for range 300 {
		c, err := s.Claims("churn")
		if err != nil {
			t.Fatal(err)
		}
		if c.Stale != 0 || c.Live > 1 {
			t.Fatalf("while the child claims and releases: %+v; a claim was read half-written", c)
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	if c, err := s.Claims("held"); err != nil || c != (ClaimCount{Stale: 3}) {
		t.Fatalf("after kill -9: %+v %v; want 3 stale", c, err)
	}
}

// TestClaimChild is the child of TestClaimsAcrossProcesses: it holds three claims of "held", says
// "claimed", and claims and releases one call of "churn" in a loop until killed.
func TestClaimChild(t *testing.T) {
	dir := os.Getenv("CAPTURE_CLAIM_CHILD_DIR")
	if dir == "" {
		t.Skip("only runs as a child of TestClaimsAcrossProcesses")
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := s.Claim("held", NewModelCallID()); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Println("claimed")
	for {
		c, err := s.Claim("churn", NewModelCallID())
		if err != nil {
			t.Fatal(err)
		}
		c.Release()
	}
}

// Capture files stay open across appends, but a file that Clear removed or that was replaced is
// noticed on the next append and the current one written instead; the number kept open is bounded.
func TestKeptFilesReopenAndBound(t *testing.T) {
	s := newStore(t)
	s.MaxOpenFiles = 4
	other, _ := OpenExisting(s.Dir()) // another writer of the same dir, with its own descriptors
	if err := s.Append("r", []byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := other.Clear("r"); err != nil {
		t.Fatal(err)
	}
	if err := s.Append("r", []byte(`{"n":2}`)); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, s, "r"); got != "{\"n\":2}\n" {
		t.Errorf("after a clear by another writer: %q; want the new line in a new file", got)
	}
	// Replaced by rename (a tool rewriting the file).
	p, _ := s.CapturePath("r")
	os.WriteFile(p+".new", []byte("{\"n\":0}\n"), 0o640)
	os.Rename(p+".new", p)
	if err := s.Append("r", []byte(`{"n":3}`)); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, s, "r"); got != "{\"n\":0}\n{\"n\":3}\n" {
		t.Errorf("after a replace: %q", got)
	}
	// Bounded: 10 rollouts, at most 4 files open between appends.
	for i := range 10 {
		if err := s.Append(fmt.Sprintf("b-%d", i), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.files.openCount(); n > 4 {
		t.Errorf("%d capture files open, bound 4", n)
	}
	// The file is really kept: the same descriptor serves the next append.
	s.Append("b-9", []byte(`{}`))
	s.files.mu.Lock()
	e := s.files.m["b-9"]
	s.files.mu.Unlock()
	if e == nil {
		t.Fatal("the most recent file is not kept open")
	}
	fd := e.f.Fd()
	s.Append("b-9", []byte(`{}`))
	if s.files.m["b-9"] != e || e.f.Fd() != fd {
		t.Error("a kept file was reopened without a reason")
	}
	s.Close()
	if n := s.files.openCount(); n != 0 {
		t.Errorf("%d files open after Close", n)
	}
}

// Group commit: appends to one file that arrive while a sync is in progress are written together
// and covered by one sync, and no caller returns before the sync that covers its line.
func TestGroupCommit(t *testing.T) {
	s := newStore(t)
	if err := s.Append("g", []byte(`{"first":true}`)); err != nil { // the file exists: no dir sync
		t.Fatal(err)
	}
	var mu sync.Mutex
	syncs := 0
	gate := make(chan struct{})
	syncHook = func(f *os.File) error {
		<-gate
		mu.Lock()
		syncs++
		mu.Unlock()
		return f.Sync()
	}
	defer func() { syncHook = nil }()
	var returned sync.WaitGroup
	done := make(chan int, 16)
	start := func(i int) {
		returned.Add(1)
		go func() {
			defer returned.Done()
			if err := s.Append("g", []byte(fmt.Sprintf(`{"i":%d}`, i))); err != nil {
				t.Error(err)
			}
			mu.Lock()
			done <- syncs
			mu.Unlock()
		}()
	}
	start(0) // the leader: blocks in its sync
	e := awaitEntry(t, s, "g")
	awaitPending(t, e, 0, true)
	for i := 1; i <= 7; i++ {
		start(i)
	}
	awaitPending(t, e, 7, true)
	if len(done) != 0 {
		t.Fatal("a caller returned before any sync")
	}
	gate <- struct{}{} // the first sync (the leader's line) completes
	if got := <-done; got != 1 {
		t.Fatalf("leader returned after %d syncs", got)
	}
	awaitPending(t, e, 0, true) // the next leader took the 7 queued lines
	if len(done) != 0 {
		t.Fatal("a follower returned before the sync covering its line")
	}
	gate <- struct{}{} // one sync covers all seven
	returned.Wait()
	close(done)
	n := 0
	for got := range done {
		n++
		if got != 2 {
			t.Errorf("a follower returned after %d syncs, want 2", got)
		}
	}
	if n != 7 || syncs != 2 {
		t.Errorf("%d followers, %d syncs; want 7 and 2", n, syncs)
	}
	entries, err := s.Read("g")
	if err != nil || len(entries) != 9 {
		t.Fatalf("%d lines, %v; want 9", len(entries), err)
	}
}

func awaitEntry(t *testing.T, s *Store, id string) *openFile {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		s.files.mu.Lock()
		e := s.files.m[id]
		s.files.mu.Unlock()
		if e != nil {
			return e
		}
	}
	t.Fatal("no open file")
	return nil
}

// awaitPending polls until e has n queued appends and a leader (there is no event to wait on).
func awaitPending(t *testing.T, e *openFile, n int, leading bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		e.gmu.Lock()
		p, l := len(e.pending), e.leading
		e.gmu.Unlock()
		if p == n && l == leading {
			return
		}
	}
	t.Fatalf("pending never reached %d", n)
}

// writeCall is one whole call of rollout id through s: claim callID, append its line, release.
func writeCall(t *testing.T, s *Store, id, callID string) {
	t.Helper()
	c, err := s.Claim(id, callID)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AppendExchange(id, &Exchange{ModelCallID: callID, Dialect: "chat"}); err != nil {
		t.Fatal(err)
	}
	c.Release()
}

// checkOrphaned checks that rollout id's capture holds the next attempt's line ("new-call") alone
// and that the old call's line ("old-call") went to the orphan file, whose path it returns.
func checkOrphaned(t *testing.T, s *Store, id string) string {
	t.Helper()
	if got := readFile(t, s, id); !strings.Contains(got, "new-call") || strings.Contains(got, "old-call") || strings.Count(got, "\n") != 1 {
		t.Errorf("the next attempt's capture: %q", got)
	}
	op, _ := s.OrphanPath(id)
	if b, err := os.ReadFile(op); err != nil || !strings.Contains(string(b), "old-call") || strings.Count(string(b), "\n") != 1 {
		t.Errorf("orphan file: %q %v", b, err)
	}
	return op
}

// A call in flight when its rollout is cleared writes its line to the orphan file, never into the
// next attempt's capture; the clear reports it, and readers count the claim as cleared, not live.
func TestClearInFlightGoesToOrphan(t *testing.T) {
	s := newStore(t)
	old, err := s.Claim("o", "old-call")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append("o", []byte(`{"attempt":1,"n":1}`)); err != nil {
		t.Fatal(err)
	}
	rep, err := s.ClearRollout("o")
	if err != nil || rep.InFlight != 1 || !rep.Removed {
		t.Fatalf("ClearRollout = %+v %v", rep, err)
	}
	if c, _ := s.Claims("o"); c != (ClaimCount{Cleared: 1}) {
		t.Errorf("claims after the clear: %+v; want one cleared", c)
	}
	// The next attempt starts in another process (its own store) while the old call is in flight.
	next, _ := OpenExisting(s.Dir())
	writeCall(t, next, "o", "new-call")
	if err := s.AppendExchange("o", &Exchange{ModelCallID: "old-call", Dialect: "chat"}); err != nil {
		t.Fatal(err)
	}
	old.Release()
	op := checkOrphaned(t, s, "o")
	if s.OrphanedLines() != 1 {
		t.Errorf("orphaned lines %d", s.OrphanedLines())
	}
	// The next clear, with nothing in flight, removes the list of cleared calls but not the orphans.
	if rep, err := s.ClearRollout("o"); err != nil || rep.InFlight != 0 {
		t.Fatal(rep, err)
	}
	cp, _ := s.ClearedPath("o")
	if _, err := os.Lstat(cp); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("cleared list left: %v", err)
	}
	if _, err := os.Stat(op); err != nil {
		t.Errorf("clear removed the orphan file: %v", err)
	}
}

// TestClearInFlightKeptFile is TestClearInFlightGoesToOrphan with the capture file already open
// when the call is claimed (the claim pins it, and an append through a pinned file that is still at
// its path skips the cleared lookup): whoever clears, and whether or not the next attempt wrote
// first, the old call's line goes to the orphan file.
func TestClearInFlightKeptFile(t *testing.T) {
	for _, tc := range []struct {
		name           string
		otherClearer   bool // the clear runs in another process (its own Store)
		nextWriteFirst bool // the next attempt appends before the old call does
	}{
		{"same store, old call first", false, false},
		{"same store, next attempt first", false, true},
		{"other store, old call first", true, false},
		{"other store, next attempt first", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			if err := s.Append("o", []byte(`{"attempt":1,"n":1}`)); err != nil {
				t.Fatal(err)
			}
			old, err := s.Claim("o", "old-call") // the file is open: the claim pins it
			if err != nil {
				t.Fatal(err)
			}
			if old.file == nil {
				t.Fatal("the claim did not pin the open capture file")
			}
			clearer := s
			if tc.otherClearer {
				clearer, _ = OpenExisting(s.Dir())
			}
			if rep, err := clearer.ClearRollout("o"); err != nil || rep.InFlight != 1 || !rep.Removed {
				t.Fatalf("ClearRollout = %+v %v", rep, err)
			}
			next, _ := OpenExisting(s.Dir())
			if tc.nextWriteFirst {
				writeCall(t, next, "o", "new-call")
			}
			if err := s.AppendExchange("o", &Exchange{ModelCallID: "old-call", Dialect: "chat"}); err != nil {
				t.Fatal(err)
			}
			old.Release()
			if !tc.nextWriteFirst {
				writeCall(t, next, "o", "new-call")
			}
			checkOrphaned(t, s, "o")
		})
	}
	// Without a clear, the pinned file takes the line (no orphan).
	s := newStore(t)
	if err := s.Append("k", []byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	writeCall(t, s, "k", "call")
	if got := readFile(t, s, "k"); strings.Count(got, "\n") != 2 {
		t.Errorf("capture: %q", got)
	}
	if s.files.openCount() != 1 {
		t.Errorf("open files %d after the claim's release, want the one kept", s.files.openCount())
	}
}

// No store operation follows a symlink: appends, the marker and claims refuse one (ErrSymlink,
// counted), and the target is never touched.
func TestStoreRefusesSymlinks(t *testing.T) {
	s := newStore(t)
	outside := t.TempDir()
	target := filepath.Join(outside, "t")
	os.WriteFile(target, []byte("x\n"), 0o600)
	cp, _ := s.CapturePath("s")
	mp, _ := s.MarkerPath("s")
	os.Symlink(target, cp)
	os.Symlink(filepath.Join(outside, "m"), mp)
	if err := s.Append("s", []byte(`{}`)); !errors.Is(err, ErrSymlink) {
		t.Errorf("Append through a symlink: %v", err)
	}
	if err := s.MarkIncomplete("s"); !errors.Is(err, ErrSymlink) {
		t.Errorf("MarkIncomplete through a symlink: %v", err)
	}
	os.Symlink(outside, filepath.Join(s.Dir(), ClaimSlotsDir))
	if _, err := s.Claim("s", "c"); !errors.Is(err, ErrSymlink) {
		t.Errorf("Claim into a symlinked slot dir: %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "x\n" {
		t.Errorf("target written: %q", b)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Errorf("files created outside: %v", ents)
	}
	if n := s.SymlinksRefused(); n != 3 {
		t.Errorf("refused %d, want 3", n)
	}
}
