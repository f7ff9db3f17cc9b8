package view

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/modelcalls/modelcalls/rollout"
	"github.com/modelcalls/modelcalls/rundiff"
)

// DiffResult answers GET /api/diff: the comparison of two runs (rundiff.Result's fields) and the
// capture dirs the viewer serves, by index, for choosing a side's dir.
type DiffResult struct {
	Version uint64 `json:"version"`
	*rundiff.Result
	Dirs []string `json:"dirs"`
}

// Diff compares rollout a in the dir of index aDir with rollout b in the dir of index bDir (see
// package rundiff). A dir index below 0 means the first dir that holds that rollout's capture
// file or incomplete marker, as the index picks a rollout's dir.
func (x *Index) Diff(a string, aDir int, b string, bDir int) (*DiffResult, error) {
	v, _ := x.Version()
	var runs [2]*rundiff.Run
	for i, side := range []struct {
		id  string
		dir int
	}{{a, aDir}, {b, bDir}} {
		if side.dir >= len(x.stores) {
			return nil, fmt.Errorf("%w: dir %d: the viewer serves %d capture dirs", errBadParam, side.dir, len(x.stores))
		}
		if side.dir < 0 {
			for j, st := range x.stores {
				hasCapture, marker, err := st.Stat(side.id)
				if err != nil {
					return nil, err
				}
				if hasCapture || marker {
					side.dir = j
					break
				}
			}
		}
		if side.dir < 0 {
			return nil, fmt.Errorf("%w %s", ErrNoRollout, side.id)
		}
		st := x.stores[side.dir]
		if hasCapture, marker, err := st.Stat(side.id); err != nil {
			return nil, err
		} else if !hasCapture && !marker {
			return nil, fmt.Errorf("%w %s in %s", ErrNoRollout, side.id, st.Dir())
		}
		r, err := rundiff.Load(st, st.Dir(), side.id)
		if err != nil {
			return nil, err
		}
		runs[i] = r
	}
	d := &DiffResult{Version: v, Result: rundiff.Compare(runs[0], runs[1])}
	for _, st := range x.stores {
		d.Dirs = append(d.Dirs, st.Dir())
	}
	return d, nil
}

// diff serves GET /api/diff?a=ROLLOUT&b=ROLLOUT2[&a_dir=N][&b_dir=N].
func (s *Server) diff(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a, b := q.Get("a"), q.Get("b")
	for name, id := range map[string]string{"a": a, "b": b} {
		if err := rollout.Validate(id); err != nil {
			apiError(w, http.StatusBadRequest, name+": a rollout id: "+err.Error())
			return
		}
	}
	dirs := [2]int{-1, -1}
	for i, name := range []string{"a_dir", "b_dir"} {
		if v := q.Get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				apiError(w, http.StatusBadRequest, name+": want the index of a capture dir (0 for the first --capture-dir)")
				return
			}
			dirs[i] = n
		}
	}
	if a == b && dirs[0] == dirs[1] {
		apiError(w, http.StatusBadRequest, "a and b name the same run: give another rollout, or another dir (a_dir, b_dir)")
		return
	}
	d, err := s.idx.Diff(a, dirs[0], b, dirs[1])
	if err != nil {
		if isBadParam(err) {
			apiError(w, http.StatusBadRequest, err.Error())
			return
		}
		loadError(w, err)
		return
	}
	writeJSON(w, d)
}

// errBadParam marks an error of a request's parameters (answered 400).
var errBadParam = errors.New("bad parameter")

func isBadParam(err error) bool { return errors.Is(err, errBadParam) }
