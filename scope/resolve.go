package scope

// Candidate is anything that sits at a level under a (type, key) name.
type Candidate interface {
	ScopeLevel() Level
	Name() (typ, key string)
}

// Resolve keeps, for each (type, key), only the narrowest candidate, in the
// order the winners first appear. Broader candidates are dropped, not changed.
func Resolve[T Candidate](cs []T) []T {
	type name struct{ typ, key string }
	best := make(map[name]int, len(cs))
	out := make([]T, 0, len(cs))
	for _, c := range cs {
		t, k := c.Name()
		n := name{t, k}
		if i, ok := best[n]; ok {
			if c.ScopeLevel().Narrower(out[i].ScopeLevel()) {
				out[i] = c
			}
			continue
		}
		best[n] = len(out)
		out = append(out, c)
	}
	return out
}
