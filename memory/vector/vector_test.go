package vector

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
)

func TestDot(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 384, 385} {
		a, b := make([]int8, n), make([]int8, n)
		var want int32
		for i := range a {
			a[i], b[i] = int8(i*37%255-127), int8(i*91%255-127)
			want += int32(a[i]) * int32(b[i])
		}
		if got := Dot(a, b); got != want {
			t.Errorf("n=%d: %d, want %d", n, got, want)
		}
	}
}

func random(r *rand.Rand, dims int) []float32 {
	v := make([]float32, dims)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

func cosine(a, b []float32) float64 {
	var d float64
	ua, ub := Unit(a), Unit(b)
	for i := range ua {
		d += float64(ua[i]) * float64(ub[i])
	}
	return d
}

// TestNearestMatchesExact compares the quantized scan, on one CPU and
// split across several, with exact float64 cosines, and checks that
// partitions and levels are honoured and deletes take effect.
func TestNearestMatchesExact(t *testing.T) {
	for _, n := range []int{50, 20000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r := rand.New(rand.NewSource(int64(n)))
			const dims = 64
			x := New(dims)
			vecs := map[int64][]float32{}
			for i := range n {
				id := int64(i + 1)
				part, level := "mine", int8(0)
				switch i % 4 {
				case 1:
					part = "other"
				case 2:
					part, level = "", 1 // shared, too low a level
				case 3:
					part, level = "", 3
				}
				v := random(r, dims)
				x.Put(id, part, level, v)
				if part == "mine" || part == "" && level >= 2 {
					vecs[id] = v
				}
			}
			// Replace one, delete another.
			x.Put(1, "mine", 0, random(r, dims))
			delete(vecs, 1)
			x.Delete(1)
			if x.Len() != n-1 {
				t.Fatalf("len %d", x.Len())
			}
			q := random(r, dims)
			got := x.Nearest(q, 10, func(p string) (bool, int8) {
				switch p {
				case "mine":
					return true, 0
				case "":
					return true, 2
				}
				return false, 0
			})
			type scored struct {
				id  int64
				sim float64
			}
			var want []scored
			for id, v := range vecs {
				if c := cosine(q, v); c > 0 {
					want = append(want, scored{id, c})
				}
			}
			slices.SortFunc(want, func(a, b scored) int {
				if a.sim > b.sim {
					return -1
				}
				return 1
			})
			if len(got) != 10 {
				t.Fatalf("%d matches", len(got))
			}
			for i, m := range got {
				if _, ok := vecs[m.ID]; !ok {
					t.Fatalf("match %d (id %d) is not visible", i, m.ID)
				}
				if d := float64(m.Sim) - cosine(q, vecs[m.ID]); d > 0.05 || d < -0.05 {
					t.Errorf("id %d: similarity %v, exact %v", m.ID, m.Sim, cosine(q, vecs[m.ID]))
				}
				if i > 0 && m.Sim > got[i-1].Sim {
					t.Fatalf("not best first at %d", i)
				}
			}
			// Quantization may swap near-ties, not lose the best.
			if got[0].ID != want[0].id && want[0].sim-float64(got[0].Sim) > 0.05 {
				t.Errorf("best %d (%v), exact best %d (%v)", got[0].ID, got[0].Sim, want[0].id, want[0].sim)
			}
		})
	}
}

// BenchmarkNearest is the brute-force scan: 70% of the vectors visible to
// the caller, the best 60 kept.
func BenchmarkNearest(b *testing.B) {
	for _, dims := range []int{384, 768} {
		for _, n := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("vectors=%d/dims=%d", n, dims), func(b *testing.B) {
				r := rand.New(rand.NewSource(1))
				x := New(dims)
				for i := range n {
					part := "mine"
					if i%10 < 3 {
						part = "other"
					}
					x.Put(int64(i+1), part, 0, random(r, dims))
				}
				q := random(r, dims)
				visible := func(p string) (bool, int8) { return p == "mine", 0 }
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if got := x.Nearest(q, 60, visible); len(got) != 60 {
						b.Fatalf("%d matches", len(got))
					}
				}
			})
		}
	}
}
