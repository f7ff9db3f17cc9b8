package stats

import "math"

// IntSum sums optional counts: Add skips nil, Result is nil when no value was added (none known),
// else the sum of the known ones. The zero value is an empty sum.
type IntSum struct {
	v     int64
	known bool
}

// Add adds *p when p is not nil.
func (s *IntSum) Add(p *int64) {
	if p != nil {
		s.v += *p
		s.known = true
	}
}

// Result is the sum, nil when nothing was added.
func (s IntSum) Result() *int64 {
	if !s.known {
		return nil
	}
	v := s.v
	return &v
}

// FloatSum is Neumaier's compensated summation (the algorithm Python >= 3.12's sum() uses), so a
// sum does not depend on accumulated rounding nor, for the usual inputs, on the order of its terms:
// the running compensation c collects the low-order bits that s loses, whichever operand is larger.
// The zero value is an empty sum.
type FloatSum struct {
	s, c  float64
	known bool
}

// Add adds x.
func (f *FloatSum) Add(x float64) {
	f.known = true
	t := f.s + x
	if math.Abs(f.s) >= math.Abs(x) {
		f.c += (f.s - t) + x
	} else {
		f.c += (x - t) + f.s
	}
	f.s = t
}

// AddOpt adds *p when p is not nil.
func (f *FloatSum) AddOpt(p *float64) {
	if p != nil {
		f.Add(*p)
	}
}

// Sum is the compensated sum, 0 when nothing was added.
func (f FloatSum) Sum() float64 { return f.s + f.c }

// Result is the compensated sum, nil when nothing was added.
func (f FloatSum) Result() *float64 {
	if !f.known {
		return nil
	}
	v := f.Sum()
	return &v
}
