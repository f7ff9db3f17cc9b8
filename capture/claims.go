package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcalls/modelcalls/internal/fsutil"
	"github.com/modelcalls/modelcalls/rollout"
)

// Claim slot files (docs/capture-store.md, "Claims"). Every process that claims capture writes in a
// store owns one file <dir>/.claim-slots/<pid>-<random>.slots: a 512-byte header, then 512-byte
// slots. A slot is all zero when free; a claim is one pwrite of a whole slot record, its release one
// pwrite of zeros. Records carry a CRC-32C, so a torn record is recognised. The owner holds an
// exclusive flock on its file for as long as it lives; the kernel drops it when the process dies
// (SIGKILL included), which is how readers tell live claims from stale ones.
const (
	// ClaimSlotsDir is the directory of the per-process claim slot files inside a capture dir.
	ClaimSlotsDir = ".claim-slots"
	// SlotFileSuffix ends the name of every claim slot file.
	SlotFileSuffix = ".slots"
	// SlotSize is the size in bytes of the header and of each slot of a claim slot file.
	SlotSize = 512
	// MaxModelCallIDLen is the longest model call id a claim can hold, in bytes.
	MaxModelCallIDLen = 255

	slotMagic       = "MCC1" // a claim record
	headerMagic     = "MCCS" // a slot file header
	initialSlots    = 64
	slotCRCOffset   = SlotSize - 4
	slotIDOffset    = 24
	slotMCIDOffset  = slotIDOffset + rollout.MaxIDLen
	headerHostStart = 24
	tornRetries     = 5
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ClaimInfo is the content of a claim file of the per-call form (one file per model call under
// <id>.capture.claims/, written by earlier versions of the gateway and still read): which process
// on which host claimed the write, and when (seconds since the Unix epoch).
type ClaimInfo struct {
	PID       int     `json:"pid"`
	Host      string  `json:"host"`
	StartedAt float64 `json:"started_at"`
}

// Claim is an outstanding capture write for one model call: a slot of this process's claim slot
// file holds its record from Claim until Release. Readers wait for claims to go away before they read
// a rollout (quiescence). If the rollout is cleared while the call is in flight, the call's line goes
// to <id>.capture.orphaned.jsonl instead of the next attempt's capture (the clear lists the claims
// it saw; the append looks them up). A claim made while the Store holds the rollout's capture file
// open pins that file until Release: an append through it that finds the file still at its path
// knows no clear happened since the claim, and skips the lookup.
type Claim struct {
	s           *Store
	id          string
	modelCallID string
	sw          *slotFile // nil when the slot could not be written (see Claim)
	slot        int
	file        *openFile // the capture file the claim pins; nil when none was open
	once        sync.Once
	err         error
}

var (
	hostOnce sync.Once
	hostName string
)

func localHost() string {
	hostOnce.Do(func() {
		hostName, _ = os.Hostname()
	})
	return hostName
}

// ownSlotFiles holds the inode numbers of the slot files this process writes (of any Store), so a
// reader in the same process never probes their locks (flock is per open file; on file systems that
// emulate it with POSIX locks, a probe from the owning process would not conflict).
var ownSlotFiles sync.Map // fileID -> struct{}

// fileID names a file on this host: device and inode number.
type fileID struct{ dev, ino uint64 }

// slotFile is this process's claim slot file of one store.
type slotFile struct {
	f        *os.File
	path     string
	dev, ino uint64
	mu       sync.Mutex
	free     []int // free slot indices
	n        int   // slots the file holds
	out      int   // claims outstanding in it
	retired  bool  // replaced by a new file: closed when out drops to 0
	dsync    bool
}

// claims is a Store's claim state.
type claims struct {
	mu   sync.Mutex
	sf   *slotFile
	live map[string]*Claim // rollout id + "\x00" + model call id
}

func claimKey(id, mcid string) string { return id + "\x00" + mcid }

// Claim records that a capture write for model call modelCallID of rollout id is outstanding.
// modelCallID must be a plain file name (no '/', not "." or "..") of at most MaxModelCallIDLen bytes, and not already claimed in this
// Store. The record is one pwrite into this process's slot file; it is not fsynced (claims coordinate
// live processes; after a crash the process is gone and readers find its claims stale). On a network
// file system the slot file is opened O_DSYNC so other hosts see the record at once. When the slot
// cannot be written (the slot dir is a symlink, the dir is gone or read-only), Claim fails and
// nothing is recorded.
func (s *Store) Claim(id, modelCallID string) (*Claim, error) {
	if modelCallID == "" || strings.ContainsAny(modelCallID, "/\x00") || modelCallID == "." || modelCallID == ".." {
		return nil, fmt.Errorf("claim capture write: bad model call id %q", modelCallID)
	}
	if len(modelCallID) > MaxModelCallIDLen {
		return nil, fmt.Errorf("claim capture write: model call id of %d bytes, at most %d", len(modelCallID), MaxModelCallIDLen)
	}
	if err := rollout.Validate(id); err != nil {
		return nil, err
	}
	key := claimKey(id, modelCallID)
	c := &Claim{s: s, id: id, modelCallID: modelCallID}
	s.claims.mu.Lock()
	if s.claims.live == nil {
		s.claims.live = map[string]*Claim{}
	}
	if _, dup := s.claims.live[key]; dup {
		s.claims.mu.Unlock()
		return nil, fmt.Errorf("claim capture write: model call %s of rollout %s is already claimed", modelCallID, id)
	}
	s.claims.live[key] = c
	s.claims.mu.Unlock()

	sf, err := s.slotFile()
	if err == nil {
		c.slot, err = sf.claim(id, modelCallID)
		if errors.Is(err, errSlotFileRetired) {
			// Replaced since slotFile returned it (the dir was moved or replaced): once more.
			if sf, err = s.slotFile(); err == nil {
				c.slot, err = sf.claim(id, modelCallID)
			}
		}
	}
	if err != nil {
		s.claims.mu.Lock()
		delete(s.claims.live, key)
		s.claims.mu.Unlock()
		return nil, fmt.Errorf("claim capture write: %w", err)
	}
	c.sw = sf
	c.file = s.files.pinKept(id)
	return c, nil
}

// Release zeroes the claim's slot. It is safe to call more than once; only the first call acts, and
// later calls return its result.
func (c *Claim) Release() error {
	c.once.Do(func() {
		s := c.s
		s.claims.mu.Lock()
		if s.claims.live[claimKey(c.id, c.modelCallID)] == c {
			delete(s.claims.live, claimKey(c.id, c.modelCallID))
		}
		s.claims.mu.Unlock()
		if err := c.sw.release(c.slot); err != nil {
			c.err = fmt.Errorf("release capture claim: %w", err)
		}
		if c.file != nil {
			s.files.release(c.file)
		}
	})
	return c.err
}

// Append appends line for the claim's rollout like Store.Append; when the rollout was cleared while
// the claim was live, the line goes to <id>.capture.orphaned.jsonl instead.
func (c *Claim) Append(line []byte) error { return c.s.appendLine(c.id, c, line) }

// lookupClaim returns this Store's live claim of (id, mcid), or nil.
func (s *Store) lookupClaim(id, mcid string) *Claim {
	if mcid == "" {
		return nil
	}
	s.claims.mu.Lock()
	defer s.claims.mu.Unlock()
	return s.claims.live[claimKey(id, mcid)]
}

// slotFile returns the store's slot file, creating it on first use and again when the one it had is
// no longer at its path (the capture dir was moved or replaced): a reader looking at the dir would
// not see claims written there.
func (s *Store) slotFile() (*slotFile, error) {
	// The check is a system call: made without the claims lock, which every claim, release and
	// append takes.
	s.claims.mu.Lock()
	seen := s.claims.sf
	s.claims.mu.Unlock()
	if seen != nil && seen.atPath() {
		return seen, nil
	}
	s.claims.mu.Lock()
	defer s.claims.mu.Unlock()
	if sf := s.claims.sf; sf != nil {
		if sf != seen {
			return sf, nil // another claim replaced it meanwhile
		}
		// Keep the old file open for the claims still in it; new claims go to a new file.
		sf.mu.Lock()
		sf.retired = true
		if sf.out == 0 {
			ownSlotFiles.Delete(fileID{sf.dev, sf.ino})
			sf.f.Close()
		}
		sf.mu.Unlock()
		s.claims.sf = nil
	}
	sf, err := s.createSlotFile()
	if err != nil {
		return nil, err
	}
	s.claims.sf = sf
	return sf, nil
}

// errSlotFileRetired is returned by a claim in a slot file that a new one has replaced.
var errSlotFileRetired = errors.New("claim slot file replaced")

// claim writes a record for (id, mcid) into a free slot, growing the file when all are taken.
func (sf *slotFile) claim(id, mcid string) (int, error) {
	sf.mu.Lock()
	if sf.retired {
		sf.mu.Unlock()
		return 0, errSlotFileRetired
	}
	if len(sf.free) == 0 {
		grown := sf.n * 2
		if err := sf.f.Truncate(int64(SlotSize * (1 + grown))); err != nil {
			sf.mu.Unlock()
			return 0, fmt.Errorf("grow claim slot file: %w", err)
		}
		for i := grown - 1; i >= sf.n; i-- {
			sf.free = append(sf.free, i)
		}
		sf.n = grown
	}
	slot := sf.free[len(sf.free)-1]
	sf.free = sf.free[:len(sf.free)-1]
	sf.out++
	sf.mu.Unlock()
	var rec [SlotSize]byte
	encodeSlot(rec[:], id, mcid, time.Now().UnixNano())
	if _, err := sf.f.WriteAt(rec[:], slotOffset(slot)); err != nil {
		// The slot may hold part of the record; zero it before it is reused.
		if _, zerr := sf.f.WriteAt(make([]byte, SlotSize), slotOffset(slot)); zerr == nil {
			sf.put(slot)
		}
		return 0, fmt.Errorf("write claim slot: %w", err)
	}
	return slot, nil
}

// release zeroes a slot, then makes it free again. A slot that cannot be zeroed is never reused.
func (sf *slotFile) release(slot int) error {
	var zero [SlotSize]byte
	if _, err := sf.f.WriteAt(zero[:], slotOffset(slot)); err != nil {
		return err
	}
	sf.put(slot)
	return nil
}

func (sf *slotFile) put(slot int) {
	sf.mu.Lock()
	sf.free = append(sf.free, slot)
	sf.out--
	if sf.retired && sf.out == 0 {
		ownSlotFiles.Delete(fileID{sf.dev, sf.ino})
		sf.f.Close()
	}
	sf.mu.Unlock()
}

func slotOffset(slot int) int64 { return int64(SlotSize) * int64(slot+1) }

// encodeSlot fills rec (SlotSize bytes) with a claim record:
//
//	0   "MCC1"
//	4   rollout id length, 1 byte; 5: model call id length, 1 byte; 6-7 zero
//	8   claimed at, Unix nanoseconds, int64 little-endian
//	16  zero (reserved)
//	24  rollout id (up to 200 bytes), then at 224 the model call id (up to 255 bytes), zero padded
//	508 CRC-32C (Castagnoli) of bytes 0-507, little-endian
func encodeSlot(rec []byte, id, mcid string, at int64) {
	copy(rec, slotMagic)
	rec[4], rec[5] = byte(len(id)), byte(len(mcid))
	binary.LittleEndian.PutUint64(rec[8:], uint64(at))
	copy(rec[slotIDOffset:], id)
	copy(rec[slotMCIDOffset:], mcid)
	binary.LittleEndian.PutUint32(rec[slotCRCOffset:], crc32.Checksum(rec[:slotCRCOffset], crcTable))
}

// slotRecord is a decoded claim record.
type slotRecord struct {
	id, mcid string
	at       int64
}

// decodeSlot reads a slot: free (all zero), a complete record, or damaged (torn or foreign bytes).
func decodeSlot(rec []byte) (r slotRecord, free, ok bool) {
	if isZero(rec) {
		return r, true, false
	}
	if string(rec[:4]) != slotMagic || binary.LittleEndian.Uint32(rec[slotCRCOffset:]) != crc32.Checksum(rec[:slotCRCOffset], crcTable) {
		return r, false, false
	}
	il, ml := int(rec[4]), int(rec[5])
	if il > rollout.MaxIDLen || ml > MaxModelCallIDLen {
		return r, false, false
	}
	r.id = string(rec[slotIDOffset : slotIDOffset+il])
	r.mcid = string(rec[slotMCIDOffset : slotMCIDOffset+ml])
	r.at = int64(binary.LittleEndian.Uint64(rec[8:]))
	return r, false, true
}

// tornID is the rollout id of a damaged slot when its id bytes still spell a valid one.
func tornID(rec []byte) string {
	il := int(rec[4])
	if il == 0 || il > rollout.MaxIDLen {
		return ""
	}
	id := string(rec[slotIDOffset : slotIDOffset+il])
	if rollout.Validate(id) != nil {
		return ""
	}
	return id
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// encodeHeader builds the header of a slot file:
//
//	0   "MCCS"; 4: format version 1; 5: host name length; 6-7 zero
//	8   pid of the owner, int64 little-endian; 16: created at, Unix nanoseconds
//	24  host name (up to 255 bytes), zero padded; 508: CRC-32C of bytes 0-507
func encodeHeader(pid int, host string, at int64) []byte {
	if len(host) > 255 {
		host = host[:255]
	}
	h := make([]byte, SlotSize)
	copy(h, headerMagic)
	h[4], h[5] = 1, byte(len(host))
	binary.LittleEndian.PutUint64(h[8:], uint64(pid))
	binary.LittleEndian.PutUint64(h[16:], uint64(at))
	copy(h[headerHostStart:], host)
	binary.LittleEndian.PutUint32(h[slotCRCOffset:], crc32.Checksum(h[:slotCRCOffset], crcTable))
	return h
}

func decodeHeader(h []byte) (pid int, host string, ok bool) {
	if len(h) < SlotSize || string(h[:4]) != headerMagic || binary.LittleEndian.Uint32(h[slotCRCOffset:]) != crc32.Checksum(h[:slotCRCOffset], crcTable) {
		return 0, "", false
	}
	return int(binary.LittleEndian.Uint64(h[8:])), string(h[headerHostStart : headerHostStart+int(h[5])]), true
}

// ClaimCount counts the outstanding claims of a rollout.
type ClaimCount struct {
	// Live claims belong to a process that may still write (it holds its slot file's lock, or it is
	// on another host and locks cannot tell).
	Live int
	// Stale claims belong to a process that no longer exists, or cannot be read (a torn record whose
	// rollout id is still legible, a per-call claim file that is empty or not JSON): the write will
	// never land, and readers report the rollout as incomplete.
	Stale int
	// Cleared claims are live claims that a clear of the rollout listed in <id>.capture.cleared: the
	// call was in flight when its rollout was cleared. Its line goes to <id>.capture.orphaned.jsonl,
	// never to the current capture, so readers do not wait for it.
	Cleared int
}

// Add adds o's counts to c's (the claims of one rollout over several stores).
func (c *ClaimCount) Add(o ClaimCount) {
	c.Live += o.Live
	c.Stale += o.Stale
	c.Cleared += o.Cleared
}

// Claims counts the outstanding claims of rollout id: the records in every slot file of the store,
// plus per-call claim files of earlier versions under <id>.capture.claims/. No claims, no slot dir,
// or a slot dir that is a symlink (never followed) count nothing.
func (s *Store) Claims(id string) (ClaimCount, error) {
	if err := rollout.Validate(id); err != nil {
		return ClaimCount{}, err
	}
	// One rollout's count is kept in place, without AllClaims' per-rollout maps: a merge counts
	// the claims of every rollout it reads.
	var c ClaimCount
	var cleared map[string]bool
	clearedRead := false
	if err := s.scanSlotFiles(func(rec slotRecord, live, torn bool) {
		if rec.id != id {
			return
		}
		c.tally(live, torn, func() bool {
			if !clearedRead {
				cleared, _ = s.readCleared(id)
				clearedRead = true
			}
			return cleared[rec.mcid]
		})
	}); err != nil {
		return ClaimCount{}, err
	}
	legacy, err := s.legacyClaims(id)
	if err != nil {
		return ClaimCount{}, err
	}
	c.Add(legacy)
	return c, nil
}

// AllClaims counts the outstanding claims of every rollout that has any, keyed by rollout id (for a
// viewer or `stats` over a whole dir). Per-call claim directories of earlier versions are included.
func (s *Store) AllClaims() (map[string]ClaimCount, error) {
	out := map[string]ClaimCount{}
	cleared := map[string]map[string]bool{} // per rollout, the model call ids its last clear listed
	if err := s.scanSlotFiles(func(rec slotRecord, live, torn bool) {
		c := out[rec.id]
		c.tally(live, torn, func() bool {
			set, ok := cleared[rec.id]
			if !ok {
				set, _ = s.readCleared(rec.id)
				cleared[rec.id] = set
			}
			return set[rec.mcid]
		})
		out[rec.id] = c
	}); err != nil {
		return nil, err
	}
	ids, err := s.legacyClaimDirs()
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		c, err := s.legacyClaims(id)
		if err != nil {
			return nil, err
		}
		if c != (ClaimCount{}) {
			sum := out[id]
			sum.Add(c)
			out[id] = sum
		}
	}
	return out, nil
}

// tally counts one slot record of a rollout into c: stale when it is torn or its writer is gone,
// else cleared when the rollout's last clear listed its model call (cleared is asked only then),
// else live.
func (c *ClaimCount) tally(live, torn bool, cleared func() bool) {
	switch {
	case torn || !live:
		c.Stale++
	case cleared():
		c.Cleared++
	default:
		c.Live++
	}
}

// legacyClaimDirs lists the rollout ids that have a per-call claims directory.
func (s *Store) legacyClaimDirs() ([]string, error) {
	ents, err := s.entries()
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ClaimsSuffix); ok && rollout.Validate(id) == nil && e.Type().IsDir() {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// scanSlotFiles calls fn for every claim record in the store's slot files: live tells whether the
// owner still runs, torn marks a record that stayed damaged over several reads (attributed by its
// rollout id bytes when legible, otherwise skipped).
func (s *Store) scanSlotFiles(fn func(rec slotRecord, live, torn bool)) error {
	return s.eachSlotFile(func(f *os.File, id fileID) error { return scanSlotFile(f, id, fn) })
}

// isSlotFileName reports whether a name in the slot directory is a slot file's (dot files, the
// temporary names of files being created, are not).
func isSlotFileName(name string) bool {
	return strings.HasSuffix(name, SlotFileSuffix) && !strings.HasPrefix(name, ".")
}

// scanSlotFile reads the open slot file f (a regular file; id names it) and calls fn for each of its
// records.
func scanSlotFile(f *os.File, id fileID, fn func(rec slotRecord, live, torn bool)) error {
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("read claim slot file %s: %w", f.Name(), err)
	}
	if len(data) < SlotSize {
		return nil
	}
	liveKnown, live := false, false
	isLive := func() bool {
		if !liveKnown {
			live, liveKnown = ownerAlive(f, id, data[:SlotSize]), true
		}
		return live
	}
	for off := SlotSize; off+SlotSize <= len(data); off += SlotSize {
		rec := data[off : off+SlotSize]
		r, free, ok := decodeSlot(rec)
		for try := 0; !free && !ok && try < tornRetries; try++ {
			// A record being written right now can read torn; read it again.
			time.Sleep(time.Duration(try+1) * 50 * time.Microsecond)
			var again [SlotSize]byte
			if n, _ := f.ReadAt(again[:], int64(off)); n == SlotSize {
				copy(rec, again[:])
			}
			r, free, ok = decodeSlot(rec)
		}
		switch {
		case free:
		case ok:
			fn(r, isLive(), false)
		default:
			if id := tornID(rec); id != "" {
				fn(slotRecord{id: id}, isLive(), true)
			}
		}
	}
	return nil
}

// ownerAlive tells whether the process that owns a slot file still runs. Our own files are alive.
// Otherwise the owner's lock answers (ownerLockHeld): a non-blocking shared flock is refused while the
// owner holds its exclusive lock, and granted once the owner is gone. Where locks are not supported
// (or on Windows, which cannot see a flock), the header's host and pid decide: alive when on another
// host (it cannot be checked), else by fsutil.ProcessAlive.
func ownerAlive(f *os.File, id fileID, header []byte) bool {
	if _, own := ownSlotFiles.Load(id); own {
		// Ours, unless the inode number was reused for another process's file: the header names
		// the owner.
		if pid, _, ok := decodeHeader(header); !ok || pid == os.Getpid() {
			return true
		}
	}
	if held, known := ownerLockHeld(f); known {
		return held
	}
	pid, host, ok := decodeHeader(header)
	if !ok || host != localHost() {
		return true
	}
	return fsutil.ProcessAlive(pid)
}
