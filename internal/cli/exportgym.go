package cli

import (
	"encoding/json"
	"fmt"

	"github.com/modelcalls/modelcalls/tokens/tokenexport"
)

// gymSink writes NeMo Gym's token files into a directory through tokenexport.GymDir: a rollout's
// lines are staged when the rollout is done, and put in place (stale files of earlier exports
// removed) on commit.
type gymSink struct {
	dir   *tokenexport.GymDir
	lines []byte
}

func newGymSink(dir, captureDir string, wholeDir bool) (*gymSink, error) {
	d, err := tokenexport.OpenGymDir(dir, captureDir, wholeDir)
	if err != nil {
		return nil, withExit(ExitFailure, fmt.Errorf("--out: %w", err))
	}
	return &gymSink{dir: d}, nil
}

func (g *gymSink) write(r *tokenexport.Row) (bool, error) {
	rec, ok := r.Gym()
	if !ok {
		return false, nil
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return false, fmt.Errorf("encode Gym record: %w", err)
	}
	g.lines = append(append(g.lines, b...), '\n')
	return true, nil
}

func (g *gymSink) endRollout(id string) error {
	defer func() { g.lines = g.lines[:0] }()
	return g.dir.Stage(id, g.lines)
}

func (g *gymSink) commit() error { return g.dir.Commit() }
func (g *gymSink) abort()        { g.dir.Close() }
