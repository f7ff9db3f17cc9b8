package capture

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/modelcalls/modelcalls/internal/fsutil"
)

// ClaimInfo is the content of a claim file: which process on which host claimed the write, and when
// (seconds since the Unix epoch).
type ClaimInfo struct {
	PID       int     `json:"pid"`
	Host      string  `json:"host"`
	StartedAt float64 `json:"started_at"`
}

// Claim is an outstanding capture write for one model call: the file
// <dir>/<id>.capture.claims/<model_call_id> exists from Claim until Release (SPEC §4). Readers wait
// for claims to go away before they read a rollout (quiescence).
type Claim struct {
	path string
	once sync.Once
	err  error
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

// Claim records that a capture write for model call modelCallID of rollout id is outstanding. The
// claims directory is created on demand. modelCallID must be a plain file name (no '/', not "." or
// ".."). The claim file is not fsynced: it coordinates live processes, and a crash leaves a claim
// that readers find stale.
func (s *Store) Claim(id, modelCallID string) (*Claim, error) {
	if modelCallID == "" || strings.ContainsAny(modelCallID, "/\x00") || modelCallID == "." || modelCallID == ".." {
		return nil, fmt.Errorf("claim capture write: bad model call id %q", modelCallID)
	}
	dir, err := s.ClaimsPath(id)
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(ClaimInfo{PID: os.Getpid(), Host: localHost(), StartedAt: float64(time.Now().UnixNano()) / 1e9})
	p := filepath.Join(dir, modelCallID)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, FileMode)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(dir, DirMode); err == nil {
			f, err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, FileMode)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("claim capture write: %w", err)
	}
	_, werr := f.Write(body)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(p)
		return nil, fmt.Errorf("claim capture write: %w", err)
	}
	return &Claim{path: p}, nil
}

// Release removes the claim file. It is safe to call more than once; only the first call acts, and
// later calls return its result. A claim already removed (e.g. by Clear) is not an error.
func (c *Claim) Release() error {
	c.once.Do(func() {
		if err := os.Remove(c.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			c.err = fmt.Errorf("release capture claim: %w", err)
		}
	})
	return c.err
}

// ClaimCount counts the outstanding claims of a rollout.
type ClaimCount struct {
	// Live claims belong to a process that may still write (this host and alive, another host, or
	// a claim file not yet readable).
	Live int
	// Stale claims belong to a process on this host that no longer exists: its write will never
	// land, and readers report the rollout as incomplete.
	Stale int
}

// Claims counts the outstanding claims of rollout id. A missing claims directory counts nothing.
func (s *Store) Claims(id string) (ClaimCount, error) {
	dir, err := s.ClaimsPath(id)
	if err != nil {
		return ClaimCount{}, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return ClaimCount{}, nil
		}
		return ClaimCount{}, fmt.Errorf("list capture claims: %w", err)
	}
	var c ClaimCount
	host := localHost()
	for _, e := range ents {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // released while we listed
		}
		var info ClaimInfo
		if err == nil && json.Unmarshal(b, &info) == nil && info.Host == host && info.PID > 0 && !fsutil.ProcessAlive(info.PID) {
			c.Stale++
			continue
		}
		c.Live++
	}
	return c, nil
}
